"""A server's lifecycle record: written by its supervisor, read as frozen snapshots."""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from runner.errors import ServerClosedError, ServerStartError
from runner.servers.lifecycle import Lifecycle, ServerLifecycle

pytestmark = pytest.mark.anyio


def test_a_snapshot_cannot_be_written_and_a_write_makes_a_new_one() -> None:
    lifecycle = ServerLifecycle()
    before = lifecycle.now
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.status = "ready"  # type: ignore[misc]
    lifecycle.ready(era="2025-11-25", instructions="hi", pid=42)
    assert before == Lifecycle()  # what a reader held does not change under it
    assert (lifecycle.now.status, lifecycle.now.sessions, lifecycle.now.pid) == ("ready", 1, 42)
    assert lifecycle.settled.is_set()


def test_a_session_that_ends_is_restarting_and_a_failure_settles_the_server() -> None:
    lifecycle = ServerLifecycle()
    lifecycle.ready(era=None, instructions=None, pid=7)
    lifecycle.detached()
    lifecycle.session_ended(ServerClosedError("s", "the connection closed"))
    lifecycle.restart_attempted()
    lifecycle.start_failed(ServerStartError("s", "cannot start"))
    assert lifecycle.now.status == "restarting"
    assert (lifecycle.now.pid, lifecycle.now.restarts) == (None, 1)
    assert "closed" in str(lifecycle.now.last_incident)
    failure = ServerStartError("s", "gave up")
    lifecycle.failed(failure)
    lifecycle.ended()
    assert (lifecycle.now.status, lifecycle.now.error) == ("failed", failure)  # not "stopped"
    assert lifecycle.finished.is_set()


async def test_a_reader_waiting_for_a_status_wakes_when_the_supervisor_writes_it() -> None:
    lifecycle = ServerLifecycle()
    async with anyio.create_task_group() as tg:
        woke = anyio.Event()

        async def wait_ready() -> None:
            await lifecycle.wait_until(lambda now: now.status == "ready")
            woke.set()

        tg.start_soon(wait_ready)
        await anyio.wait_all_tasks_blocked()
        assert not woke.is_set()
        lifecycle.ready(era=None, instructions=None, pid=None)
        with anyio.fail_after(5):
            await woke.wait()
