"""A JSON message nested a thousand levels deep (two kilobytes) is refused with -32600 naming the
bound, before any parser recurses into it: `serve` over stdio and HTTP goes on serving, and the
JSON-lines chat goes on chatting."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx2
import pytest
from builders import ROOT, copy_bundled_agent
from serving import SERVE, http_agent

from runner.hosting.mcp.malformed import MAX_NESTING, refusal, too_deep

LIMIT = 60.0
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 7, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}
DEEP = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"x": ' + "[" * 1000 + "]" * 1000 + "}}"
BOUND_WORDS = f"nested more than {MAX_NESTING} deep"


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("raw", [DEEP, DEEP.encode(), "[" * 100_000, '{"a": ' * 5000])
def test_a_deeply_nested_message_is_refused_naming_the_bound(raw: str | bytes) -> None:
    problem = refusal(raw)
    assert problem is not None
    assert problem.error.code == -32600 and BOUND_WORDS in problem.error.message


def test_the_bound_counts_brackets_outside_strings_only() -> None:
    assert not too_deep(nested(MAX_NESTING)) and too_deep(nested(MAX_NESTING + 1))
    assert not too_deep(json.dumps({"text": nested(1000)}))  # brackets in a string are text
    assert not too_deep(json.dumps({"text": '\\"' + nested(1000)}))  # an escaped quote ends nothing
    assert too_deep('"\\\\"' + nested(1000))  # an escaped backslash does end the string
    assert not too_deep(json.dumps([{"a": [1, 2, {"b": "\u00e9\U0001f600"}]}] * 10_000))  # wide, not deep


def test_over_stdio_a_deep_line_is_answered_and_serving_goes_on(tmp_path: Path) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    done = subprocess.run([*SERVE, str(manifest)], cwd=ROOT, capture_output=True, text=True, timeout=LIMIT,
                          input=DEEP + "\n" + json.dumps(INITIALIZE) + "\n")
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    refused = next(answer for answer in answers if answer["id"] is None)
    assert refused["error"]["code"] == -32600 and BOUND_WORDS in refused["error"]["message"]
    assert next(answer for answer in answers if answer["id"] == 7)["result"]["serverInfo"]
    assert "Traceback" not in done.stderr


async def test_over_http_a_deep_body_gets_400_and_serving_goes_on(tmp_path: Path) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    with http_agent(manifest) as served:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(LIMIT)) as http:
            deep = await http.post(served.url, content=DEEP.encode(), headers=HEADERS)
            valid = await http.post(served.url, json=INITIALIZE, headers=HEADERS)
    assert deep.status_code == 400
    assert deep.json()["error"]["code"] == -32600 and BOUND_WORDS in deep.json()["error"]["message"]
    assert valid.status_code == 200


def test_the_json_chat_refuses_a_deep_line_and_goes_on(tmp_path: Path) -> None:
    agent_dir = copy_bundled_agent(tmp_path)
    process = subprocess.Popen([sys.executable, "-m", "runner", "agent.yaml", "--json"], cwd=agent_dir,
                               text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    events: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            events.put(json.loads(line))

    def wait_for(kind: str) -> dict[str, Any]:
        while (event := events.get(timeout=LIMIT))["type"] != kind:
            pass
        return event

    threading.Thread(target=read, daemon=True).start()
    try:
        assert process.stdin is not None
        wait_for("ready")
        process.stdin.write('{"text": ' + nested(1000) + "}\n")
        process.stdin.write(json.dumps({"text": 'notes__calculate {"expression": "6*7"}'}) + "\n")
        process.stdin.flush()
        assert BOUND_WORDS in wait_for("error")["message"]
        assert wait_for("final")["text"] == "notes__calculate returned: 42"
        process.stdin.close()
        assert process.wait(timeout=LIMIT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
