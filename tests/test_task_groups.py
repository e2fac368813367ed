"""background_tasks: the block's exception leaves unwrapped, its tasks stop, cancellation passes."""

from __future__ import annotations

import anyio
import pytest

from runner.task_groups import background_tasks


async def serve(stopped: anyio.Event) -> None:
    try:
        await anyio.sleep_forever()
    finally:
        stopped.set()


async def test_the_blocks_exception_leaves_unwrapped_after_its_tasks_stopped() -> None:
    stopped = anyio.Event()
    with pytest.raises(KeyError) as caught:
        async with background_tasks() as group:
            group.start_soon(serve, stopped)
            await anyio.wait_all_tasks_blocked()
            raise KeyError("mine")
    assert caught.value.args == ("mine",)
    assert stopped.is_set()


async def test_the_tasks_are_cancelled_when_the_block_ends() -> None:
    stopped = anyio.Event()
    async with background_tasks() as group:
        group.start_soon(serve, stopped)
    assert stopped.is_set()


async def test_a_tasks_failure_is_still_the_groups() -> None:
    async def fail() -> None:
        raise ValueError("task")

    with pytest.raises(BaseExceptionGroup) as caught:
        async with background_tasks() as group:
            group.start_soon(fail)
            await anyio.sleep_forever()
    assert [type(exc) for exc in caught.value.exceptions] == [ValueError]


async def test_the_groups_own_cancellation_ends_at_the_group() -> None:
    reached = False
    async with background_tasks() as group:
        group.cancel_scope.cancel()
        await anyio.sleep_forever()
        reached = True
    assert not reached


async def test_an_outer_cancellation_passes_through() -> None:
    with anyio.CancelScope() as outer:
        async with background_tasks():
            outer.cancel()
            await anyio.sleep_forever()
    assert outer.cancelled_caught
