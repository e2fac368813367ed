"""Sampling: a server asks the model of the agent making the call for a completion, allowed, asked or
denied."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from builders import TESTS, scripted_model, server, write_manifest
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.types import Command

from runner.agent.host import Host
from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn

ERAS = pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])
CALL = {"tool_calls": [{"name": "asking__summarize", "args": {"text": "a long story about a cat"}}]}


def asking_server(*, legacy: bool, **settings: Any) -> dict[str, Any]:
    return server("asking", *(["--legacy"] if legacy else []), **{"timeout": "20s", **settings})


def write_agent(folder: Path, *, legacy: bool, script: list[Any], **settings: Any) -> Path:
    return write_manifest(folder, {"asking": asking_server(legacy=legacy, **settings)}, name="sampling",
                          checkpointer="memory", model=scripted_model(folder, script))


async def turn(runtime: Runtime, message: Any) -> list[dict[str, Any]]:
    with anyio.fail_after(40):
        return [event async for event in stream_turn(runtime, message)]


def tool_text(events: list[dict[str, Any]]) -> str:
    return next(event["text"] for event in events if event["type"] == "tool_result")


@ERAS
async def test_allowed_sampling_is_answered_by_the_manifests_model_with_the_servers_prompt(
    tmp_path: Path, legacy: bool
) -> None:
    path = write_agent(tmp_path, legacy=legacy, script=[CALL, "cat story", "done"], sampling="allow")
    async with load_agent(path) as runtime:
        events = await turn(runtime, "summarize it")
        received = runtime.model.primary.received
    assert tool_text(events) == "summary: cat story"
    prompt = [SystemMessage("Summarize in five words."), HumanMessage("a long story about a cat")]
    assert received[1] == prompt


@ERAS
async def test_asked_sampling_shows_the_request_and_runs_once_approved(tmp_path: Path, legacy: bool) -> None:
    path = write_agent(tmp_path, legacy=legacy, script=[CALL, "cat story", "done"])
    async with load_agent(path) as runtime:
        events = await turn(runtime, "summarize it")
        [question] = [event for event in events if event["type"] == "sampling"]
        assert question["server"] == "asking" and question["max_tokens"] == 50
        assert question["messages"] == [{"role": "user", "text": "a long story about a cat"}]
        assert len(runtime.model.primary.received) == 1  # nothing was sent to the model yet
        events = await turn(runtime, Command(resume={"action": "approve"}))
    assert tool_text(events) == "summary: cat story"


async def test_asked_sampling_that_the_user_denies_never_reaches_the_model(tmp_path: Path) -> None:
    path = write_agent(tmp_path, legacy=True, script=[CALL, "done"])
    async with load_agent(path) as runtime:
        await turn(runtime, "summarize it")
        events = await turn(runtime, Command(resume={"action": "deny"}))
        received = runtime.model.primary.received
    assert "refused" in tool_text(events)
    assert len(received) == 2  # the agent's own two calls


@ERAS
async def test_denied_sampling_declares_no_capability_and_the_server_is_refused(
    tmp_path: Path, legacy: bool
) -> None:
    path = write_agent(tmp_path, legacy=legacy, script=[CALL, "done"], sampling="deny")
    async with load_agent(path) as runtime:
        events = await turn(runtime, "summarize it")
        received = runtime.model.primary.received
    assert [e["status"] for e in events if e["type"] == "tool_result"] == ["error"]
    assert len(received) == 2


async def test_a_one_shot_run_refuses_sampling_unless_the_manifest_allows_it(tmp_path: Path) -> None:
    path = write_agent(tmp_path, legacy=True, script=[CALL, "done"])
    async with load_agent(path, host=Host(answers_questions=False)) as runtime:
        events = await turn(runtime, "summarize it")
    assert [e["status"] for e in events if e["type"] == "tool_result"] == ["error"]
    assert [e for e in events if e["type"] == "sampling"] == []


def test_the_chat_shows_what_the_server_asks_the_model_before_it_is_sent(tmp_path: Path) -> None:
    from builders import chat_in_a_terminal

    write_agent(tmp_path, legacy=True, script=[CALL, "cat story", "done"])
    with chat_in_a_terminal(tmp_path) as chat:
        chat.sendline("summarize it")
        chat.expect(r"\[asking\] asks the model for a completion \(at most 50 tokens\):")
        chat.expect("system: Summarize in five words.")
        chat.expect("user: a long story about a cat")
        chat.expect(r"send it to the model\? \[y\]es / \[n\]o: ")
        chat.sendline("y")
        chat.expect("summary: cat story")
        chat.expect("> ")


async def test_a_server_that_keeps_working_on_cancel_gets_its_pending_request_answered_and_is_not_hung(
    tmp_path: Path,
) -> None:
    answers = tmp_path / "answers.jsonl"
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(
        [{"tool_calls": [{"name": "stubborn__ask_model", "args": {}}]}, "hi", "done"]))
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump({
        "version": 1, "name": "sampling", "checkpointer": "memory",
        "model": {"id": "scripted", "script": "script.yaml"},
        "servers": {"stubborn": {"command": "python", "timeout": "20s", "sampling": "ask",
                                 "args": [str(TESTS / "mcp_servers" / "stubborn_sampler.py"), str(answers)]}},
    }))
    async with load_agent(tmp_path / "agent.yaml") as runtime:
        events = await turn(runtime, "ask the model")
        assert [event["type"] for event in events if event["type"] == "sampling"] == ["sampling"]
        events = await turn(runtime, Command(resume={"action": "approve"}))
    assert tool_text(events) == "completed"
    first = yaml.safe_load(answers.read_text().splitlines()[0])
    assert "error" in first  # the request of the paused call was refused, not left unanswered


def test_the_call_command_lets_the_model_answer_sampling_the_manifest_allows(tmp_path: Path) -> None:
    write_agent(tmp_path, legacy=True, script=["cat story"], sampling="allow")
    result = subprocess.run(
        [sys.executable, "-m", "runner", "call", "agent.yaml", "asking__summarize", '{"text": "a cat"}'],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert "summary: cat story" in result.stdout


def write_team_sampling(folder: Path, *, legacy: bool, main: list[Any], agents: dict[str, Any],
                        **settings: Any) -> Path:
    """The asking server, a main agent playing ``main`` and ``agents``; ``summarizer`` is given the
    server and a scripted model of its own whose completion the server gets."""
    summarizer_script = [CALL, "the summarizer's own story", "summarized"]
    (folder / "summarizer.yaml").write_text(yaml.safe_dump(summarizer_script))
    summarizer = {"description": "Summarizes texts.", "tools": ["asking"],
                  "model": {"id": "scripted", "script": "summarizer.yaml"}}
    return write_manifest(folder, {"asking": asking_server(legacy=legacy, **settings)}, name="sampling",
                          checkpointer="memory", model=scripted_model(folder, main),
                          agent={"agents": sorted({"summarizer", *agents})},
                          agents={"summarizer": summarizer, **agents})


def delegate(agent: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": agent, "args": {"task": "summarize the cat story"}}]}


def inner_tool_text(events: list[dict[str, Any]]) -> str:
    return next(e["text"] for e in events if e["type"] == "tool_result" and e["name"] == "asking__summarize")


async def test_allowed_sampling_during_a_sub_agents_call_is_completed_by_that_agents_own_model(
    tmp_path: Path,
) -> None:
    # 2025-11-25: the request arrives in the session's receive task, not in the agent's tool call.
    path = write_team_sampling(tmp_path, legacy=True, main=[delegate("summarizer"), "done"], agents={},
                               sampling="allow")
    async with load_agent(path) as runtime:
        events = await turn(runtime, "summarize it")
        main_received = runtime.model.primary.received
        _, summarizer_model = runtime.model_of("summarizer")
    assert inner_tool_text(events) == "summary: the summarizer's own story"
    assert len(main_received) == 2  # the main agent's own two steps: no completion came from it
    prompt = [SystemMessage("Summarize in five words."), HumanMessage("a long story about a cat")]
    assert summarizer_model.primary.received[1] == prompt
    assert events[-1]["type"] == "final" and events[-1]["text"] == "done"


async def test_asked_sampling_in_a_workflow_step_names_the_agent_and_its_own_model_completes_once_approved(
    tmp_path: Path,
) -> None:
    path = write_team_sampling(tmp_path, legacy=False, main=[delegate("pipeline"), "done"],
                               agents={"pipeline": {"description": "Summarizes.", "chain": ["summarizer"]}},
                               sampling="ask")
    async with load_agent(path) as runtime:
        events = await turn(runtime, "summarize it")
        [question] = [event for event in events if event["type"] == "sampling"]
        assert question["agent"] == "summarizer" and question["server"] == "asking"
        events = await turn(runtime, Command(resume={"action": "approve"}))
        main_received = runtime.model.primary.received
    assert inner_tool_text(events) == "summary: the summarizer's own story"
    assert len(main_received) == 2
