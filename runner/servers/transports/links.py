"""One connection attempt's transport (stdio, HTTP, SSE or websocket), and what the supervisor watches.

A :class:`Link` wraps the SDK transport so that every inbound message stamps ``last_inbound``
(the heartbeat's notion of traffic) and the end of the read stream fires ``closed`` (the connection
is gone: process exit, dropped stream, or a 2025 HTTP session the server no longer knows). HTTP
responses with an error status are remembered so a failed start can say "HTTP 401" instead of the
SDK's generic JSON-RPC stand-in. Every response body, and every server-sent event, is bounded to
the size of one message while it arrives (``message_limits``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import httpx2
from mcp.client import Transport
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from runner import telemetry
from runner.manifest import HttpServerSpec, StdioServerSpec
from runner.servers.listings import ToolListingFilter
from runner.servers.transports import library_logs, message_limits
from runner.servers.transports.message_limits import bounded_transports
from runner.servers.transports.repeated_warnings import RepeatedWarning
from runner.servers.transports.stdio import StderrLog, StdioProcess
from runner.servers.transports.websocket import websocket_transport

if TYPE_CHECKING:
    from runner.sdk import ReadStream, TransportStreams, WriteStream

logger = logging.getLogger(__name__)

HTTP_CONNECT_TIMEOUT = 30.0
# Liveness is the heartbeat's job; a long read timeout only bounds a silently dead stream.
HTTP_READ_TIMEOUT = 24 * 3600.0
PERMANENT_HTTP_STATUSES = frozenset({401, 403, 404, 405, 410})
SESSION_HEADER = "mcp-session-id"


@dataclass(frozen=True)
class HttpFailure:
    status: int
    reason: str

    @property
    def permanent(self) -> bool:
        return self.status in PERMANENT_HTTP_STATUSES

    def __str__(self) -> str:
        return f"HTTP {self.status} {self.reason}".rstrip()


class _WrappedStream:
    """Closing, and ``async with``, of a stream that wraps the SDK's ``_inner`` one."""

    _inner: ReadStream[SessionMessage | Exception] | WriteStream[SessionMessage]

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


class _ActivityReadStream(_WrappedStream):
    """A read stream that stamps the link on every item and fires ``closed`` at its end.

    Tool listings pass through the link's :class:`ToolListingFilter` on the way in.
    """

    _inner: ReadStream[SessionMessage | Exception]

    def __init__(self, inner: ReadStream[SessionMessage | Exception], link: Link) -> None:
        self._inner = inner
        self._link = link

    @property
    def last_context(self) -> Any:
        # The dispatcher reads the sender's contextvars from context-aware streams (HTTP).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._link.closed.set()
            raise
        return self._link.heard(item)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _ListingWriteStream(_WrappedStream):
    """A write stream that shows every outbound message to the link's :class:`ToolListingFilter`.

    A message is sent with the link's ``library_warnings`` in its context: the SDK's HTTP transport
    runs the message's request in the context it was sent from, and what it logs there is about
    this link's server.
    """

    _inner: WriteStream[SessionMessage]

    def __init__(self, inner: WriteStream[SessionMessage], listings: ToolListingFilter,
                 library_warnings: RepeatedWarning) -> None:
        self._inner = inner
        self._listings = listings
        self._library_warnings = library_warnings

    async def send(self, item: SessionMessage, /) -> None:
        self._listings.outbound(item)
        with library_logs.speaking_for(self._library_warnings):
            await self._inner.send(item)


class Link:
    """The transport of one connection attempt to server ``key``."""

    def __init__(
        self,
        key: str,
        spec: StdioServerSpec | HttpServerSpec,
        *,
        base_dir: Path,
        stderr_log: StderrLog | None,
    ) -> None:
        self.key = key
        self.spec = spec
        self.process: StdioProcess | None = None
        if isinstance(spec, StdioServerSpec):
            assert stderr_log is not None, "stdio servers log their stderr"
            self.process = StdioProcess(key, spec, base_dir=base_dir, log=stderr_log)
        self.last_inbound = anyio.current_time()
        self.closed = anyio.Event()
        self.http_failure: HttpFailure | None = None
        self.session_expired = False
        self.listings = ToolListingFilter(key)
        # What the SDK logs about this server's output: one line each, counted (library_logs).
        self.library_warnings = RepeatedWarning(logger, key, "errors the MCP library reported")
        library_logs.install()
        # OAuth for http/sse servers (runner.auth): a 401 with a Bearer challenge starts the flow.
        self.auth: httpx2.Auth | None = None
        if isinstance(spec, HttpServerSpec):  # the SDK's OAuth (jwt, cryptography): for http only
            from runner.auth.flow import http_auth

            self.auth = http_auth(key, spec)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def transport(self) -> Transport:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[TransportStreams]:
        try:
            with library_logs.speaking_for(self.library_warnings):  # the transport's tasks inherit it
                async with self._inner_transport() as (read_stream, write_stream):
                    yield (_ActivityReadStream(read_stream, self),
                           _ListingWriteStream(write_stream, self.listings, self.library_warnings))
        finally:
            self.library_warnings.flush()
        self.closed.set()

    def _inner_transport(self) -> Transport:
        if self.process is not None:
            return self.process.transport()
        assert isinstance(self.spec, HttpServerSpec)
        if self.spec.transport == "websocket":
            return websocket_transport(
                self.key, self.spec.url, headers=self.spec.headers, open_timeout=HTTP_CONNECT_TIMEOUT,
                on_http_failure=self._remember_upgrade_refusal,
            )
        if self.spec.transport == "sse":
            return sse_client(
                self.spec.url,
                headers=dict(self.spec.headers),
                timeout=HTTP_CONNECT_TIMEOUT,
                sse_read_timeout=HTTP_READ_TIMEOUT,
                httpx_client_factory=self._http_client,
                auth=self.auth,
            )
        return self._streamable_http()

    @asynccontextmanager
    async def _streamable_http(self) -> AsyncIterator[TransportStreams]:
        assert isinstance(self.spec, HttpServerSpec)
        async with self._http_client(headers=dict(self.spec.headers), auth=self.auth) as client:
            # Events are bounded by the client's transport, to the limit of every message.
            async with streamable_http_client(self.spec.url, http_client=client,
                                              max_sse_event_size=None) as streams:
                yield streams

    def _http_client(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        async def remember_failure(response: httpx2.Response) -> None:
            if response.status_code < 400:
                return
            self.http_failure = HttpFailure(response.status_code, response.reason_phrase)
            if response.status_code == 404 and SESSION_HEADER in response.request.headers:
                # The server forgot our 2025 session (it restarted): this connection is over.
                self.session_expired = True
                self.closed.set()

        bounded = bounded_transports(self.key, message_limits.MAX_MESSAGE_BYTES)
        return httpx2.AsyncClient(
            headers=headers,
            auth=auth,
            transport=bounded.transport,
            mounts=bounded.mounts,
            timeout=timeout or httpx2.Timeout(HTTP_CONNECT_TIMEOUT, read=HTTP_READ_TIMEOUT),
            event_hooks={"response": [remember_failure], "request": telemetry.http_request_hooks()},
            trust_env=True,
        )

    def _remember_upgrade_refusal(self, status: int, reason: str) -> None:
        self.http_failure = HttpFailure(status, reason)

    def heard(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        """``item`` arrived: traffic (stamped), and tool listings filtered on the way in."""
        self.last_inbound = anyio.current_time()
        return self.listings.inbound(item)

    def idle_for(self) -> float:
        return anyio.current_time() - self.last_inbound if not self.closed.is_set() else math.inf

