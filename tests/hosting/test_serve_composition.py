"""An mcp-run agent as a server of another manifest (``python -m runner serve sub.yaml``, what
``command: mcp-run, args: [serve, sub.yaml]`` runs): the main agent calls the sub-agent's ``ask``
tool, and the sub-agent's approvals reach the top-level user as the main agent's questions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from builders import ROOT, write_manifest
from langgraph.types import Command
from mcp_servers import gates as gates_server
from serving import call_message, write_served_agent

from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn

LIMIT = 120


def write_main_agent(folder: Path, gates_url: str) -> Path:
    sub = write_served_agent(folder / "sub", gates_url, approve=["note"])
    return write_manifest(folder / "main", {
        "sub": {"command": "python", "args": ["-m", "runner", "serve", str(sub)], "timeout": "60s"},
    }, name="main", model="offline")


async def run_turn(runtime: Any, message: Any) -> list[dict[str, Any]]:
    return [event async for event in stream_turn(runtime, message)]


async def test_the_main_agent_calls_the_sub_agent_and_its_user_approves_the_sub_agents_tool(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    main = write_main_agent(tmp_path, url)
    message = call_message("sub__ask", message=call_message("gates__note", text="deep"))
    with anyio.fail_after(LIMIT):
        async with load_agent(main) as runtime:
            assert sorted(runtime.catalog.entries) == ["sub__ask"]
            asked = await run_turn(runtime, message)
            [question] = [event for event in asked if event["type"] == "elicitation"]
            assert question["server"] == "sub"
            assert question["message"] == (
                'The agent wants to call the tool gates__note with {"text": "deep"}. Allow it?')
            assert log.log == []  # nothing runs before the top-level user answers
            approve = Command(resume={"action": "accept", "content": {"approve": True}})
            answered = await run_turn(runtime, approve)
    [final] = [event for event in answered if event["type"] == "final"]
    assert final["text"] == "sub__ask returned: gates__note returned: noted deep"
    assert log.log == ["note deep"]


async def test_a_refusal_by_the_top_level_user_denies_the_sub_agents_tool(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    main = write_main_agent(tmp_path, url)
    message = call_message("sub__ask", message=call_message("gates__note", text="never"))
    with anyio.fail_after(LIMIT):
        async with load_agent(main) as runtime:
            await run_turn(runtime, message)
            answered = await run_turn(runtime, Command(resume={"action": "decline"}))
    [final] = [event for event in answered if event["type"] == "final"]
    assert final["text"].startswith("sub__ask returned: gates__note failed")
    assert "the caller's user chose decline" in final["text"]
    assert log.log == []


def test_a_one_shot_run_of_the_main_agent_denies_the_sub_agents_approval_at_once(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    main = write_main_agent(tmp_path, url)
    message = call_message("sub__ask", message=call_message("gates__note", text="one-shot"))
    result = subprocess.run([sys.executable, "-m", "runner", str(main), "-p", message, "--json"],
                            capture_output=True, text=True, timeout=LIMIT, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [tool_result] = [event for event in events if event["type"] == "tool_result"]
    assert "gates__note failed" in tool_result["text"]
    assert log.log == []


def test_the_main_agents_json_chat_asks_its_user_the_sub_agents_approval(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    main = write_main_agent(tmp_path, url)
    # Without "/call" (the chat's own command, which calls tools outside the conversation).
    message = "sub__ask " + json.dumps({"message": call_message("gates__note", text="chat")})
    lines = [{"text": message}, {"action": "accept", "content": {"approve": True}}]
    result = subprocess.run([sys.executable, "-m", "runner", str(main), "--json"], cwd=ROOT,
                            input="".join(json.dumps(line) + "\n" for line in lines),
                            capture_output=True, text=True, timeout=LIMIT)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [question] = [event for event in events if event["type"] == "elicitation"]
    assert question["server"] == "sub" and "gates__note" in question["message"]
    [final] = [event for event in events if event["type"] == "final"]
    assert final["text"] == "sub__ask returned: gates__note returned: noted chat"
    assert log.log == ["note chat"]
