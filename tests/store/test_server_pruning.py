"""What LangGraph Server asks of the manifest's checkpointer (README: LangGraph Server, its
``checkpointer.path``) beyond reads and writes: pruning threads (``aprune``: keep the latest, or
delete) and deleting a cancelled run's checkpoints (``adelete_for_runs``), on SQLite and on a real
PostgreSQL; the server's own capability check finds both, so it warns of neither."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from runner.store.checkpointers import SqliteCheckpointer, open_checkpointer

pytestmark = pytest.mark.anyio


def config(thread: str, ns: str = "") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}


async def save(saver: BaseCheckpointSaver, thread: str, run: str, ns: str = "") -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_versions"] = {"messages": f"{len(run):032}.0"}
    checkpoint["channel_values"] = {"messages": [run]}  # a list: PostgreSQL keeps it as a blob
    stored = await saver.aput(config(thread, ns), checkpoint, {"run_id": run, "step": 1},
                              checkpoint["channel_versions"])
    await saver.aput_writes(stored, [("messages", run)], task_id=f"task-{run}")


async def threads_left(saver: BaseCheckpointSaver, *threads: str) -> dict[str, list[str]]:
    """Each thread's checkpoints, by the run that saved them."""
    return {thread: [item.metadata.get("run_id", "") async for item in saver.alist(config(thread))]
            for thread in threads}


async def check_runs_and_pruning(saver: BaseCheckpointSaver) -> None:
    await save(saver, "kept", "run-1")
    await save(saver, "rolled-back", "run-2")
    await save(saver, "pruned", "run-3")
    await saver.adelete_for_runs(["run-2", "run-none"])
    assert await threads_left(saver, "kept", "rolled-back", "pruned") == {
        "kept": ["run-1"], "rolled-back": [], "pruned": ["run-3"]}
    await saver.aprune(["kept"], strategy="keep_latest")
    assert await threads_left(saver, "kept") == {"kept": ["run-1"]}
    kept = await saver.aget_tuple(config("kept"))
    assert kept is not None and kept.pending_writes == [("task-run-1", "messages", "run-1")]
    await saver.aprune(["pruned"], strategy="delete_all")  # LangGraph Server's name of "delete"
    assert await threads_left(saver, "kept", "pruned") == {"kept": ["run-1"], "pruned": []}
    with pytest.raises(ValueError, match="unknown prune strategy"):
        await saver.aprune(["kept"], strategy="keep_some")
    with pytest.raises(TypeError):
        await saver.aprune("kept")


async def test_sqlite_deletes_a_runs_checkpoints_and_prunes_threads(tmp_path: Path) -> None:
    async with open_checkpointer(None, state_dir=tmp_path) as saver:
        assert isinstance(saver, SqliteCheckpointer)
        await check_runs_and_pruning(saver)


async def test_sqlite_keep_latest_drops_older_checkpoints_and_their_writes(tmp_path: Path) -> None:
    with SqliteCheckpointer.open(tmp_path / "state.sqlite") as saver:
        # Older rows as another saver of LangGraph's file format leaves them (ours keeps one).
        older, newer = empty_checkpoint(), empty_checkpoint()
        older["id"], newer["id"] = (f"1ef00000-0000-6000-8000-00000000000{n}" for n in (1, 2))
        for checkpoint, run in ((older, "run-old"), (newer, "run-new")):
            with saver.cursor() as cursor:
                cursor.execute("INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, "
                               "checkpoint, metadata) VALUES (?, '', ?, ?, ?, ?)",
                               ("t", checkpoint["id"], *saver.serde.dumps_typed(checkpoint),
                                f'{{"run_id": "{run}"}}'.encode()))
                cursor.execute("INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, "
                               "channel, type, value) VALUES ('t', '', ?, 'task', 0, 'messages', ?, ?)",
                               (checkpoint["id"], *saver.serde.dumps_typed(run)))
        assert await threads_left(saver, "t") == {"t": ["run-new", "run-old"]}
        await saver.aprune(["t"])
        assert await threads_left(saver, "t") == {"t": ["run-new"]}
        with saver.cursor() as cursor:
            assert cursor.execute("SELECT checkpoint_id FROM writes").fetchall() == [(newer["id"],)]


async def test_postgresql_deletes_a_runs_checkpoints_and_prunes_threads(
    tmp_path: Path, postgres_url: str
) -> None:
    async with open_checkpointer(postgres_url, state_dir=tmp_path) as saver:
        await check_runs_and_pruning(saver)
        async with await __import__("psycopg").AsyncConnection.connect(postgres_url) as connection:
            cursor = await connection.execute("SELECT thread_id FROM checkpoint_blobs")
            blobs = [row[0] for row in await cursor.fetchall()]
            assert "rolled-back" not in blobs and "kept" in blobs, blobs  # none left unnamed


def test_pruning_and_run_deletion_are_the_checkpointers_own_as_langgraph_server_checks() -> None:
    # The server warns of a method its BaseCheckpointSaver default still stands for (its
    # CheckpointerCapabilities compare the class's method with the base class's).
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    from runner.store.pooled_postgres import PooledPostgresSaver

    for saver in (SqliteCheckpointer, PooledPostgresSaver):
        for method in ("aprune", "adelete_for_runs", "adelete_thread"):
            assert getattr(saver, method) is not getattr(BaseCheckpointSaver, method), (saver, method)
