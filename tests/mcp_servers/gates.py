"""A server whose tools wait until the test opens them: it proves which calls ran at the same time.

Run in the test process (``serve_http``), so the test opens the gates and reads the log directly:

    gates = Gates()
    url = serve_http(build(gates))
    ...  # the agent calls gates__hold {"key": "a"}: it enters and waits
    gates.wait_for("enter a"); gates.open("a")

Tools: hold (log ``enter KEY``, wait for the gate, log ``leave KEY``, or ``cancelled KEY``),
note (log ``note TEXT``),
ask_user (a form for a colour, over the 2025-11-25 request or the 2026-07-28 result asking).
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

HOLD_LIMIT = 60.0  # seconds a gate stays shut at most: a test that forgets one still ends


class Gates:
    """Gates by key, and the log of what the tools did, shared with the test's thread."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self._changed = threading.Condition()
        self._open: dict[str, threading.Event] = {}

    def _gate(self, key: str) -> threading.Event:
        with self._changed:
            return self._open.setdefault(key, threading.Event())

    def record(self, entry: str) -> None:
        with self._changed:
            self.log.append(entry)
            self._changed.notify_all()

    def open(self, key: str) -> None:
        self.record(f"open {key}")
        self._gate(key).set()

    def wait_for(self, entry: str, timeout: float = 30.0) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: entry in self.log, timeout):
                raise TimeoutError(f"{entry!r} never happened; log: {self.log}")


def build(gates: Gates, name: str = "gates") -> MCPServer:
    server = MCPServer(name)

    @server.tool()
    async def hold(key: str) -> str:
        """Wait until the test opens gate ``key``."""
        gates.record(f"enter {key}")
        try:
            opened = await anyio.to_thread.run_sync(gates._gate(key).wait, HOLD_LIMIT, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            gates.record(f"cancelled {key}")
            raise
        gates.record(f"leave {key}")
        return f"held {key}" if opened else f"gate {key} stayed shut"

    @server.tool()
    def note(text: str) -> str:
        """Write ``text`` in the log."""
        gates.record(f"note {text}")
        return f"noted {text}"

    @server.tool()
    async def ask_user(ctx: Context) -> Any:
        """Ask the user for a colour (a form)."""
        request = types.ElicitRequest(params=types.ElicitRequestFormParams(
            message="Which colour?",
            requested_schema={"type": "object", "properties": {"colour": {"type": "string"}},
                              "required": ["colour"]},
        ))
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            answer = (ctx.input_responses or {}).get("colour")
            if answer is None:
                return types.InputRequiredResult(input_requests={"colour": request})
            result = types.ElicitResult.model_validate(answer.model_dump(by_alias=True))
        else:
            result = await ctx.request_context.session.send_request(request, types.ElicitResult)
        gates.record(f"answer {result.action} {result.content}")
        return f"colour: {result.action} {(result.content or {}).get('colour')}"

    return server
