"""Conversations kept in a real PostgreSQL (the ``postgres://`` checkpointer): a thread one
``mcp-run`` process started continues in another process, and the checkpointer creates its tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import copy_bundled_agent, mcp_run
from langgraph.checkpoint.base import empty_checkpoint
from services import PostgresServer, free_port, pg_ctl
from thread_turns import take_turns, wait_in_vain

from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn
from runner.errors import CheckpointerError
from runner.store.checkpointers import open_checkpointer


def with_checkpointer(folder: Path, url: str) -> Path:
    manifest = folder / "agent.yaml"
    manifest.write_text(manifest.read_text() + f"checkpointer: {url}\n")
    return manifest


async def human_messages(url: str, thread: str, state_dir: Path) -> list[str]:
    async with open_checkpointer(url, state_dir=state_dir) as saver:
        state = await saver.aget({"configurable": {"thread_id": thread}})
    assert state is not None, f"no checkpoint of thread {thread}"
    return [message.content for message in state["channel_values"]["messages"] if message.type == "human"]


def test_two_one_shot_processes_on_one_postgresql_continue_the_same_thread(
    tmp_path: Path, postgres_url: str
) -> None:
    folder = copy_bundled_agent(tmp_path)
    with_checkpointer(folder, postgres_url)
    turn = 'notes__calculate {"expression": "2*3"}'
    first = mcp_run("agent.yaml", "-p", turn, "--thread", "t1", cwd=folder)
    assert first.returncode == 0, first.stderr
    second = mcp_run("agent.yaml", "-p", "hello again", "--thread", "t1", cwd=folder)
    assert second.returncode == 0, second.stderr
    humans = anyio.run(human_messages, postgres_url, "t1", tmp_path / "state")
    assert humans == [turn, "hello again"]
    assert not (folder / ".mcp-run" / "state.sqlite").exists()  # nothing went to the default store


async def test_checkpointers_opening_together_on_a_new_database_all_find_its_tables(
    tmp_path: Path, postgres_url: str
) -> None:
    opened: list[object] = []

    async def open_one() -> None:
        async with open_checkpointer(postgres_url, state_dir=tmp_path) as saver:
            await saver.aput(config("t"), empty_checkpoint(), {}, {})
            opened.append(saver)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for _ in range(6):
                group.start_soon(open_one)
    assert len(opened) == 6


async def test_a_connection_the_database_closed_is_replaced_before_the_next_write(
    tmp_path: Path, postgres_url: str
) -> None:
    import psycopg

    async with open_checkpointer(postgres_url, state_dir=tmp_path) as saver:
        await saver.aput(config("t"), empty_checkpoint(), {}, {})
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
            closed = await admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            assert (await closed.fetchone())[0] >= 1
        with anyio.fail_after(30):
            await saver.aput(config("t"), empty_checkpoint(), {}, {})
            assert await saver.aget_tuple(config("t")) is not None


async def test_a_write_waiting_for_the_database_does_not_hold_up_a_read_of_another_thread(
    tmp_path: Path, postgres_url: str
) -> None:
    import psycopg

    async with open_checkpointer(postgres_url, state_dir=tmp_path) as saver:
        await saver.aput(config("other"), empty_checkpoint(), {}, {})
        blocked = empty_checkpoint()
        async with await psycopg.AsyncConnection.connect(postgres_url) as holder:
            # An open transaction holding the row the write needs: the write waits for it.
            await holder.execute(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata)"
                " VALUES ('t', '', %s, '{}', '{}')", (blocked["id"],))
            async with anyio.create_task_group() as group:
                group.start_soon(saver.aput, config("t"), blocked, {}, {})
                with anyio.fail_after(30):
                    await _until_a_statement_waits_for_a_lock(postgres_url)
                with anyio.fail_after(10):
                    assert await saver.aget_tuple(config("other")) is not None
                await holder.rollback()  # the write goes on


async def _until_a_statement_waits_for_a_lock(url: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as observer:
        # PostgreSQL announces no lock wait: poll its view of the sessions.
        while not await (await observer.execute(  # noqa: ASYNC110 - nothing to wait on but this view
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'")).fetchone():
            await anyio.sleep(0.02)


async def test_an_unreachable_database_is_a_checkpointer_error_without_the_password(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    url = f"postgresql://postgres:CANARYsecret@127.0.0.1:{free_port()}/nowhere"
    with anyio.fail_after(30), pytest.raises(CheckpointerError) as caught:
        async with open_checkpointer(url, state_dir=tmp_path):
            pass
    assert "CANARYsecret" not in str(caught.value) and "127.0.0.1" in str(caught.value)


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


async def test_a_long_thread_keeps_one_checkpoint_and_storage_in_proportion_to_its_length(
    tmp_path: Path, postgres_url: str
) -> None:
    import psycopg
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import START, MessagesState, StateGraph

    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [AIMessage(f"answer {len(state['messages'])}")]})
    graph.add_edge(START, "model")
    sizes = []
    async with open_checkpointer(postgres_url, state_dir=tmp_path) as saver:
        compiled = graph.compile(checkpointer=saver)
        for _batch in range(3):
            for _turn in range(20):  # after every step, as mcp-run writes to PostgreSQL
                await compiled.ainvoke({"messages": [HumanMessage("x" * 1000)]}, config("long"),
                                       durability="async")
            async with await psycopg.AsyncConnection.connect(postgres_url) as connection:
                cursor = await connection.execute(
                    "SELECT (SELECT count(*) FROM checkpoints WHERE thread_id = 'long'),"
                    " (SELECT sum(octet_length(blob)) FROM checkpoint_blobs WHERE thread_id = 'long')")
                kept, blob_bytes = await cursor.fetchone() or (0, 0)
            assert kept == 1
            sizes.append(blob_bytes)
        state = await compiled.aget_state(config("long"))
    assert len(state.values["messages"]) == 2 * 60
    first, second, third = sizes[0], sizes[1] - sizes[0], sizes[2] - sizes[1]
    assert second < 1.6 * first and third < 1.6 * first, sizes  # kept whole: 3 and 5 times the first


async def test_two_savers_on_one_postgresql_take_turns_on_a_thread(tmp_path: Path, postgres_url: str) -> None:
    await take_turns(postgres_url, tmp_path)


async def test_a_wait_for_a_thread_busy_in_postgresql_is_bounded(tmp_path: Path, postgres_url: str) -> None:
    await wait_in_vain(postgres_url, tmp_path)


async def test_a_conversation_goes_on_at_its_first_turn_after_postgresql_was_stopped_and_started(
    tmp_path: Path, own_postgres: PostgresServer
) -> None:
    folder = copy_bundled_agent(tmp_path)
    manifest = with_checkpointer(folder, own_postgres.create_database())
    turn = 'notes__calculate {"expression": "6*7"}'
    with anyio.fail_after(120):
        async with load_agent(manifest, thread_id="kept") as runtime:
            first = [event async for event in stream_turn(runtime, turn)]
            assert first[-1]["type"] == "final", first
            pg_ctl(own_postgres, "-m", "immediate", "stop")  # every pooled connection is dropped
            pg_ctl(own_postgres, "start")
            again = [event async for event in stream_turn(runtime, turn)]
            assert again[-1]["type"] == "final", again
            assert "42" in again[-1]["text"]
            state = await runtime.checkpointer.aget({"configurable": {"thread_id": "kept"}})
    assert state is not None
    assert [m.content for m in state["channel_values"]["messages"] if m.type == "human"] == [turn, turn]
