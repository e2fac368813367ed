"""What a turn and a thread spend (tokens, cost, tool calls) and the budgets that end them, with
the scripted model reporting usage and the demo MCP server's real tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from builders import scripted_model, server, write_manifest
from langgraph.types import Command

from runner.agent.runtime import load_agent
from runner.agent.spending import TurnSpending, thread_totals, totals
from runner.agent.turns import stream_turn
from runner.errors import ModelError

LIMIT = 60  # seconds a turn may take on a busy machine


def agent(folder: Path, script: list[Any], *, model: dict[str, Any] | None = None,
          checkpointer: str = "memory", **top: Any) -> Path:
    return write_manifest(folder, {"demo": server("demo", timeout="20s")},
                          model={**scripted_model(folder, script), **(model or {})},
                          checkpointer=checkpointer, **top)


def step(tokens_in: int, tokens_out: int, *, calls: list[dict[str, Any]] | None = None,
         text: str = "", model: str | None = None, cached: int = 0) -> dict[str, Any]:
    turn: dict[str, Any] = {"usage": {"input_tokens": tokens_in, "output_tokens": tokens_out,
                                      "cached_tokens": cached}}
    if calls:
        turn["tool_calls"] = calls
    turn["text"] = text
    if model is not None:
        turn["model"] = model
    return turn


ADD = {"name": "demo__add", "args": {"a": 2, "b": 3}}


async def run(path: Path, *messages: str, thread: str = "t1") -> list[list[dict[str, Any]]]:
    """Each message's events, one turn after another, in one process."""
    turns = []
    async with load_agent(path, thread_id=thread) as runtime:
        for message in messages:
            with anyio.fail_after(LIMIT):
                turns.append([dict(event) async for event in stream_turn(runtime, message)])
    return turns


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


# --------------------------------------------------------------------------- usage and cost


async def test_each_model_step_reports_its_usage_and_the_turn_and_thread_totals_priced_by_genai_prices(
    tmp_path: Path,
) -> None:
    script = [step(1000, 100, calls=[ADD], model="openai:gpt-4.1-mini", cached=200),
              step(1200, 10, text="5", model="openai:gpt-4.1-mini")]
    [events] = await run(agent(tmp_path, script), "add")
    first, second = of(events, "usage")
    assert first["agent"] == "main" and first["model"] == "gpt-4.1-mini"
    # gpt-4.1-mini: $0.40 per million input tokens, $0.10 cached, $1.60 output (genai-prices' data)
    assert first["step"]["cost"] == pytest.approx((800 * 0.4 + 200 * 0.1 + 100 * 1.6) / 1e6)
    assert first["step"]["cached_tokens"] == 200
    assert second["step"]["cost"] == pytest.approx((1200 * 0.4 + 10 * 1.6) / 1e6)
    assert second["turn"]["input_tokens"] == 2200 and second["turn"]["output_tokens"] == 110
    assert second["turn"]["total_tokens"] == 2310
    assert second["turn"]["model_steps"] == 2 and second["turn"]["tool_calls"] == 1
    assert second["turn"]["cost"] == pytest.approx(first["step"]["cost"] + second["step"]["cost"])
    assert second["thread"]["total_tokens"] == 2310
    assert of(events, "final")[0]["text"] == "5"


async def test_model_pricing_in_the_manifest_prices_a_private_model(tmp_path: Path) -> None:
    pricing = {"input_per_mtok": 2.0, "output_per_mtok": 10.0, "cached_input_per_mtok": 0.5}
    script = [step(1000, 100, text="hi", cached=400)]
    [events] = await run(agent(tmp_path, script, model={"pricing": pricing}), "hello")
    [usage] = of(events, "usage")
    assert usage["step"]["cost"] == pytest.approx((600 * 2.0 + 400 * 0.5 + 100 * 10.0) / 1e6)
    assert usage["step"]["unpriced_steps"] == 0


async def test_a_model_no_price_is_known_for_shows_its_tokens_and_no_cost(tmp_path: Path) -> None:
    script = [step(1000, 100, text="hi", model="ollama:llama3.1")]
    [events] = await run(agent(tmp_path, script), "hello")
    [usage] = of(events, "usage")
    assert usage["step"]["total_tokens"] == 1100
    assert usage["step"]["cost"] is None and usage["turn"]["unpriced_steps"] == 1


async def test_the_built_in_models_name_themselves_in_usage_events(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "o").mkdir()
    [scripted_events] = await run(agent(tmp_path / "s", [step(10, 5, text="hi")]), "hello")
    offline = write_manifest(tmp_path / "o", {}, model="offline", checkpointer="memory")
    [offline_events] = await run(offline, "hello")
    assert [usage["model"] for usage in of(scripted_events, "usage")] == ["scripted"]
    assert [usage["model"] for usage in of(offline_events, "usage")] == ["offline"]


async def test_the_offline_model_reports_the_tokens_it_counts(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, {"demo": server("demo", timeout="20s")}, model="offline",
                          checkpointer="memory")
    [events] = await run(path, 'demo__add {"a": 1, "b": 2}')
    steps = of(events, "usage")
    assert len(steps) == 2  # the call, then the report of its result
    assert all(usage["step"]["input_tokens"] > 0 and usage["step"]["output_tokens"] > 0 for usage in steps)
    assert steps[-1]["turn"]["tool_calls"] == 1


# --------------------------------------------------------------------------- budgets


async def test_a_turn_at_max_tokens_refuses_its_next_tool_call_and_ends_naming_the_limit(
    tmp_path: Path,
) -> None:
    # Had the model been called a second time the script would have run out (a model error).
    script = [step(1000, 100, calls=[ADD])]
    path = agent(tmp_path, script, limits={"per_turn": {"max_tokens": 500}})
    [events] = await run(path, "add")
    [result] = of(events, "tool_result")
    assert result["status"] == "error" and "limits.per_turn.max_tokens" in result["text"]
    [limit] = of(events, "limit")
    assert (limit["scope"], limit["limit"], limit["max"], limit["spent"]) == ("turn", "max_tokens", 500, 1100)
    [final] = of(events, "final")
    assert final["reason"] == "limit"
    assert "limit of 500 tokens (limits.per_turn.max_tokens)" in final["text"]
    assert "1,100 tokens" in final["text"]
    assert [event["type"] for event in events][-2:] == ["limit", "final"]


async def test_max_tool_calls_lets_that_many_calls_run_and_refuses_the_rest(tmp_path: Path) -> None:
    calls = [{**ADD, "id": "c1"}, {"name": "demo__echo", "args": {"text": "x"}, "id": "c2"},
             {"name": "demo__echo", "args": {"text": "y"}, "id": "c3"}]
    script = [step(10, 10, calls=calls)]
    path = agent(tmp_path, script, limits={"per_turn": {"max_tool_calls": 2}})
    [events] = await run(path, "three calls")
    statuses = sorted(result["status"] for result in of(events, "tool_result"))
    assert statuses == ["error", "success", "success"]
    [limit] = of(events, "limit")
    assert (limit["limit"], limit["max"], limit["spent"]) == ("max_tool_calls", 2, 2)
    assert limit["turn"]["tool_calls"] == 2
    assert of(events, "final")[0]["reason"] == "limit"


async def test_a_limit_on_a_count_is_told_as_whole_numbers(tmp_path: Path) -> None:
    calls = [{**ADD, "id": "c1"}, {"name": "demo__echo", "args": {"text": "x"}, "id": "c2"}]
    path = agent(tmp_path, [step(1000, 100, calls=calls)], limits={"per_turn": {"max_tool_calls": 1}})
    [events] = await run(path, "two calls")
    [limit] = of(events, "limit")
    assert (type(limit["max"]), type(limit["spent"])) == (int, int)
    assert '"max": 1, "spent": 1' in json.dumps(limit)


async def test_max_cost_ends_the_turn_once_its_steps_cost_that_much(tmp_path: Path) -> None:
    pricing = {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}  # $1 per thousand tokens
    script = [step(1000, 100, calls=[ADD]), step(10, 10, text="never reached")]
    path = agent(tmp_path, script, model={"pricing": pricing}, limits={"per_turn": {"max_cost": 1.0}})
    [events] = await run(path, "add")
    [limit] = of(events, "limit")
    assert (limit["limit"], limit["max"], limit["spent"]) == ("max_cost", 1.0, pytest.approx(1.1))
    assert "limit of $1 (limits.per_turn.max_cost)" in of(events, "final")[0]["text"]


async def test_max_duration_ends_the_turn_at_the_step_after_it_passed(tmp_path: Path) -> None:
    script = [step(10, 10, calls=[{"name": "demo__sleep", "args": {"seconds": 0.05}}]),
              step(10, 10, text="never reached")]
    path = agent(tmp_path, script, limits={"per_turn": {"max_duration": "10ms"}})
    [events] = await run(path, "sleep")
    # the call runs if the first step came within the limit (else the step is not taken at all):
    # either way the turn ends at the limit, and no model step follows it
    [limit] = of(events, "limit")
    assert limit["limit"] == "max_duration" and limit["spent"] >= 0.01
    assert len(of(events, "usage")) <= 1  # no step after the limit
    assert [final["reason"] for final in of(events, "final")] == ["limit"]


async def test_a_thread_at_its_cap_says_so_at_its_next_turn_without_calling_the_model(tmp_path: Path) -> None:
    script = [step(400, 200, text="one"), step(400, 200, text="two")]  # a third call would fail
    path = agent(tmp_path, script, limits={"per_thread": {"max_tokens": 1000}})
    first, second, third = await run(path, "a", "b", "c")
    assert of(first, "final")[0]["text"] == "one"
    assert of(second, "final")[0]["text"] == "two"  # 1200 tokens: over by the step in flight
    assert not of(third, "usage")
    [limit] = of(third, "limit")
    assert (limit["scope"], limit["limit"], limit["spent"]) == ("thread", "max_tokens", 1200)
    assert "this conversation (thread) reached its limit" in of(third, "final")[0]["text"]


async def test_thread_totals_survive_a_restart_and_its_cap_still_holds(tmp_path: Path) -> None:
    script = [step(700, 100, text="one"), step(10, 10, text="never reached")]
    checkpointer = f"sqlite:///{tmp_path / 'state.sqlite'}"
    path = agent(tmp_path, script, checkpointer=checkpointer, limits={"per_thread": {"max_tokens": 800}})
    [first] = await run(path, "a", thread="kept")
    assert of(first, "usage")[0]["thread"]["total_tokens"] == 800
    [after] = await run(path, "b", thread="kept")  # a new process: a new model, the same thread
    [limit] = of(after, "limit")
    assert (limit["scope"], limit["spent"]) == ("thread", 800)
    assert limit["thread"]["total_tokens"] == 800 and limit["thread"]["model_steps"] == 1
    [other] = await run(path, "c", thread="another")  # another thread has its own totals
    assert of(other, "final")[0]["text"] == "one"


async def test_the_turns_state_is_checkpointed_when_a_limit_ends_it(tmp_path: Path) -> None:
    script = [step(1000, 100, calls=[ADD])]
    path = agent(tmp_path, script, limits={"per_turn": {"max_tokens": 500}})
    async with load_agent(path, thread_id="t") as runtime:
        with anyio.fail_after(LIMIT):
            [_ async for _ in stream_turn(runtime, "add")]
        state = await runtime.graph.aget_state(runtime.config())
    messages = state.values["messages"]
    assert [type(m).__name__ for m in messages] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert messages[-1].response_metadata["finish_reason"] == "limit"
    assert state.values["usage"]["main"]["input_tokens"] == 1000
    assert not state.next  # the turn is over, nothing pending


async def test_a_graph_run_without_a_turn_ledger_still_keeps_the_threads_cap(tmp_path: Path) -> None:
    """As LangGraph Server (or the Python API) runs the graph: the thread's totals are in its state."""
    script = [step(700, 100, text="one"), step(10, 10, text="never reached")]
    path = agent(tmp_path, script, limits={"per_thread": {"max_tokens": 800}})
    async with load_agent(path, thread_id="direct") as runtime:
        with anyio.fail_after(LIMIT):
            first = await runtime.graph.ainvoke({"messages": [("user", "a")]}, runtime.config())
            second = await runtime.graph.ainvoke({"messages": [("user", "b")]}, runtime.config())
    assert first["messages"][-1].content == "one"
    assert first["usage"]["main"]["input_tokens"] == 700
    stopped = second["messages"][-1]
    assert stopped.response_metadata["finish_reason"] == "limit"
    assert "limits.per_thread.max_tokens" in stopped.content


async def test_an_agent_of_agents_that_reaches_a_limit_ends_the_turn_with_one_limit_event(
    tmp_path: Path,
) -> None:
    # The researcher's step spends past the turn's budget: its tool call is refused, it stops, and
    # the main agent, given that answer, stops too: one budget reached, one event.
    (tmp_path / "researcher.yaml").write_text(yaml.safe_dump([step(1000, 100, calls=[ADD])]))
    researcher = {"description": "Adds.", "tools": ["demo"],
                  "model": {"id": "scripted", "script": "researcher.yaml"}}
    script = [step(10, 10, calls=[{"name": "researcher", "args": {"task": "add"}}])]
    path = agent(tmp_path, script, limits={"per_turn": {"max_tokens": 500}},
                 agent={"agents": ["researcher"]}, agents={"researcher": researcher})
    [events] = await run(path, "add")
    [limit] = of(events, "limit")
    assert (limit["scope"], limit["limit"], limit["spent"]) == ("turn", "max_tokens", 1120)
    assert [(r["name"], r.get("agent"), r["status"]) for r in of(events, "tool_result")] == [
        ("demo__add", "researcher", "error"), ("researcher", None, "success")]
    [final] = of(events, "final")
    assert final["reason"] == "limit"


async def test_a_structured_answer_is_not_retried_once_the_rejected_one_reached_a_limit(
    tmp_path: Path,
) -> None:
    # The rejected answer spends the turn's budget: its retry would overshoot by one more answer.
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    usage = {"usage": {"input_tokens": 400, "output_tokens": 200}}
    script = [{**usage, "output": {"n": "three"}}, {**usage, "output": {"n": 3}}]
    path = agent(tmp_path, script, limits={"per_turn": {"max_tokens": 500}},
                 output={"schema": schema, "retries": 2})
    [events] = await run(path, "count")
    assert [usage["step"]["total_tokens"] for usage in of(events, "usage")] == [600]
    [limit] = of(events, "limit")
    assert (limit["scope"], limit["limit"], limit["spent"]) == ("turn", "max_tokens", 600)
    [final] = of(events, "final")
    assert final["reason"] == "limit" and "output" not in final
    assert "limits.per_turn.max_tokens" in final["text"]


# --------------------------------------------------------------------------- totals that agree


async def thread_state_totals(runtime: Any, config: dict[str, Any], agent: str = "main") -> dict[str, Any]:
    """The thread's totals as ``/usage`` shows them: from its checkpointed state."""
    state = await runtime.agents[agent].aget_state(config)
    return dict(totals(thread_totals(state.values.get("usage"))))


async def test_the_last_usage_event_and_usage_agree_after_a_call_edited_into_a_denied_one(
    tmp_path: Path,
) -> None:
    script = [step(500, 50, calls=[{"name": "demo__echo", "args": {"text": "hello"}}]),
              step(500, 12, text="denied")]
    policy = [{"tool": "demo__echo", "args": {"text": "/etc/*"}, "action": "deny", "reason": "private"},
              {"tool": "demo__echo", "action": "ask", "reason": "asked"}]
    path = agent(tmp_path, script, policy=policy)
    edit = Command(resume={"action": "edit", "args": {"text": "/etc/passwd"}})
    async with load_agent(path, thread_id="t") as runtime:
        with anyio.fail_after(LIMIT):
            asked = [dict(event) async for event in stream_turn(runtime, "echo")]
            resumed = [dict(event) async for event in stream_turn(runtime, edit)]
        shown = await thread_state_totals(runtime, runtime.config())
    assert of(asked, "approval") and of(resumed, "tool_result")[0]["status"] == "error"
    last = of(resumed, "usage")[-1]
    assert last["thread"] == shown  # every count, the time too (to the millisecond)
    assert (shown["total_tokens"], shown["model_steps"], shown["tool_calls"]) == (1062, 2, 1)
    assert last["turn"]["total_tokens"] == 1062 and last["turn"]["tool_calls"] == 1


async def test_the_tool_calls_of_an_agent_of_agents_count_in_the_threads_totals_as_in_its_events(
    tmp_path: Path,
) -> None:
    (tmp_path / "researcher.yaml").write_text(yaml.safe_dump([step(100, 10, calls=[ADD]),
                                                              step(100, 10, text="5")]))
    researcher = {"description": "Adds.", "tools": ["demo"],
                  "model": {"id": "scripted", "script": "researcher.yaml"}}
    script = [step(10, 10, calls=[{"name": "researcher", "args": {"task": "add"}}]), step(10, 10, text="5")]
    path = agent(tmp_path, script, agent={"agents": ["researcher"]}, agents={"researcher": researcher})
    async with load_agent(path, thread_id="t") as runtime:
        with anyio.fail_after(LIMIT):
            events = [dict(event) async for event in stream_turn(runtime, "add")]
        shown = await thread_state_totals(runtime, runtime.config())
    last = of(events, "usage")[-1]
    assert last["thread"] == shown
    assert shown["tool_calls"] == 2 and shown["model_steps"] == 4  # researcher's call, and its add


async def test_a_threads_totals_do_not_go_down_after_a_turn_a_limit_ended_after_a_slow_call(
    tmp_path: Path,
) -> None:
    # The call runs past the turn's max_duration; the next step ends the turn at the limit. What
    # the limit event said the thread had spent is the thread's: the next turn goes on from it.
    script = [step(10, 10, calls=[{"name": "demo__sleep", "args": {"seconds": 0.3}}]),
              step(10, 10, text="two")]
    path = agent(tmp_path, script, limits={"per_turn": {"max_duration": "100ms"}})
    async with load_agent(path, thread_id="t") as runtime:
        reported = []
        for message in ("one", "two"):
            spending = TurnSpending()  # what serve's ask reports in its result's _meta
            with anyio.fail_after(LIMIT):
                async for event in stream_turn(runtime, message):
                    spending.see(event)
            meta = spending.meta()
            assert meta is not None
            reported.append(meta[TurnSpending.META_KEY]["thread"])
        shown = await thread_state_totals(runtime, runtime.config())
    first, second = reported
    assert first["seconds"] >= 0.3
    assert second["seconds"] > first["seconds"] and second["model_steps"] == 2
    assert second == shown


async def test_an_agent_served_on_its_own_keeps_its_threads_totals_from_one_turn_to_the_next(
    tmp_path: Path,
) -> None:
    (tmp_path / "researcher.yaml").write_text(yaml.safe_dump([step(100, 10, calls=[ADD]),
                                                              step(100, 10, text="5"),
                                                              step(100, 10, text="again")]))
    researcher = {"description": "Adds.", "tools": ["demo"],
                  "model": {"id": "scripted", "script": "researcher.yaml"}}
    path = agent(tmp_path, [], agents={"researcher": researcher})
    async with load_agent(path, thread_id="t") as runtime:
        reported = []
        for message in ("add", "again"):
            with anyio.fail_after(LIMIT):
                events = [dict(event) async for event in stream_turn(runtime, message, thread_id="served",
                                                                         agent="researcher")]
            reported.append(of(events, "usage")[-1]["thread"])
        shown = await thread_state_totals(runtime, runtime.config("served", agent="researcher"), "researcher")
    first, second = reported
    assert (first["total_tokens"], first["tool_calls"]) == (220, 1)
    assert (second["total_tokens"], second["model_steps"], second["tool_calls"]) == (330, 3, 1)
    assert second["seconds"] >= first["seconds"]
    assert second == shown


# --------------------------------------------------------------------------- a turn resumed


async def test_a_handoff_asking_inside_the_agent_handed_to_keeps_the_turns_totals_across_the_answer(
    tmp_path: Path,
) -> None:
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump([step(200, 20, calls=[ADD]),
                                                           step(300, 30, text="refunded")]))
    billing = {"description": "Refunds.", "tools": ["demo"], "approve": ["demo__add"],
               "model": {"id": "scripted", "script": "billing.yaml"}}
    script = [step(100, 10, calls=[{"name": "handoff_to_billing", "args": {"reason": "a charge"}}])]
    path = agent(tmp_path, script, agent={"handoffs": ["billing"]}, agents={"billing": billing})
    async with load_agent(path, thread_id="t") as runtime:
        with anyio.fail_after(LIMIT):
            asked = [dict(event) async for event in stream_turn(runtime, "charged twice")]
            waiting = await thread_state_totals(runtime, runtime.config())
            approve = Command(resume={"action": "approve"})
            resumed = [dict(event) async for event in stream_turn(runtime, approve)]
        shown = await thread_state_totals(runtime, runtime.config())
    assert of(asked, "approval")[0]["agent"] == "billing"
    assert waiting["total_tokens"] == 330  # billing's step before its question is the thread's already
    last = of(resumed, "usage")[-1]
    assert last["agent"] == "billing" and of(resumed, "final")[0]["text"] == "refunded"
    turn = last["turn"]
    assert (turn["total_tokens"], turn["model_steps"], turn["tool_calls"]) == (660, 3, 1)
    assert last["thread"] == shown and shown["total_tokens"] == 660 and shown["tool_calls"] == 1


async def test_a_turn_stopped_while_its_call_runs_keeps_what_it_spent_in_the_threads_totals(
    tmp_path: Path,
) -> None:
    script = [step(100, 10, calls=[{"name": "demo__hang", "args": {}}]), step(100, 10, text="noted")]
    async with load_agent(agent(tmp_path, script), thread_id="t") as runtime:
        with anyio.fail_after(LIMIT):
            with anyio.CancelScope() as turn:  # what Ctrl-C does to the chat's turn
                async for event in stream_turn(runtime, "start it"):
                    if event["type"] == "progress":  # the server is running the call
                        turn.cancel()
            stopped = await thread_state_totals(runtime, runtime.config())
            events = [dict(event) async for event in stream_turn(runtime, "what happened?")]
    assert turn.cancelled_caught
    assert (stopped["total_tokens"], stopped["model_steps"], stopped["tool_calls"]) == (110, 1, 1)
    assert of(events, "usage")[-1]["thread"]["tool_calls"] == 1


async def test_a_turn_whose_model_fails_after_a_call_keeps_the_step_and_the_call_in_the_threads_totals(
    tmp_path: Path,
) -> None:
    script = [step(100, 10, calls=[ADD])]  # the step after the call finds the script run out
    async with load_agent(agent(tmp_path, script), thread_id="t") as runtime:
        with anyio.fail_after(LIMIT), pytest.raises(ModelError):
            [_ async for _ in stream_turn(runtime, "add")]
        shown = await thread_state_totals(runtime, runtime.config())
    assert (shown["total_tokens"], shown["model_steps"], shown["tool_calls"]) == (110, 1, 1)


def test_usage_never_shows_negative_zero_seconds_when_the_written_time_rounds_to_nothing() -> None:
    # record() writes whole milliseconds and keeps the rest: a later step may write a hair below 0
    assert json.dumps(totals({"seconds": -0.0001})["seconds"]) == "0.0"
    assert json.dumps(totals({"seconds": -0.0})["seconds"]) == "0.0"
