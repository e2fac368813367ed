"""How often a turn writes its state, by checkpointer: what a process killed mid-turn leaves."""

from __future__ import annotations

from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver

from runner.store.checkpointers import SqliteCheckpointer, turn_durability


def test_the_memory_checkpointer_writes_a_turn_once_as_nothing_of_it_outlives_the_process() -> None:
    assert turn_durability(InMemorySaver()) == "exit"
    assert turn_durability(InMemorySaver(), several_agents=True) == "exit"


def test_sqlite_writes_every_step_and_before_the_next_one_when_the_manifest_has_agents(
    tmp_path: Path,
) -> None:
    with SqliteCheckpointer.open(tmp_path / "state.sqlite") as saver:
        assert turn_durability(saver) == "async"
        assert turn_durability(saver, several_agents=True) == "sync"
