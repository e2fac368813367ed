"""A hand-written stdio MCP server that misbehaves on request: the wire is under the test's control.

    wire.py [--name N] [--echo-delay MS] [--slow-start SECONDS] [--bad-tools] [--unusable-schema]
            [--spawn-child] [--record FILE]

It speaks the 2025-11-25 handshake era with the standard library only (no SDK import), so it
starts in a tenth of a second - the crash loop restarts it a hundred times - and it can write
what no well-behaved server would: junk, invalid JSON-RPC, answers with unknown ids, nothing.
Every message is logged to stderr as ``received <method> <id>`` before it is handled (the id a
``notifications/cancelled`` names; with
``--record``, also appended to FILE, for a test that cannot read the server's stderr), and calls
run concurrently (answers may overtake each other).

Tools: ``echo(text, delay_ms=--echo-delay)`` answers ``"<name>: <text>"``; ``pid``; ``hang`` (never answers);
``sometimes(n)`` (answers even ``n`` only); ``stop_reading`` (answers, then never reads stdin
again); ``junk(kind)`` (see :data:`JUNK_KINDS`); ``big(chars)``; ``env_names``; ``exit(code)``
(dies without answering). ``--bad-tools`` adds tools with invalid names and schemas to the list,
``--unusable-schema`` one whose schema is valid MCP but unusable (a dangling ``$ref``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
METHOD_NOT_FOUND = -32601
TEN_MB = 10 * 1024 * 1024
JUNK_KINDS = (
    "line",  # a junk line of its own, then the answer
    "glued",  # junk without a newline glued to the front of the answer
    "not_jsonrpc",  # JSON lines that are not JSON-RPC messages, then the answer
    "unknown_id",  # a response to a request nobody sent, then the answer
    "only_unknown_id",  # the answer under a wrong id only: the real request is never answered
    "bad_result",  # the right id, but a result that is not a tools/call result
    "huge_line",  # a 10 MB junk line, then the answer
    "binary",  # bytes that are not UTF-8, then the answer
)


def _schema(**properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
    }


TOOLS: list[dict[str, Any]] = [
    {"name": "echo", "description": "Answer '<server>: <text>', after delay_ms.",
     "inputSchema": {**_schema(text="string"),
                     "properties": {"text": {"type": "string"}, "delay_ms": {"type": "integer"}}}},
    {"name": "pid", "description": "The server's process id.", "inputSchema": _schema()},
    {"name": "hang", "description": "Never answer.", "inputSchema": _schema()},
    {"name": "sometimes", "description": "Answer even n only.", "inputSchema": _schema(n="integer")},
    {"name": "stop_reading", "description": "Answer, then never read stdin again.",
     "inputSchema": _schema()},
    {"name": "junk", "description": "Misbehave on stdout, see JUNK_KINDS.",
     "inputSchema": _schema(kind="string")},
    {"name": "big", "description": "Answer with chars characters.", "inputSchema": _schema(chars="integer")},
    {"name": "env_names", "description": "The names of the server's environment variables.",
     "inputSchema": _schema()},
    {"name": "exit", "description": "Exit with code, without answering.",
     "inputSchema": _schema(code="integer")},
]

# Names outside MCP's [A-Za-z0-9_.-]{1,128}, and schemas no model can be given.
BAD_TOOLS: list[dict[str, Any]] = [
    {"name": "", "inputSchema": _schema()},
    {"name": "has space", "inputSchema": _schema()},
    {"name": "slash/and:colon", "inputSchema": _schema()},
    {"name": "x" * 200, "inputSchema": _schema()},
    {"name": 42, "inputSchema": _schema()},
    {"name": "no_schema"},
    {"name": "schema_is_text", "inputSchema": "an object, honestly"},
    {"name": "schema_is_string_type", "inputSchema": {"type": "string"}},
    {"name": "schema_remote_ref", "inputSchema": {"$ref": "https://example.invalid/schema.json"}},
    {"description": "a tool without a name", "inputSchema": _schema()},
]
# A schema the protocol accepts but no model can be given: its reference points nowhere.
UNUSABLE_SCHEMA_TOOLS: list[dict[str, Any]] = [
    {"name": "schema_ref_to_nothing",
     "inputSchema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}},
]


class WireServer:
    def __init__(self, name: str, tools: list[dict[str, Any]], echo_delay_ms: int,
                 record: str | None = None) -> None:
        self.name = name
        self.record = record
        self.echo_delay_ms = echo_delay_ms
        self.tools = tools
        self.calls: dict[Any, asyncio.Task[None]] = {}
        self.reading = True

    # -- the wire ------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # os.write may write less than asked into a full pipe
            view = view[os.write(1, view):]

    def send(self, message: dict[str, Any], prefix: bytes = b"") -> None:
        self.write(prefix + json.dumps(message).encode() + b"\n")

    def answer(self, request_id: Any, result: dict[str, Any], prefix: bytes = b"") -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result}, prefix)

    def text(self, request_id: Any, text: str, prefix: bytes = b"") -> None:
        self.answer(request_id, {"content": [{"type": "text", "text": text}], "isError": False}, prefix)

    # -- dispatch ------------------------------------------------------------------------

    def handle(self, message: dict[str, Any]) -> None:
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        named = params.get("requestId") if method == "notifications/cancelled" else request_id
        print(f"received {method} {named}", file=sys.stderr, flush=True)
        if self.record is not None:
            with open(self.record, "a", encoding="utf-8") as record:
                record.write(f"received {method} {named}\n")
        if method == "notifications/cancelled":
            task = self.calls.pop(params.get("requestId"), None)
            if task is not None:
                task.cancel()
            return
        if request_id is None:
            return  # other notifications need nothing
        if method == "initialize":
            self.answer(request_id, {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": self.name, "version": "1.0.0"},
                "instructions": "A misbehaving test server.",
            })
        elif method == "ping":
            self.answer(request_id, {})
        elif method == "tools/list":
            self.answer(request_id, {"tools": self.tools})
        elif method == "tools/call" and params.get("name") == "stop_reading":
            self.reading = False  # at once: not one more line is read
            self.text(request_id, "no longer reading")
        elif method == "tools/call":
            task = asyncio.get_running_loop().create_task(self.call(request_id, params))
            self.calls[request_id] = task
            task.add_done_callback(lambda _: self.calls.pop(request_id, None))
        else:  # server/discover (this is a 2025 server), prompts, resources, ...
            self.send({"jsonrpc": "2.0", "id": request_id,
                       "error": {"code": METHOD_NOT_FOUND, "message": f"no method {method}"}})

    async def call(self, request_id: Any, params: dict[str, Any]) -> None:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if name == "echo":
            await asyncio.sleep(arguments.get("delay_ms", self.echo_delay_ms) / 1000)
            self.text(request_id, f"{self.name}: {arguments['text']}")
        elif name == "pid":
            self.text(request_id, str(os.getpid()))
        elif name == "hang" or (name == "sometimes" and arguments["n"] % 2):
            await asyncio.Event().wait()
        elif name == "sometimes":
            self.text(request_id, f"{self.name}: {arguments['n']}")
        elif name == "junk":
            self.junk(request_id, arguments["kind"])
        elif name == "big":
            self.text(request_id, "x" * arguments["chars"])
        elif name == "env_names":
            self.text(request_id, json.dumps(sorted(os.environ)))
        elif name == "exit":
            os._exit(arguments["code"])
        else:
            self.send({"jsonrpc": "2.0", "id": request_id,
                       "error": {"code": -32602, "message": f"unknown tool {name!r}"}})

    def junk(self, request_id: Any, kind: str) -> None:
        answer = f"{self.name}: after {kind}"
        if kind == "line":
            self.write(b"this line is not JSON-RPC\n")
            self.text(request_id, answer)
        elif kind == "glued":
            self.text(request_id, answer, prefix=b"GLUED-JUNK ")
        elif kind == "not_jsonrpc":
            for line in ('{"hello": "world"}', "[1, 2, 3]", '"a string"', '{"jsonrpc": "1.0", "id": 1}',
                         '{"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1}}'):
                self.write(line.encode() + b"\n")
            self.text(request_id, answer)
        elif kind == "unknown_id":
            self.text(987654321, "an answer to nobody")
            self.text(request_id, answer)
        elif kind == "only_unknown_id":
            self.text(f"not-{request_id}", "an answer under the wrong id")
        elif kind == "bad_result":
            self.answer(request_id, {"content": "not a list of blocks", "isError": "maybe"})
        elif kind == "huge_line":
            self.write(b"j" * TEN_MB + b"\n")
            self.text(request_id, answer)
        elif kind == "binary":
            self.write(b"\xff\xfe\x00\x80 not utf-8\n")
            self.text(request_id, answer)


async def serve(server: WireServer) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * TEN_MB)
    stdin, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while server.reading:
        line = await reader.readline()
        if not line:
            return  # stdin closed: the client is done with us
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            server.handle(message)
    stdin.pause_reading()  # stop_reading: alive, but deaf; the pipe fills up
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="wire")
    parser.add_argument("--echo-delay", type=int, default=0, help="default delay_ms of echo")
    parser.add_argument("--slow-start", type=float, default=0.0)
    parser.add_argument("--bad-tools", action="store_true")
    parser.add_argument("--unusable-schema", action="store_true")
    parser.add_argument("--spawn-child", action="store_true")
    parser.add_argument("--record", help="a file each received message is also appended to")
    options = parser.parse_args()
    if options.spawn_child:  # a grandchild in the server's process group
        subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
        print("spawned a child", file=sys.stderr, flush=True)
    if options.slow_start:
        print(f"slow start: sleeping {options.slow_start}s", file=sys.stderr, flush=True)
        time.sleep(options.slow_start)
    tools = TOOLS + (BAD_TOOLS if options.bad_tools else [])
    tools += UNUSABLE_SCHEMA_TOOLS if options.unusable_schema else []
    asyncio.run(serve(WireServer(options.name, tools, options.echo_delay, options.record)))


if __name__ == "__main__":
    main()
