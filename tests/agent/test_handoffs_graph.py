"""Handoffs inside one turn (:mod:`runner.agent.handoffs`): what a handoff does to the step's other
calls, handing on from agent to agent, and the handoffs refused. In this process, no server: the
runtime over scripted models, a turn's events as :func:`runner.agent.turns.stream_turn` yields them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from langgraph.types import Command

from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn


def manifest(folder: Path, scripts: dict[str, list[Any]], agents: dict[str, dict[str, Any]],
             handoffs: list[str], **top: Any) -> Path:
    """``folder/agent.yaml``: each agent of ``scripts`` (``main`` too) plays its script."""
    for name, script in scripts.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(script))
    for name in agents:  # an agent without a script is never asked: the offline model
        model = {"id": "scripted", "script": f"{name}.yaml"} if name in scripts else {"id": "offline"}
        agents[name] = {**agents[name], "model": model}
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump({
        "version": 1, "name": "desk", "model": {"id": "scripted", "script": "main.yaml"},
        "checkpointer": "memory", "agent": {"handoffs": handoffs}, "agents": agents, **top}))
    return path


def calls(*named: tuple[str, str]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": {}, "id": call_id} for name, call_id in named]}


async def turn(path: Path, text: str = "Hello") -> list[dict[str, Any]]:
    async with load_agent(path, thread_id="t1") as runtime:
        return [dict(event) async for event in stream_turn(runtime, text)]


def results(events: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {e["id"]: (e["status"], e["text"]) for e in events if e["type"] == "tool_result"}


async def test_the_other_calls_of_a_handoffs_step_do_not_run_and_the_model_is_told(tmp_path: Path) -> None:
    path = manifest(tmp_path, {"main": [calls(("handoff_to_billing", "m1"), ("handoff_to_support", "m2"),
                                              ("anything", "m3"))],
                               "billing": ["Billing: here."]},
                    {"billing": {"description": "Refunds."}, "support": {"description": "Errors."}},
                    ["billing", "support"])
    events = await turn(path)
    assert [(e["from"], e["to"]) for e in events if e["type"] == "handoff"] == [("main", "billing")]
    not_run = "This call did not run: the conversation was handed to billing in the same step."
    assert results(events) == {"m1": ("success", "main handed the conversation to billing."),
                               "m2": ("error", not_run), "m3": ("error", not_run)}
    assert (events[-1]["text"], events[-1]["agent"]) == ("Billing: here.", "billing")


async def test_an_agent_hands_on_to_another_in_the_same_turn_which_answers(tmp_path: Path) -> None:
    path = manifest(tmp_path, {"main": [calls(("handoff_to_billing", "m1"))],
                               "billing": [calls(("handoff_to_support", "b1"))],
                               "support": ["Support: it is a crash, not a charge."]},
                    {"billing": {"description": "Refunds.", "handoffs": ["support"]},
                     "support": {"description": "Errors."}}, ["billing"])
    events = await turn(path)
    assert [(e["from"], e["to"]) for e in events if e["type"] == "handoff"] == [
        ("main", "billing"), ("billing", "support")]
    assert [(e["name"], e.get("agent")) for e in events if e["type"] == "tool_call"] == [
        ("handoff_to_billing", None), ("handoff_to_support", "billing")]
    assert (events[-1]["text"], events[-1]["agent"]) == ("Support: it is a crash, not a charge.", "support")


async def test_handing_back_when_nobody_handed_over_is_refused_and_the_model_answers(tmp_path: Path) -> None:
    # billing may hand to main, so main is offered handoff_back: with nobody to hand back to.
    path = manifest(tmp_path, {"main": [calls(("handoff_back", "m1")), "Main: I will answer."]},
                    {"billing": {"description": "Refunds.", "handoffs": ["main"]}}, [])
    events = await turn(path)
    assert not [e for e in events if e["type"] == "handoff"]
    status, text = results(events)["m1"]
    assert status == "error" and "nobody handed this conversation to you" in text
    assert events[-1]["text"] == "Main: I will answer." and "agent" not in events[-1]


async def test_agents_handing_the_conversation_round_and_round_are_stopped_after_five_handoffs(
    tmp_path: Path,
) -> None:
    main = [calls(("handoff_to_billing", f"m{n}")) for n in range(3)]
    billing = [*(calls(("handoff_back", f"b{n}")) for n in range(3)), "Billing: I will answer it."]
    path = manifest(tmp_path, {"main": main, "billing": billing},
                    {"billing": {"description": "Refunds."}}, ["billing"])
    events = await turn(path)
    handed = [(e["from"], e["to"]) for e in events if e["type"] == "handoff"]
    assert handed == [("main", "billing"), ("billing", "main")] * 2 + [("main", "billing")]
    status, text = results(events)["b2"]
    assert status == "error" and "handed over 5 times in this turn" in text
    assert (events[-1]["text"], events[-1]["agent"]) == ("Billing: I will answer it.", "billing")


async def test_the_turns_budgets_hold_for_the_agent_answering(tmp_path: Path) -> None:
    path = manifest(tmp_path, {"main": [calls(("handoff_to_billing", "m1"))],
                               "billing": [calls(("anything", "b1"))]},
                    {"billing": {"description": "Refunds."}}, ["billing"],
                    limits={"per_turn": {"max_tool_calls": 0}})
    events = await turn(path)
    status, text = results(events)["b1"]
    assert status == "error" and "limits.per_turn.max_tool_calls" in text
    assert [e["limit"] for e in events if e["type"] == "limit"] == ["max_tool_calls"]
    assert (events[-1]["reason"], events[-1]["agent"]) == ("limit", "billing")


async def test_the_policy_asks_about_or_denies_a_handoff_as_any_tool_call(tmp_path: Path) -> None:
    path = manifest(tmp_path, {"main": [calls(("handoff_to_billing", "m1")), "Main: staying.",
                                        calls(("handoff_to_billing", "m2")),
                                        calls(("handoff_to_support", "m3")), "Main: support is closed."],
                               "billing": ["Billing: here."]},
                    {"billing": {"description": "Refunds."}, "support": {"description": "Errors."}},
                    ["billing", "support"],
                    policy=[{"tool": "handoff_to_billing", "action": "ask"},
                            {"tool": "handoff_to_support", "action": "deny", "reason": "support is closed"}])
    async with load_agent(path) as runtime:
        async def run(message: Any, thread: str) -> list[dict[str, Any]]:
            return [dict(event) async for event in stream_turn(runtime, message, thread_id=thread)]

        asked = await run("Refund me", "t1")
        assert (asked[-1]["type"], asked[-1]["tool"]) == ("approval", "handoff_to_billing")
        denied = await run(Command(resume={"action": "deny", "reason": "stay"}), "t1")
        assert not [e for e in denied if e["type"] == "handoff"]
        assert denied[-1]["text"] == "Main: staying." and "agent" not in denied[-1]

        assert (await run("Refund me", "t2"))[-1]["type"] == "approval"
        approved = await run(Command(resume={"action": "approve"}), "t2")
        assert [(e["from"], e["to"]) for e in approved if e["type"] == "handoff"] == [("main", "billing")]
        assert (approved[-1]["text"], approved[-1]["agent"]) == ("Billing: here.", "billing")

        refused = await run("It crashed", "t3")
        status, text = results(refused)["m3"]
        assert status == "error" and "support is closed" in text
        assert refused[-1]["text"] == "Main: support is closed."


async def test_a_handoff_whose_call_id_repeats_an_earlier_turns_is_taken(tmp_path: Path) -> None:
    path = manifest(tmp_path, {"main": [calls(("handoff_to_billing", "h")), "Main: back again."],
                               "billing": ["Billing: here.", calls(("handoff_back", "h"))]},
                    {"billing": {"description": "Refunds.", "handoffs": ["main"]}}, ["billing"])
    async with load_agent(path, thread_id="t1") as runtime:
        first = [dict(event) async for event in stream_turn(runtime, "Hello")]
        second = [dict(event) async for event in stream_turn(runtime, "Back to main, please")]
    assert first[-1]["text"] == "Billing: here."
    assert [(e["from"], e["to"]) for e in second if e["type"] == "handoff"] == [("billing", "main")]
    assert results(second) == {"h": ("success", "billing handed the conversation to main.")}
    assert second[-1]["text"] == "Main: back again." and "agent" not in second[-1]
