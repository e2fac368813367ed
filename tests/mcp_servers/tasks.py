"""A hand-written stdio MCP server (2025-11-25) whose tools run as tasks.

    tasks.py [--no-capability] [--poll-ms N]

The SDK's servers do not implement tasks, so this one speaks JSON-RPC with the standard library.
It declares ``tasks.requests.tools.call`` (unless ``--no-capability``) and suggests a poll
interval of ``--poll-ms`` (default 20). Every message it receives is logged to stderr as
``received <method> <id> <taskId>``, so a test can read from the server's log that a task was
cancelled.

Tools (``taskSupport`` in brackets):
``steps(steps, interval_ms)`` [required]: ``working`` with the message ``step i of n`` each
interval, then ``completed`` with ``"<steps> steps done"``; ``forever`` [required]: works until
cancelled; ``clarify`` [required]: turns ``input_required`` and asks the client (an
``elicitation/create`` tied to the task) while ``tasks/result`` is open, then answers what it got;
``failing`` [required]: ``failed`` with an error result; ``dropped`` [required]: the server
cancels it itself; ``either`` [optional]: says whether it ran as a task; ``seen`` [forbidden]:
the task requests received so far, one ``<method> <taskId>`` a line.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
TERMINAL = ("completed", "failed", "cancelled")


def _tool(name: str, support: str | None, **properties: str) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "name": name,
        "description": f"{name} ({support or 'no'} task support)",
        "inputSchema": {"type": "object",
                        "properties": {key: {"type": kind} for key, kind in properties.items()}},
    }
    if support is not None:
        tool["execution"] = {"taskSupport": support}
    return tool


TOOLS = [
    _tool("steps", "required", steps="integer", interval_ms="integer"),
    _tool("forever", "required"),
    _tool("clarify", "required"),
    _tool("failing", "required"),
    _tool("dropped", "required"),
    _tool("either", "optional"),
    _tool("seen", None),
]


def _now() -> str:
    return datetime.now(UTC).isoformat()


class Task:
    def __init__(self, task_id: str, poll_ms: int) -> None:
        self.task_id = task_id
        self.status = "working"
        self.message: str | None = None
        self.created = self.updated = _now()
        self.poll_ms = poll_ms
        self.result: dict[str, Any] | None = None
        self.changed = asyncio.Event()
        self.runner: asyncio.Task[None] | None = None
        self.answer: asyncio.Future[dict[str, Any]] | None = None  # clarify: the client's answer

    def set(self, status: str, message: str | None = None) -> None:
        self.status, self.message, self.updated = status, message, _now()
        self.changed.set()
        self.changed = asyncio.Event()

    def wire(self) -> dict[str, Any]:
        return {"taskId": self.task_id, "status": self.status, "statusMessage": self.message,
                "createdAt": self.created, "lastUpdatedAt": self.updated, "ttl": 60000,
                "pollInterval": self.poll_ms}


class TaskServer:
    def __init__(self, capability: bool, poll_ms: int) -> None:
        self.capability = capability
        self.poll_ms = poll_ms
        self.tasks: dict[str, Task] = {}
        self.seen: list[str] = []
        self.ids = itertools.count(1)
        self.pending: dict[str, asyncio.Future[dict[str, Any]]] = {}  # our requests to the client

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(json.dumps(message).encode() + b"\n")
        while data:
            data = data[os.write(1, data):]

    def answer(self, request_id: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def error(self, request_id: Any, code: int, message: str) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})

    async def ask_client(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = f"s{next(self.ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return await future

    # -- dispatch ------------------------------------------------------------------------

    def handle(self, message: dict[str, Any]) -> None:
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        task_id = params.get("taskId", "")
        print(f"received {method} {request_id} {task_id}".rstrip(), file=sys.stderr, flush=True)
        if method is None and request_id in self.pending:  # the client's answer to our request
            self.pending.pop(request_id).set_result(message.get("result") or {})
            return
        if method and method.startswith("tasks/"):
            self.seen.append(f"{method} {task_id}")
        if request_id is None:
            return
        if method == "initialize":
            capabilities: dict[str, Any] = {"tools": {}}
            if self.capability:
                capabilities["tasks"] = {"cancel": {}, "requests": {"tools": {"call": {}}}}
            self.answer(request_id, {"protocolVersion": PROTOCOL_VERSION, "capabilities": capabilities,
                                     "serverInfo": {"name": "tasks", "version": "1.0.0"}})
        elif method == "ping":
            self.answer(request_id, {})
        elif method == "tools/list":
            self.answer(request_id, {"tools": TOOLS})
        elif method == "tools/call":
            self.call(request_id, params)
        elif method in ("tasks/get", "tasks/cancel", "tasks/result") and task_id not in self.tasks:
            self.error(request_id, -32602, f"no task {task_id}")
        elif method == "tasks/get":
            self.answer(request_id, self.tasks[task_id].wire())
        elif method == "tasks/cancel":
            task = self.tasks[task_id]
            if task.runner is not None:
                task.runner.cancel()
            task.set("cancelled", "cancelled by the client")
            self.answer(request_id, task.wire())
        elif method == "tasks/result":
            asyncio.get_running_loop().create_task(self.result(request_id, self.tasks[task_id]))
        else:
            self.error(request_id, -32601, f"no method {method}")

    def call(self, request_id: Any, params: dict[str, Any]) -> None:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if name == "seen":
            self.answer(request_id, {"content": [{"type": "text", "text": "\n".join(self.seen)}]})
            return
        if "task" not in params:
            if name == "either":
                self.answer(request_id, {"content": [{"type": "text", "text": "ran as a plain call"}]})
            else:
                self.error(request_id, -32601, f"{name} requires task augmentation")
            return
        task = Task(f"task-{next(self.ids)}", self.poll_ms)
        self.tasks[task.task_id] = task
        task.runner = asyncio.get_running_loop().create_task(self.work(task, name, arguments))
        self.answer(request_id, {"task": task.wire()})

    async def work(self, task: Task, name: str, arguments: dict[str, Any]) -> None:
        def done(text: str, *, error: bool = False) -> None:
            task.result = {"content": [{"type": "text", "text": text}], "isError": error}
            task.set("failed" if error else "completed")

        if name == "steps":
            steps = arguments.get("steps", 3)
            for step in range(1, steps + 1):
                task.set("working", f"step {step} of {steps}")
                await asyncio.sleep(arguments.get("interval_ms", 50) / 1000)
            done(f"{steps} steps done")
        elif name == "forever":
            task.set("working", "working forever")
            await asyncio.Event().wait()
        elif name == "clarify":
            task.answer = asyncio.get_running_loop().create_future()
            task.set("input_required", "which colour?")
            answer = await task.answer
            task.set("working", "got the answer")
            done(f"clarified: {answer.get('action')} {json.dumps(answer.get('content'))}")
        elif name == "failing":
            done("it broke", error=True)
        elif name == "dropped":
            task.set("cancelled", "the server gave up")
        elif name == "either":
            done("ran as a task")

    async def result(self, request_id: Any, task: Task) -> None:
        while task.status not in TERMINAL:
            if task.status == "input_required" and task.answer is not None and not task.answer.done():
                related = {"io.modelcontextprotocol/related-task": {"taskId": task.task_id}}
                answer = await self.ask_client("elicitation/create", {
                    "mode": "form", "message": "Which colour?", "_meta": related,
                    "requestedSchema": {"type": "object", "properties": {"colour": {"type": "string"}},
                                        "required": ["colour"]},
                })
                task.answer.set_result(answer)
            await task.changed.wait()
        if task.status == "cancelled":
            self.error(request_id, -32602, f"task {task.task_id} was cancelled")
            return
        assert task.result is not None
        related = {"io.modelcontextprotocol/related-task": {"taskId": task.task_id}}
        self.answer(request_id, {**task.result, "_meta": related})


async def serve(server: TaskServer) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            server.handle(message)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-capability", action="store_true", help="do not declare task support")
    parser.add_argument("--poll-ms", type=int, default=20)
    options = parser.parse_args()
    asyncio.run(serve(TaskServer(not options.no_capability, options.poll_ms)))


if __name__ == "__main__":
    main()
