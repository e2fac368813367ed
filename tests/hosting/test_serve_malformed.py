"""A served agent answers a message that is not one well-formed JSON-RPC message with a JSON-RPC
error saying what is wrong, over stdio (where the SDK stays silent) and over HTTP (where it dumps
pydantic's errors and opens a session for the request), and goes on serving."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx2
import pytest
from builders import ROOT, copy_bundled_agent
from serving import SERVE, http_agent

from runner.hosting.mcp.malformed import refusal

LIMIT = 60.0
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 7, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}


@pytest.mark.parametrize(("raw", "code", "message_id", "words"), [
    ("garbage", -32700, None, "Parse error: not JSON (expecting value at line 1, column 1)"),
    ('{"jsonrpc": "2.0", "id": 1, "method": "x",', -32700, None,
     "expecting property name enclosed in double quotes at line 1, column 43"),
    ('{"jsonrpc": "2.0", "id": 1, "method": "tools/li', -32700, None,
     "unterminated string starting at line 1, column 39"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "A\xff"}', -32700, None, "not UTF-8: byte 41 is 0xff"),
    (b'\xef\xbb\xbf{"jsonrpc": "2.0", "id": 1, "method": "ping"}', -32700, None, "a byte order mark (BOM)"),
    (b'\xff\xfe\x00garbage', -32700, None, "not UTF-8: byte 1 is 0xff"),  # not taken for UTF-16
    (b'{"jsonrpc": "2.0", "id": "s", "method": "ping", "x": "\xed\xa0\x80"}', -32700, None,
     "not UTF-8: byte 55 is 0xed"),  # an encoded surrogate
    ('{"jsonrpc": "2.0", "id": "s", "method": "ping", "x": "\\ud800"}', -32600, "s",
     "a string holds a lone surrogate"),
    ('{"jsonrpc": "2.0", "id": 2}', -32600, 2,
     'no "method" (a request or notification), "result" or "error"'),
    ("[1, 2]", -32600, None, "a batch (JSON array) is not accepted"),
    ('"hello"', -32600, None, "a JSON-RPC message is a JSON object, not a string"),
    ('{"jsonrpc": "1.0", "id": "a", "method": "x"}', -32600, "a", '"jsonrpc" must be "2.0"'),
    ('{"jsonrpc": "2.0", "id": [1], "result": {}}', -32600, None, '"id" must be a string or an integer'),
    ('{"jsonrpc": "2.0", "id": 3, "method": 5}', -32600, 3, '"method" must be a string, not an integer'),
    ('{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', -32600, None,
     '"id" must be a string or an integer, not a number with a fraction or exponent'),
    ('{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600, None,
     '"id" must be a string or an integer, not null'),
    ('{"jsonrpc": "2.0", "id": true, "method": "ping"}', -32600, None, "not a boolean"),
    ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', -32600, None, "not an object"),
    ('{"jsonrpc": "2.0", "id": 4, "method": "x", "params": [1]}', -32600, 4, '"params" must be an object'),
    ('{"jsonrpc": "2.0", "result": {}}', -32600, None, 'a response needs the "id" of the request'),
    ('{"jsonrpc": "2.0", "id": 5, "error": "bad"}', -32600, 5, "error: Input should be a valid dictionary"),
    ('{"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": {"capabilities": {}}}', -32602, 6,
     "Invalid params: params.clientInfo: Field required; params.protocolVersion: Field required"),
    ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 5}}', -32602, 7,
     "Invalid params: params.name: Input should be a valid string"),
])
def test_each_malformed_message_is_refused_with_its_code_id_and_what_is_wrong(
    raw: str | bytes, code: int, message_id: Any, words: str
) -> None:
    problem = refusal(raw)
    assert problem is not None
    assert (problem.error.code, problem.id) == (code, message_id)
    assert words in problem.error.message
    assert "pydantic" not in problem.error.message and " at at " not in problem.error.message
    assert len(problem.error.message) < 200


@pytest.mark.parametrize("raw", [
    '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
    '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
    '{"jsonrpc": "2.0", "id": "r1", "result": {}}',
    '{"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "no"}}',
    '{"jsonrpc": "2.0", "id": 2, "method": "custom/thing", "params": {"x": 1}}',  # the SDK: not found
    '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 5, "_meta": '
    '{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}',  # 2026-07-28: the SDK's own checks
])
def test_a_well_formed_message_is_left_to_the_sdk(raw: str) -> None:
    assert refusal(raw) is None


def _lines_of(stream: Any) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=read, daemon=True).start()
    return lines


def test_over_stdio_each_malformed_line_is_answered_and_serving_goes_on(tmp_path: Path) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    process = subprocess.Popen([*SERVE, str(manifest)], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        answers = _lines_of(process.stdout)
        assert process.stdin is not None
        process.stdin.write('garbage\n\n{"jsonrpc": "2.0", "id": 2}\n[1]\n' + json.dumps(INITIALIZE) + "\n")
        process.stdin.flush()
        received = [json.loads(answers.get(timeout=LIMIT)) for _ in range(4)]
        process.stdin.close()
        assert process.wait(timeout=LIMIT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    outcomes = sorted((str(answer["id"]), answer.get("error", {}).get("code", 0)) for answer in received)
    # The blank line is not answered; answers need not come in the order of the lines.
    assert outcomes == [("2", -32600), ("7", 0), ("None", -32700), ("None", -32600)]
    initialized = next(answer for answer in received if answer["id"] == 7)
    assert initialized["result"]["serverInfo"]["name"] == "notes-assistant"


def test_over_stdio_every_request_read_before_stdin_closes_is_answered(tmp_path: Path) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    ask = {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
           "params": {"name": "ask", "arguments": {"message": "notes__calculate {\"expression\": \"6*7\"}"}}}
    requests = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, ask,
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 3, "method": "ping"}]
    done = subprocess.run([*SERVE, str(manifest)], cwd=ROOT, capture_output=True, text=True, timeout=LIMIT,
                          input="".join(json.dumps(request) + "\n" for request in requests))
    assert done.returncode == 0, done.stderr
    answers = {answer["id"]: answer for answer in map(json.loads, done.stdout.splitlines())}
    assert sorted(answers) == [2, 3, 4, 7]
    assert answers[3]["result"] == {} and answers[2]["result"]["tools"][0]["name"] == "ask"
    # A turn still running when input ends is told so, as at Ctrl-C (or, on a fast machine, done).
    told = answers[4]["result"]["content"][0]["text"]
    assert told.startswith("the agent is stopping") or "42" in told, told


async def test_over_http_a_malformed_body_gets_400_and_the_error_and_opens_no_session(tmp_path: Path) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    with http_agent(manifest) as served:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(LIMIT)) as http:
            unparsed = await http.post(served.url, content=b"{not json", headers=HEADERS)
            shapeless = await http.post(served.url, content=b'{"jsonrpc": "2.0", "id": 9}', headers=HEADERS)
            valid = await http.post(served.url, json=INITIALIZE, headers=HEADERS)
            oversized = await http.post(served.url, content=b" " * (5 * 1024 * 1024), headers=HEADERS)
            untyped = await http.post(served.url, content=b"{}",
                                      headers={**HEADERS, "Content-Type": "text/plain"})
            elsewhere = await http.post(served.url.removesuffix("/mcp") + "/", json={}, headers=HEADERS)
    assert (unparsed.status_code, shapeless.status_code) == (400, 400)
    assert unparsed.json()["error"]["code"] == -32700
    assert "at line 1, column 2" in unparsed.json()["error"]["message"]
    assert shapeless.json() == {"jsonrpc": "2.0", "id": 9, "error": {"code": -32600, "message": (
        'Invalid Request: no "method" (a request or notification), "result" or "error" (a response)')}}
    assert "mcp-session-id" not in unparsed.headers and "mcp-session-id" not in shapeless.headers
    assert valid.status_code == 200 and "mcp-session-id" in valid.headers
    assert oversized.status_code == 413  # refused by its size before anything is checked
    assert untyped.status_code == 415
    assert untyped.json()["error"]["message"] == (
        "Invalid Request: the Content-Type must be application/json, not 'text/plain'")
    assert elsewhere.status_code == 404  # only the MCP endpoint's bodies are checked


async def test_over_http_a_refused_request_carries_no_session_id_and_stateless_allows_only_post(
    tmp_path: Path
) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    with http_agent(manifest) as served:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(LIMIT)) as http:
            no_session = await http.post(served.url, json=listing, headers=HEADERS)
            json_only = await http.post(served.url, json=INITIALIZE,
                                        headers={**HEADERS, "Accept": "application/json"})
    assert (no_session.status_code, json_only.status_code) == (400, 406)
    assert "mcp-session-id" not in no_session.headers and "mcp-session-id" not in json_only.headers
    with http_agent(manifest, "--stateless") as served:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(LIMIT)) as http:
            refused = [await http.request(method, served.url, headers=HEADERS)
                       for method in ("DELETE", "PUT")]
    for answer in refused:
        assert (answer.status_code, answer.headers["allow"]) == (405, "POST")
        assert answer.json()["error"]["message"].startswith("Method Not Allowed: served without sessions")


def test_over_stdio_a_client_that_stops_reading_ends_serving_quietly_at_the_end_of_input(
    tmp_path: Path
) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    process = subprocess.Popen([*SERVE, str(manifest)], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the answers have nowhere to go: each write fails with EPIPE
        requests = [INITIALIZE, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, "garbage"]
        process.stdin.write("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in requests))
        process.stdin.close()
        assert process.wait(timeout=LIMIT) == 0
        assert "Traceback" not in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
