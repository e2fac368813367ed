"""Sampling: a server asks the agent's model for a completion, allowed, asked or denied."""

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


def write_agent(folder: Path, *, legacy: bool, script: list[Any], **settings: Any) -> Path:
    asking = server("asking", *(["--legacy"] if legacy else []), **{"timeout": "20s", **settings})
    return write_manifest(folder, {"asking": asking}, name="sampling", checkpointer="memory",
                          model=scripted_model(folder, script))


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
