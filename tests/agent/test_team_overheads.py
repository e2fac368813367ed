"""What a turn of several agents does not spend: no step of its graphs in a worker thread, no parallel
workflow's join template compiled again at each run. In this process, no server: the runtime over
scripted models, turns as :func:`runner.agent.turns.stream_turn` runs them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from jinja2.sandbox import SandboxedEnvironment
from langchain_core.tools import BaseTool

from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn


def team(folder: Path, main: list[Any], scripts: dict[str, list[Any]], agents: dict[str, dict[str, Any]],
         agent: dict[str, Any]) -> Path:
    """``folder/agent.yaml``: the scripted main model playing ``main`` (its ``agent:`` section
    ``agent``), each agent of ``scripts`` playing its own."""
    (folder / "main.yaml").write_text(yaml.safe_dump(main))
    for name, script in scripts.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(script))
        agents[name] = {**agents[name], "model": {"id": "scripted", "script": f"{name}.yaml"}}
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump({
        "version": 1, "name": "desk", "model": {"id": "scripted", "script": "main.yaml"},
        "checkpointer": "memory", "agent": agent, "agents": agents}))
    return path


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


async def test_a_turn_handing_to_and_calling_agents_runs_no_step_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LangGraph runs a node or a route that is not a coroutine in the loop's executor: a thread
    # hand-off at every turn's start (the route to the thread's current agent) and after each answer.
    path = team(tmp_path, [call("handoff_to_billing")],
                {"billing": [call("clerk", task="sum it"), "Billing: done."], "clerk": ["Clerk: 42."]},
                {"billing": {"description": "Refunds.", "agents": ["clerk"]},
                 "clerk": {"description": "Sums."}},
                {"handoffs": ["billing"]})
    threaded: list[Any] = []
    run_in_executor = asyncio.BaseEventLoop.run_in_executor

    def counted(loop: asyncio.AbstractEventLoop, executor: Any, func: Any, *args: Any) -> Any:
        threaded.append(func)
        return run_in_executor(loop, executor, func, *args)  # type: ignore[arg-type]

    async with load_agent(path, thread_id="t1") as runtime:
        monkeypatch.setattr(asyncio.BaseEventLoop, "run_in_executor", counted)
        events = [dict(event) async for event in stream_turn(runtime, "Refund me")]
    final = events[-1]
    assert (final["type"], final["text"], final["agent"]) == ("final", "Billing: done.", "billing")
    clerk = [e["text"] for e in events if e["type"] == "tool_result" and e["name"] == "clerk"]
    assert clerk == ["Clerk: 42."]
    assert threaded == []


async def test_a_parallel_workflows_join_template_is_compiled_once_however_often_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = team(tmp_path, [call("fan", task="go"), "first", call("fan", task="again"), "second"],
                {"a": ["A1", "A2"], "b": ["B1", "B2"]},
                {"a": {"description": "A."}, "b": {"description": "B."},
                 "fan": {"description": "Both.", "parallel": ["a", "b"],
                         "template": "{{ task }}: {{ answers.values() | join('+') }}"}},
                {"agents": ["fan"]})
    compiled: list[str] = []
    compile_source = SandboxedEnvironment.compile

    def counted(environment: SandboxedEnvironment, source: Any, *args: Any, **kwargs: Any) -> Any:
        compiled.append(str(source))
        return compile_source(environment, source, *args, **kwargs)

    monkeypatch.setattr(SandboxedEnvironment, "compile", counted)
    results = []
    async with load_agent(path, thread_id="t1") as runtime:
        for message in ("one", "two"):
            async for event in stream_turn(runtime, message):
                if event["type"] == "tool_result" and event["name"] == "fan":
                    results.append(event["text"])
    assert results == ["go: A1+B1", "again: A2+B2"]
    assert len(compiled) == 1


async def test_an_agents_call_is_answered_without_langchains_tool_layer_with_the_same_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its callbacks, input parsing and output formatting cost more than a one-step agent's run.
    path = team(tmp_path, [{"tool_calls": [{"name": "clerk", "args": {"task": "sum it"}, "id": "c1"},
                                           {"name": "clerk", "args": {"task": ""}, "id": "c2"},
                                           {"name": "clerk", "args": {}, "id": "c3"}]}, "Done."],
                {"clerk": ["Clerk: 42."]}, {"clerk": {"description": "Sums."}}, {"agents": ["clerk"]})
    layered: list[str] = []
    ainvoke = BaseTool.ainvoke

    async def counted(tool: BaseTool, *args: Any, **kwargs: Any) -> Any:
        layered.append(tool.name)
        return await ainvoke(tool, *args, **kwargs)

    monkeypatch.setattr(BaseTool, "ainvoke", counted)
    async with load_agent(path, thread_id="t1") as runtime:
        events = [dict(event) async for event in stream_turn(runtime, "Sum it")]
    results = {e["id"]: (e["status"], e["text"]) for e in events if e["type"] == "tool_result"}
    assert results == {
        "c1": ("success", "Clerk: 42."),
        "c2": ("error", "Invalid arguments for clerk: task: String should have at least 1 character"),
        "c3": ("error", "Invalid arguments for clerk: task: Field required")}
    assert events[-1]["text"] == "Done."
    assert layered == []
