"""A long conversation in the SQLite checkpointer costs storage in proportion to its length: a
thread keeps its latest checkpoint (and that one's pending writes), not every superseded one, and
still resumes with all its messages."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from runner.store.checkpointers import open_checkpointer

MESSAGE = "x" * 1000


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]


def answer(state: State) -> dict[str, Any]:
    return {"messages": [AIMessage(f"answer {len(state['messages'])}")]}


def file_bytes(database: Path) -> int:
    """The database's size with its write-ahead log folded in (what the thread occupies)."""
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(path.stat().st_size for path in database.parent.glob(database.name + "*"))


async def test_storage_grows_in_proportion_to_a_threads_length(tmp_path: Path) -> None:
    database = tmp_path / "state.sqlite"
    graph = StateGraph(State)
    graph.add_node("model", answer)
    graph.add_edge(START, "model")
    config: Any = {"configurable": {"thread_id": "long"}}
    sizes = []
    async with open_checkpointer(f"sqlite:///{database}", state_dir=tmp_path) as saver:
        compiled = graph.compile(checkpointer=saver)
        for _batch in range(3):
            for _turn in range(40):
                await compiled.ainvoke({"messages": [HumanMessage(MESSAGE)]}, config, durability="exit")
            sizes.append(file_bytes(database))
        state = await compiled.aget_state(config)
    assert len(state.values["messages"]) == 2 * 120  # every turn is still there
    first, second, third = sizes[0], sizes[1] - sizes[0], sizes[2] - sizes[1]
    # Kept whole, each checkpoint repeats the conversation so far: the second 40 turns would cost
    # three times the first, the third five times. In proportion, about the same.
    assert second < 1.6 * first and third < 1.6 * first, sizes
    with sqlite3.connect(database) as connection:
        kept = connection.execute("SELECT count(*) FROM checkpoints WHERE thread_id = 'long'").fetchone()
    assert kept == (1,)


async def test_a_thread_paused_for_an_answer_resumes_after_pruning(tmp_path: Path) -> None:
    from langgraph.types import Command, interrupt

    def ask(state: State) -> dict[str, Any]:
        reply = interrupt("may I?")
        return {"messages": [AIMessage(f"told {reply}")]}

    graph = StateGraph(State)
    graph.add_node("model", answer)
    graph.add_node("ask", ask)
    graph.add_edge(START, "model")
    graph.add_edge("model", "ask")
    config: Any = {"configurable": {"thread_id": "paused"}}
    async with open_checkpointer(f"sqlite:///{tmp_path / 'state.sqlite'}", state_dir=tmp_path) as saver:
        compiled = graph.compile(checkpointer=saver)
        await compiled.ainvoke({"messages": [HumanMessage("first")]}, config, durability="exit")
        await compiled.ainvoke(Command(resume="yes"), config, durability="exit")
        await compiled.ainvoke({"messages": [HumanMessage("second")]}, config, durability="exit")
        paused = await compiled.aget_state(config)
        assert paused.next == ("ask",)
        await compiled.ainvoke(Command(resume="again"), config, durability="exit")
        state = await compiled.aget_state(config)
    texts = [message.content for message in state.values["messages"]]
    assert texts == ["first", "answer 1", "told yes", "second", "answer 4", "told again"]
