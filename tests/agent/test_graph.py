"""The agent graph with the scripted and offline models and plain async LangChain tools."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from started_tasks import started_tasks

from runner.agent.graph import build_graph
from runner.agent.nodes import MAX_STEPS_REASON, max_steps_message
from runner.errors import CheckpointerError, ModelError, ToolError
from runner.models import OfflineChatModel, ScriptedChatModel
from runner.store.checkpointers import open_checkpointer

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # LangGraph runs on asyncio only


def make_graph(model: Any, tools: list[BaseTool], **options: Any) -> Any:
    options.setdefault("checkpointer", InMemorySaver())
    return build_graph(
        model,
        tools_provider=lambda: list(tools),
        system_prompt_provider=options.pop("system_prompt_provider", lambda: "Be brief."),
        max_steps=options.pop("max_steps", 10),
        needs_approval=options.pop("needs_approval", lambda name: False),
        **options,
    )


def thread(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_two_tool_calls_of_one_turn_run_at_the_same_time() -> None:
    started = {"left": asyncio.Event(), "right": asyncio.Event()}

    async def meet(me: str, other: str) -> str:
        started[me].set()
        with anyio.fail_after(5):  # only passes if the other call is running concurrently
            await started[other].wait()
        return f"{me} met {other}"

    @tool
    async def left() -> str:
        """Wait for right."""
        return await meet("left", "right")

    @tool
    async def right() -> str:
        """Wait for left."""
        return await meet("right", "left")

    model = ScriptedChatModel(
        [{"tool_calls": [{"name": "left"}, {"name": "right"}]}, "both met"]
    )
    graph = make_graph(model, [left, right])
    with anyio.fail_after(20):
        state = await graph.ainvoke({"messages": [HumanMessage("go")]}, thread())
    assert [m.content for m in tool_messages(state)] == ["left met right", "right met left"]
    assert state["messages"][-1].content == "both met"


async def test_the_model_hears_a_tool_error_and_recovers() -> None:
    @tool
    async def divide(a: float, b: float) -> float:
        """Divide a by b."""
        if b == 0:
            raise ToolError("division by zero")
        return a / b

    model = ScriptedChatModel([
        {"tool_calls": [{"name": "divide", "args": {"a": 1, "b": 0}}]},
        {"tool_calls": [{"name": "divide", "args": {"a": 1, "b": 4}}]},
        "1/4 is 0.25",
    ])
    state = await make_graph(model, [divide]).ainvoke({"messages": [HumanMessage("1/0?")]}, thread())
    failed, succeeded = tool_messages(state)
    assert (failed.status, succeeded.status) == ("error", "success")
    assert "division by zero" in failed.content
    assert succeeded.content == "0.25"
    assert failed in model.received[1]
    assert state["messages"][-1].content == "1/4 is 0.25"


async def test_bad_arguments_and_unknown_tools_become_error_results() -> None:
    model = ScriptedChatModel([
        {"tool_calls": [{"name": "add", "args": {"a": "x"}}, {"name": "nope"}]},
        "sorry",
    ])
    state = await make_graph(model, [add]).ainvoke({"messages": [HumanMessage("hi")]}, thread())
    bad_args, unknown = tool_messages(state)
    assert bad_args.status == unknown.status == "error"
    assert "add" in unknown.content  # names the tools that do exist
    assert state["messages"][-1].content == "sorry"


async def test_reaching_max_steps_ends_the_turn_with_a_clear_message() -> None:
    max_steps = 14  # more supersteps than LangGraph's default recursion limit of 25
    model = ScriptedChatModel(
        [{"tool_calls": [{"name": "add", "args": {"a": 1, "b": 1}}]}] * max_steps + ["next turn"]
    )
    graph = make_graph(model, [add], max_steps=max_steps)
    state = await graph.ainvoke({"messages": [HumanMessage("loop")]}, thread())
    final = state["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.response_metadata["finish_reason"] == MAX_STEPS_REASON
    assert len(model.calls) == max_steps
    # the count starts again with the next turn
    state = await graph.ainvoke({"messages": [HumanMessage("again")]}, thread())
    assert state["messages"][-1].content == "next turn"


async def test_a_tool_added_mid_turn_is_offered_at_the_next_model_step() -> None:
    registry: list[BaseTool] = []

    @tool
    async def late() -> str:
        """Appears later."""
        return "late result"

    @tool
    async def install() -> str:
        """Adds the 'late' tool."""
        registry.append(late)
        return "installed"

    registry.append(install)
    prompts = iter(["first prompt", "second prompt", "third prompt"])
    model = ScriptedChatModel([
        {"tool_calls": [{"name": "install"}]},
        {"tool_calls": [{"name": "late"}]},
        "done",
    ])
    graph = build_graph(
        model,
        tools_provider=lambda: list(registry),
        system_prompt_provider=lambda: next(prompts),
        max_steps=5,
        checkpointer=InMemorySaver(),
    )
    state = await graph.ainvoke({"messages": [HumanMessage("go")]}, thread())
    assert model.calls == [["install"], ["install", "late"], ["install", "late"]]
    assert tool_messages(state)[-1].content == "late result"
    system_prompts = [r[0].content for r in model.received if isinstance(r[0], SystemMessage)]
    assert system_prompts == ["first prompt", "second prompt", "third prompt"]


async def test_an_async_system_prompt_provider_is_awaited() -> None:
    async def system_prompt() -> str:
        return "async prompt"

    model = ScriptedChatModel(["hi"])
    graph = make_graph(model, [], system_prompt_provider=system_prompt)
    await graph.ainvoke({"messages": [HumanMessage("hi")]}, thread())
    assert model.received[0][0] == SystemMessage("async prompt")
    assert model.calls == [[]]


def approval_graph(model: ScriptedChatModel, ran: list[dict[str, Any]], **options: Any) -> Any:
    @tool
    async def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append({"path": path})
        return f"deleted {path}"

    return make_graph(
        model, [delete_file, add], needs_approval=lambda name: name.startswith("delete_"), **options
    )


def approval_script() -> ScriptedChatModel:
    return ScriptedChatModel([
        {"tool_calls": [
            {"name": "delete_file", "args": {"path": "a.txt"}, "id": "c1"},
            {"name": "add", "args": {"a": 2, "b": 3}, "id": "c2"},
        ]},
        "finished",
    ])


async def test_a_call_needing_approval_interrupts_and_runs_once_approved() -> None:
    ran: list[dict[str, Any]] = []
    graph = approval_graph(approval_script(), ran)
    state = await graph.ainvoke({"messages": [HumanMessage("clean up")]}, thread())
    (pending,) = state["__interrupt__"]
    assert pending.value == {
        "type": "tool_approval", "tool": "delete_file", "args": {"path": "a.txt"}, "id": "c1"
    }
    assert ran == [] and tool_messages(state) == []  # nothing of that turn ran yet
    state = await graph.ainvoke(Command(resume={"action": "approve"}), thread())
    assert ran == [{"path": "a.txt"}]
    assert [m.content for m in tool_messages(state)] == ["deleted a.txt", "5"]
    assert state["messages"][-1].content == "finished"


async def test_a_denied_call_reaches_the_model_as_a_tool_error() -> None:
    ran: list[dict[str, Any]] = []
    model = approval_script()
    graph = approval_graph(model, ran)
    await graph.ainvoke({"messages": [HumanMessage("clean up")]}, thread())
    state = await graph.ainvoke(
        Command(resume={"action": "deny", "reason": "keep it"}), thread()
    )
    denied, added = tool_messages(state)
    assert ran == []
    assert (denied.status, denied.tool_call_id, added.content) == ("error", "c1", "5")
    assert "keep it" in denied.content
    assert denied in model.received[1]


async def test_an_edited_call_runs_with_the_new_arguments_and_history_shows_them() -> None:
    ran: list[dict[str, Any]] = []
    graph = approval_graph(approval_script(), ran)
    await graph.ainvoke({"messages": [HumanMessage("clean up")]}, thread())
    state = await graph.ainvoke(
        Command(resume={"action": "edit", "args": {"path": "b.txt"}}), thread()
    )
    assert ran == [{"path": "b.txt"}]
    request = next(m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert request.tool_calls[0]["args"] == {"path": "b.txt"}
    assert sum(isinstance(m, AIMessage) for m in state["messages"]) == 2  # replaced, not added


async def test_a_malformed_approval_answer_is_a_typed_error_and_can_be_answered_again() -> None:
    graph = approval_graph(approval_script(), [])
    await graph.ainvoke({"messages": [HumanMessage("clean up")]}, thread())
    with pytest.raises(ToolError):
        await graph.ainvoke(Command(resume={"action": "maybe"}), thread())
    # the question is still open and a proper answer settles it
    state = await graph.ainvoke(Command(resume={"action": "approve"}), thread())
    assert state["messages"][-1].content == "finished"


async def test_a_thread_resumes_from_sqlite_with_a_new_graph_after_reopening(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []
    model = approval_script()
    spec = "sqlite:///state/agent.sqlite"
    async with open_checkpointer(spec, state_dir=tmp_path, base_dir=tmp_path) as saver:
        first = approval_graph(model, ran, checkpointer=saver)
        state = await first.ainvoke({"messages": [HumanMessage("clean up")]}, thread("s"))
        assert state["__interrupt__"]
    assert (tmp_path / "state" / "agent.sqlite").is_file()
    async with open_checkpointer(spec, state_dir=tmp_path, base_dir=tmp_path) as saver:
        second = approval_graph(model, ran, checkpointer=saver)
        state = await second.ainvoke(Command(resume={"action": "approve"}), thread("s"))
    assert ran == [{"path": "a.txt"}]
    assert state["messages"][0].content == "clean up"
    assert state["messages"][-1].content == "finished"


async def test_the_default_checkpointer_is_sqlite_in_the_state_dir(tmp_path: Path) -> None:
    async with open_checkpointer(None, state_dir=tmp_path / ".mcp-run") as saver:
        graph = make_graph(ScriptedChatModel(["hello"]), [], checkpointer=saver)
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, thread())
    assert (tmp_path / ".mcp-run" / "state.sqlite").is_file()


async def test_the_sqlite_checkpointer_logs_ahead_and_does_not_sync_every_step(tmp_path: Path) -> None:
    async with open_checkpointer(None, state_dir=tmp_path) as saver:
        graph = make_graph(ScriptedChatModel(["hello"]), [], checkpointer=saver)
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, thread())
        connection = saver.conn  # type: ignore[attr-defined]
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert (await saver.aget_tuple(thread())) is not None


async def test_a_turn_on_a_local_checkpointer_is_written_once_and_is_on_disk_when_it_returns(
    tmp_path: Path,
) -> None:
    async with open_checkpointer(None, state_dir=tmp_path) as saver:
        call = {"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}
        model = ScriptedChatModel([call, "three", "again"])
        graph = make_graph(model, [add], checkpointer=saver)
        await graph.ainvoke({"messages": [HumanMessage("add")]}, thread())
        # read by a connection of its own, as another process would
        with closing(sqlite3.connect(tmp_path / "state.sqlite")) as other:
            rows = other.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 't'").fetchone()[0]
        assert rows == 1  # three steps (model, tool, model), one write
        await graph.ainvoke({"messages": [HumanMessage("again")]}, thread())
        saved = [item async for item in saver.alist(thread())]
    assert len(saved) == 1  # the latest: the first turn's checkpoint, superseded, is dropped
    assert [m.content for m in saved[0].checkpoint["channel_values"]["messages"]][-1] == "again"
    memory = InMemorySaver()
    graph = make_graph(ScriptedChatModel([{"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}, "3"]),
                       [add], checkpointer=memory)
    await graph.ainvoke({"messages": [HumanMessage("add")]}, thread())
    assert len([item async for item in memory.alist(thread())]) == 1


async def test_a_turn_paused_for_approval_is_on_disk_and_resumes_from_another_checkpointer(
    tmp_path: Path,
) -> None:
    script = [{"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}, "three"]

    def asked(name: str) -> bool:
        return True

    async with open_checkpointer(None, state_dir=tmp_path) as saver:
        graph = make_graph(ScriptedChatModel(script), [add], checkpointer=saver, needs_approval=asked)
        paused = await graph.ainvoke({"messages": [HumanMessage("add")]}, thread())
        assert paused["__interrupt__"][0].value["type"] == "tool_approval"
    async with open_checkpointer(None, state_dir=tmp_path) as saver:  # as after a restart
        graph = make_graph(ScriptedChatModel(script[1:]), [add], checkpointer=saver, needs_approval=asked)
        state = await graph.ainvoke(Command(resume={"action": "approve"}), thread())
    assert tool_messages(state)[0].content == "3"
    assert state["messages"][-1].content == "three"


async def test_an_unusable_checkpointer_is_a_runner_error(tmp_path: Path) -> None:
    (tmp_path / "dir.sqlite").mkdir()
    (tmp_path / "file").write_text("not a directory")
    for spec in ("sqlite:///dir.sqlite", "sqlite:///file/state.sqlite"):
        with pytest.raises(CheckpointerError):
            async with open_checkpointer(spec, state_dir=tmp_path, base_dir=tmp_path):
                pass
    postgres_installed = True
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
    except ImportError:
        postgres_installed = False
    if not postgres_installed:
        with pytest.raises(CheckpointerError, match="langgraph-checkpoint-postgres"):
            async with open_checkpointer("postgres://u@127.0.0.1/db", state_dir=tmp_path):
                pass


async def test_the_offline_model_makes_a_real_tool_call_and_reports_the_result() -> None:
    graph = make_graph(OfflineChatModel(), [add])
    state = await graph.ainvoke({"messages": [HumanMessage('/call add {"a": 2, "b": 40}')]}, thread())
    assert tool_messages(state)[0].content == "42"
    assert state["messages"][-1].content == "add returned: 42"
    state = await graph.ainvoke({"messages": [HumanMessage("what can you do?")]}, thread())
    assert "/call add" in state["messages"][-1].content


async def test_the_offline_model_streams_through_the_graph() -> None:
    graph = make_graph(OfflineChatModel(), [add])
    chunks = []
    async for chunk, _meta in graph.astream(
        {"messages": [HumanMessage('add {"a": 1, "b": 2}')]}, thread(), stream_mode="messages"
    ):
        chunks.append(chunk)
    text = "".join(c.content for c in chunks if not isinstance(c, ToolMessage))
    assert text == "add returned: 3"
    assert len(chunks) > 3  # tool call chunk, tool message, several text chunks


async def test_a_model_that_runs_out_of_turns_raises_model_error() -> None:
    graph = make_graph(ScriptedChatModel([]), [])
    with pytest.raises(ModelError):
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, thread())


async def test_tool_calls_left_without_results_are_closed_before_the_next_model_call() -> None:
    ran: list[dict[str, Any]] = []
    model = ScriptedChatModel([approval_script().turns[0], "fresh start"])
    graph = approval_graph(model, ran)
    await graph.ainvoke({"messages": [HumanMessage("clean up")]}, thread())
    # a new message instead of an approval answer abandons the pending calls
    state = await graph.ainvoke({"messages": [HumanMessage("never mind")]}, thread())
    assert ran == []
    sent = model.received[1]
    closed = [m for m in sent if isinstance(m, ToolMessage)]
    assert {m.tool_call_id for m in closed} == {"c1", "c2"}
    assert all(m.status == "error" for m in closed)
    assert state["messages"][-1].content == "fresh start"


async def test_a_tool_that_interrupts_resumes_without_running_its_sibling_calls_again() -> None:
    ran: list[str] = []

    @tool
    async def ask_user(question: str) -> str:
        """Ask the user."""
        return f"user said {interrupt({'question': question})}"

    @tool
    async def note() -> str:
        """Has a side effect."""
        ran.append("note")
        return "noted"

    model = ScriptedChatModel([
        {"tool_calls": [{"name": "ask_user", "args": {"question": "ok?"}}, {"name": "note"}]},
        "thanks",
    ])
    graph = make_graph(model, [ask_user, note])
    state = await graph.ainvoke({"messages": [HumanMessage("ask")]}, thread())
    assert [i.value for i in state["__interrupt__"]] == [{"question": "ok?"}]
    state = await graph.ainvoke(Command(resume="yes"), thread())
    assert sorted(m.content for m in tool_messages(state)) == ["noted", "user said yes"]
    assert ran == ["note"]
    assert state["messages"][-1].content == "thanks"


async def test_an_unexpected_tool_failure_cancels_the_other_calls_and_surfaces_as_itself() -> None:
    cancelled = asyncio.Event()
    waiting = asyncio.Event()

    @tool
    async def slow() -> str:
        """Waits until cancelled."""
        try:
            waiting.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "unreachable"

    @tool
    async def broken() -> str:
        """Fails with a bug, once slow is running."""
        await waiting.wait()
        raise KeyError("bug")

    model = ScriptedChatModel([{"tool_calls": [{"name": "slow"}, {"name": "broken"}]}])
    graph = make_graph(model, [slow, broken])
    with anyio.fail_after(10), pytest.raises(KeyError):
        await graph.ainvoke({"messages": [HumanMessage("go")]}, thread())
    assert cancelled.is_set()


async def test_cancelling_a_turn_cancels_its_running_tool_calls() -> None:
    started = [asyncio.Event(), asyncio.Event()]
    cancelled = [asyncio.Event(), asyncio.Event()]

    def waiter(index: int) -> BaseTool:
        async def wait_forever() -> str:
            started[index].set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled[index].set()
                raise
            return "unreachable"

        return StructuredTool.from_function(
            coroutine=wait_forever, name=f"wait_{index}", description="Waits."
        )

    model = ScriptedChatModel([{"tool_calls": [{"name": "wait_0"}, {"name": "wait_1"}]}])
    graph = make_graph(model, [waiter(0), waiter(1)])
    turn = asyncio.ensure_future(graph.ainvoke({"messages": [HumanMessage("go")]}, thread()))
    with anyio.fail_after(10):
        for event in started:
            await event.wait()
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
    assert all(event.is_set() for event in cancelled)


def test_the_max_steps_message_speaks_of_one_model_call_in_the_singular() -> None:
    assert "after 1 model call in this turn" in str(max_steps_message(1).content)
    assert "after 2 model calls in this turn" in str(max_steps_message(2).content)


def test_the_max_steps_message_names_no_manifest_file_the_agent_may_not_have() -> None:
    text = str(max_steps_message(3).content)
    assert "agent.yaml" not in text and "raise agent.max_steps in the agent's manifest" in text


async def test_a_step_whose_calls_need_no_approval_goes_from_the_model_straight_to_its_tools() -> None:
    model = ScriptedChatModel([{"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}, "three"])
    graph = make_graph(model, [add], needs_approval=lambda name: False)
    nodes = [node async for update in graph.astream({"messages": [HumanMessage("add")]}, thread(),
                                                    stream_mode="updates") for node in update]
    assert nodes == ["model", "tool", "model"]


async def test_a_step_with_a_call_that_needs_approval_stops_at_the_approval() -> None:
    model = ScriptedChatModel([{"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}, "three"])
    graph = make_graph(model, [add], needs_approval=lambda name: name == "add")
    nodes = [node async for update in graph.astream({"messages": [HumanMessage("add")]}, thread(),
                                                    stream_mode="updates") for node in update]
    assert nodes == ["model", "__interrupt__"]
    state = await graph.ainvoke(Command(resume={"action": "approve"}), thread())
    assert tool_messages(state)[0].content == "3"


async def test_a_cancelled_sqlite_write_still_lands_and_closing_the_checkpointer_ends_its_thread(
    tmp_path: Path,
) -> None:
    import threading

    async with open_checkpointer(None, state_dir=tmp_path) as saver:
        graph = make_graph(ScriptedChatModel(["hello"]), [], checkpointer=saver)
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, thread())
        saved = await saver.aget_tuple(thread())
        assert saved is not None
        workers = [t for t in threading.enumerate() if t.name.startswith("sqlite checkpointer")]
        assert len(workers) == 1
        config = {"configurable": {"thread_id": "other", "checkpoint_ns": ""}}
        with anyio.CancelScope() as scope:
            scope.cancel()  # cancelled before the write is even handed over
            await saver.aput(config, {**saved.checkpoint, "id": "1f0-cancelled"}, {}, {})
        assert (await saver.aget_tuple({"configurable": {"thread_id": "other"}})) is not None
    assert not workers[0].is_alive()


def test_a_replys_text_blocks_are_kept_apart_in_its_final_text() -> None:
    from runner.agent.turns import reply_text

    blocks = AIMessage(content=[{"type": "text", "text": "Checked."},
                                {"type": "tool_use", "id": "1", "name": "x", "input": {}},
                                {"type": "text", "text": "All good."}])
    assert reply_text(blocks) == "Checked.\nAll good."
    assert reply_text(AIMessage(content="plain")) == "plain"


async def test_the_routes_between_steps_are_awaited_in_place_not_traced_in_tasks_of_their_own() -> None:
    # LangGraph traces a route given as a function: a callback run, a task to run it in a copied
    # context and another to end the run, after every step.
    model = ScriptedChatModel([{"tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]}, "5"])
    graph = make_graph(model, [add], needs_approval=lambda name: True)
    with started_tasks() as started:
        await graph.ainvoke({"messages": [HumanMessage("2+3?")]}, thread())
        state = await graph.ainvoke(Command(resume={"action": "approve"}), thread())
    assert [m.content for m in tool_messages(state)] == ["5"] and state["messages"][-1].content == "5"
    assert [name for name in started if name.endswith(("Route.__call__", "Dispatch.__call__"))] == []


async def test_a_call_whose_id_repeats_an_earlier_turns_runs_and_gets_its_own_result() -> None:
    ran: list[int] = []

    @tool
    async def count(n: int) -> str:
        """Count a number in."""
        ran.append(n)
        return f"counted {n}"

    model = ScriptedChatModel([
        {"tool_calls": [{"name": "count", "args": {"n": 1}, "id": "same"}]}, "one",
        {"tool_calls": [{"name": "count", "args": {"n": 2}, "id": "same"}]}, "two",
    ])
    graph = make_graph(model, [count])
    await graph.ainvoke({"messages": [HumanMessage("a")]}, thread())
    state = await graph.ainvoke({"messages": [HumanMessage("b")]}, thread())
    assert ran == [1, 2]
    assert [m.content for m in tool_messages(state)] == ["counted 1", "counted 2"]
    assert state["messages"][-1].content == "two"


async def test_two_calls_of_one_step_with_the_same_id_each_run_under_an_id_of_their_own() -> None:
    model = ScriptedChatModel([
        {"tool_calls": [{"name": "add", "args": {"a": 1, "b": 1}, "id": "twin"},
                        {"name": "add", "args": {"a": 2, "b": 2}, "id": "twin"}]}, "done",
    ])
    state = await make_graph(model, [add]).ainvoke({"messages": [HumanMessage("go")]}, thread())
    request = next(m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert [call["id"] for call in request.tool_calls] == ["twin", "twin-2"]
    results = sorted((m.tool_call_id, m.content) for m in tool_messages(state))
    assert results == [("twin", "2"), ("twin-2", "4")]
    # the model's next request pairs each result with its own call
    assert [m.tool_call_id for m in model.received[1] if isinstance(m, ToolMessage)] == ["twin", "twin-2"]
