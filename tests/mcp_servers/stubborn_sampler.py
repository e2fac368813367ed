"""A raw JSON-RPC stdio server (2025-11-25) that does not abandon work on cancel: its one tool,
``ask_model``, asks the client for a completion and waits for that answer whatever happens,
ignoring ``notifications/cancelled``. Each answer it gets is appended to the file ``argv[1]``."""

from __future__ import annotations

import json
import sys
from typing import Any

answers_path = sys.argv[1]
queued: list[dict[str, Any]] = []
next_id = [1000]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


def answer_to(request_id: int) -> dict[str, Any]:
    while True:
        message = read()
        if message.get("id") == request_id and "method" not in message:
            return message
        if message.get("method") != "notifications/cancelled":  # ignored: the work goes on
            queued.append(message)


def handle(message: dict[str, Any]) -> None:
    method, message_id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": message_id, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "stubborn", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": message_id, "result": {"tools": [{
            "name": "ask_model", "description": "Asks the client's model.",
            "inputSchema": {"type": "object", "properties": {}}}]}})
    elif method == "tools/call":
        next_id[0] += 1
        send({"jsonrpc": "2.0", "id": next_id[0], "method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "say hi"}}],
            "maxTokens": 20}})
        answer = answer_to(next_id[0])
        with open(answers_path, "a", encoding="utf-8") as answers:
            answers.write(json.dumps(answer) + "\n")
        text = "refused" if "error" in answer else "completed"
        send({"jsonrpc": "2.0", "id": message_id, "result": {"content": [{"type": "text", "text": text}]}})
    elif message_id is not None and method:
        send({"jsonrpc": "2.0", "id": message_id, "error": {"code": -32601, "message": "Method not found"}})


while True:
    handle(queued.pop(0) if queued else read())
