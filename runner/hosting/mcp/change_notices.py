"""The 2025-11-25 callers that keep a session (stdio, streamable HTTP with sessions), told when the
agent's prompt commands or its tool changed.

Such a caller hears of a change as a bare ``notifications/prompts/list_changed`` or
``notifications/tools/list_changed`` on its session's own channel (stdout over stdio, the session's
GET stream over HTTP). The SDK keeps no list of live sessions, so :class:`LegacySessions` does: a
middleware of the low-level ``Server`` that keeps a caller's session once it has said
``notifications/initialized`` and forgets it when the SDK ends that connection. 2026-07-28 callers
are not kept: they hear changes on the ``subscriptions/listen`` streams they open.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from runner import sdk

logger = logging.getLogger(__name__)

NOTIFY_LIMIT = 5.0  # seconds one caller gets to take a notification: a stalled one holds up no other


class AnnouncingServer(Server[Any]):
    """A low-level ``Server`` whose ``initialize`` answer (2025-11-25 callers) declares ``listChanged``
    for prompts and tools exactly when it will send them: ``announces`` False (no lasting session,
    ``--stateless``) declares neither. The SDK's HTTP session manager builds that answer from this
    method's defaults; 2026-07-28 callers get theirs from ``server/discover``, untouched here."""

    def __init__(self, *args: Any, announces: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.announces = announces

    def create_initialization_options(self, notification_options: NotificationOptions | None = None,
                                      *args: Any, **kwargs: Any) -> InitializationOptions:
        if notification_options is None:
            notification_options = NotificationOptions(prompts_changed=self.announces,
                                                       tools_changed=self.announces)
        return super().create_initialization_options(notification_options, *args, **kwargs)


class LegacySessions:
    """The live 2025-11-25 sessions of one server: ``server.middleware.append(sessions)``."""

    def __init__(self) -> None:
        self._sessions: dict[Connection, ServerSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        # Kept before the rest of the chain runs: a request the caller sent after this notification,
        # though served concurrently, then finds the session kept.
        if ctx.method == "notifications/initialized" and ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            self._keep(ctx.session)
        return await call_next(ctx)

    def _keep(self, session: ServerSession) -> None:
        connection = sdk.session_connection(session)
        if connection in self._sessions:  # a repeated notifications/initialized
            return
        self._sessions[connection] = session  # its channel outside requests is the connection's
        connection.exit_stack.callback(self._sessions.pop, connection, None)

    async def announce(self, *, prompts: bool, tools: bool) -> None:
        """Tell every kept session what changed, all at once; one that fails or stalls is logged
        (debug) and holds up no other."""
        if not (prompts or tools):
            return
        async with anyio.create_task_group() as group:
            for connection, session in list(self._sessions.items()):
                group.start_soon(self._tell, connection, session, prompts, tools)

    async def _tell(self, connection: Connection, session: ServerSession, prompts: bool, tools: bool) -> None:
        with anyio.move_on_after(NOTIFY_LIMIT) as limit:
            try:
                if prompts:
                    await session.send_prompt_list_changed()
                if tools:
                    await session.send_tool_list_changed()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                # The SDK's channel drops a write to a closed stream itself (debug log); should one
                # raise instead, its caller is gone: forget it.
                logger.debug("list change not sent to session %s: %r; dropped", connection.session_id, exc)
                self._sessions.pop(connection, None)
        if limit.cancelled_caught:
            logger.debug("list change not taken by session %s within %s s",
                         connection.session_id, NOTIFY_LIMIT)
