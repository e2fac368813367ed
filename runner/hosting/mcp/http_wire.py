"""Where the served agent listens: streamable HTTP on HOST:PORT (stdin/stdout: :mod:`.stdio`).

Over HTTP, a bearer token (when given; one of the callers' tokens, :mod:`runner.hosting.callers`)
is required on every request: a request without one, or with another one, gets 401 before it
reaches the MCP server (or the OpenAI-compatible API served beside it). Binding to an address other than
loopback is the caller's decision (:func:`check_binding`): it needs ``allow_remote`` and a token.

With sessions (2025-11-25 callers, served without ``stateless``), a session with no request in
flight for :class:`Sessions` ``idle_timeout`` seconds (no call, no open GET stream) ends, and at most
``limit`` are open at once: a request that would open another gets 503 and an error that names the
limit and how to raise it (:func:`refuse_past_the_limit`).

The server ends when its block is cancelled (a signal), once the open requests are answered.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import uvicorn
from mcp.server.lowlevel import Server
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runner import sdk
from runner.errors import ServeError
from runner.hosting.callers import CALLER_KEY, NO_CALLERS, Callers
from runner.hosting.mcp.malformed import buffered, refuse_malformed, usable_id

DEFAULT_HOST = "127.0.0.1"
DEFAULT_SESSION_IDLE_TIMEOUT = 600.0  # seconds a 2025-11-25 session may go without any request in flight
DEFAULT_MAX_SESSIONS = 1000
MCP_PATH = "/mcp"
SESSION_HEADER = b"mcp-session-id"
GRACEFUL_SHUTDOWN = 2.0  # seconds open HTTP requests get to finish once the server is told to stop
HURRIED_SHUTDOWN = 2.0  # seconds uvicorn gets to close its sockets once told to stop at once
# Seconds an idle keep-alive connection stays open. Longer than clients keep theirs (httpx, so the
# MCP SDK's client: 5 s; load balancers: up to 60 s), so a client is the one to close it: a server
# closing a connection as the client sends its next request on it leaves that request unanswered
# (the client reads an end of stream, nothing is logged); uvicorn's own default is also 5 s.
KEEP_ALIVE = 75
LOOPBACK_NAMES = ("localhost",)


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host in LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:  # a host name: only "localhost" is taken for loopback
            return False


def parse_address(text: str) -> Address:
    """``HOST:PORT``, ``[IPV6]:PORT`` or ``:PORT`` (loopback); ValueError says what is wrong."""
    host, separator, port = text.rpartition(":")
    if not separator or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not HOST:PORT (for example 127.0.0.1:8000; port 0 picks a free one)")
    host = host.removeprefix("[").removesuffix("]") or DEFAULT_HOST
    return Address(host, int(port))


def check_binding(address: Address, *, allow_remote: bool, token: str | Callers | None) -> None:
    """Refuse a non-loopback address unless remote callers are allowed and a token is required
    (``token``: the one token, or the callers' tokens)."""
    if address.loopback:
        return
    if not allow_remote:
        raise ValueError(f"{address.host} is not a loopback address: serving there needs --allow-remote "
                         "(and a bearer token, --token-env VAR)")
    if not token:
        raise ValueError(f"serving on {address.host} needs a bearer token: --token-env VAR names the "
                         "environment variable that holds it")


@dataclass(frozen=True)
class Sessions:
    """How the 2025-11-25 callers' sessions are kept: ended after ``idle_timeout`` seconds without a
    request in flight, at most ``limit`` open at once."""

    idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT
    limit: int = DEFAULT_MAX_SESSIONS

    def __post_init__(self) -> None:
        if not (0 < self.idle_timeout < float("inf")) or self.limit < 1:
            raise ValueError("sessions need a positive, finite idle timeout and a limit of at least 1")

    def refusal_text(self) -> str:
        return (f"too many open sessions: this agent keeps at most {self.limit} at once (mcp-run serve "
                f"--max-sessions {self.limit}; its operator can raise it). A session ends when its client "
                f"ends it (DELETE) or after {self.idle_timeout:g} s without a request "
                "(--session-idle-timeout): try again later")


# --------------------------------------------------------------------------- HTTP


def require_bearer(app: ASGIApp, callers: Callers, *,
                   refusals: Mapping[str, ASGIApp] | None = None) -> ASGIApp:
    """``app`` behind bearer tokens: other HTTP requests get 401 (the token is never echoed). A
    request with a known token goes on with its caller in its scope
    (:func:`runner.hosting.callers.caller_of`).
    ``refusals`` answers the 401 of the paths under a prefix in their own API's shape."""
    mcp_refusal = JSONResponse(
        {"error": "invalid_token", "error_description": "a valid bearer token is required"},
        status_code=401, headers={"WWW-Authenticate": 'Bearer realm="mcp-run"'})

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, given = header.partition(b" ")
            known, caller = callers.caller(given.strip())
            if scheme.lower() != b"bearer" or not known:
                refusal = next((answer for prefix, answer in (refusals or {}).items()
                                if scope["path"].startswith(prefix)), mcp_refusal)
                await refusal(scope, receive, send)
                return
            scope = {**scope, CALLER_KEY: caller}
        await app(scope, receive, send)

    return guarded


def by_path(app: ASGIApp, routes: Mapping[str, ASGIApp]) -> ASGIApp:
    """``app``, but the requests whose path starts with a prefix of ``routes`` go to its app."""

    async def routed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for prefix, other in routes.items():
                path = scope["path"]
                if path == prefix.rstrip("/") or path.startswith(prefix.rstrip("/") + "/"):
                    await other(scope, receive, send)
                    return
        await app(scope, receive, send)

    return routed


def posts_only(app: ASGIApp, path: str) -> ASGIApp:
    """``app`` answering anything but POST at ``path`` with 405 (``Allow: POST``): without sessions
    there is no stream to GET (the SDK would hold a GET open with nothing ever to send, which also
    holds up a stop) and none to DELETE."""
    refusal = JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
        "code": INVALID_REQUEST, "message": "Method Not Allowed: served without sessions, send each request "
                                            "with POST"}}, status_code=405, headers={"Allow": "POST"})

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] != "POST" and scope["path"] == path:
            await refusal(scope, receive, send)
            return
        await app(scope, receive, send)

    return checked


def no_session_on_refusals(app: ASGIApp) -> ASGIApp:
    """``app`` without the ``Mcp-Session-Id`` header on its 4xx answers: the SDK sets one on some
    refusals (no session id, a wrong Accept, an unsupported method) for a session it does not
    keep, which reads as if the refused request had opened one."""

    async def stripped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_stripped(message: Message) -> None:
            if message["type"] == "http.response.start" and 400 <= message["status"] < 500:
                headers = [(name, value) for name, value in message.get("headers", [])
                           if name.lower() != SESSION_HEADER]
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_stripped)

    return stripped


def refuse_past_the_limit(app: ASGIApp, sessions: Sessions) -> ASGIApp:
    """``app`` with the SDK's refusal of a session past the limit (503, "Too many open sessions")
    answered in words that name the limit and how to raise it, with the id of the request refused
    (``null`` when it had none). The SDK decides, under its own lock, so the limit is exact however
    many callers open sessions at once. The body is read here once more from what
    :func:`refuse_malformed` already holds (within the SDK's body limit)."""
    text = sessions.refusal_text()

    async def answered(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or dict(scope["headers"]).get(SESSION_HEADER):
            await app(scope, receive, send)
            return
        raw, replay = await buffered(receive)
        refused = False

        async def send_worded(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == 503:
                refused = True  # the SDK logs it (a warning)
                body = _refusal_body(raw, text)
                await send({"type": "http.response.start", "status": 503, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
            elif not refused:
                await send(message)

        await app(scope, replay, send_worded)

    return answered


def _refusal_body(raw: bytes, text: str) -> bytes:
    try:
        message = json.loads(raw)
    except ValueError:  # refuse_malformed lets no such body through; null is the answer if one came
        message = None
    return json.dumps({"jsonrpc": "2.0", "id": usable_id(message), "error": {
        "code": INTERNAL_ERROR, "message": text}}).encode()


class OpenRequests:
    """``app``, counting its HTTP requests in flight other than GETs (a session's event stream,
    which never ends on its own): a stop waits for those to be answered before ending sessions."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.count = 0
        self._none = anyio.Event()
        self._none.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] == "GET":
            await self.app(scope, receive, send)
            return
        if self.count == 0:
            self._none = anyio.Event()
        self.count += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.count -= 1
            if self.count == 0:
                self._none.set()

    async def answered(self) -> None:
        """Until no request but GETs is in flight."""
        await self._none.wait()


async def end_sessions(server: Server[Any]) -> None:
    """End every open streamable-HTTP session, so the GET streams 2025-11-25 callers hold open end
    now rather than be cut, mid-response, once uvicorn's graceful shutdown runs out (a caller that
    comes back with its session id is told the session is gone). Each session ends through its
    transport's public ``terminate``."""
    for transport in sdk.http_session_transports(server):
        await transport.terminate()


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: the command's signal handling stops it."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        ended = getattr(self.lifespan, "shutdown_event", None)
        if self.force_exit and ended is not None and not ended.is_set():
            # A hurried stop skips the app's lifespan shutdown, leaving its task pending: torn
            # down with the event loop, it is logged as an error. It takes no request: let it end.
            with anyio.move_on_after(HURRIED_SHUTDOWN):
                await self.lifespan.shutdown()


def bind(address: Address) -> socket.socket:
    """A listening socket on ``address`` (port 0: a free port, read back from the socket)."""
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: without it small SSE writes wait for delayed ACKs (~40 ms).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((address.host, address.port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {address.host}:{address.port}: {exc.strerror or exc}") from exc
    return sock


def http_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{MCP_PATH}"


async def serve_http(server: Server[Any], sock: socket.socket, *, callers: Callers = NO_CALLERS,
                     stateless: bool = False, sessions: Sessions = Sessions(),
                     also: Mapping[str, ASGIApp] | None = None,
                     refusals: Mapping[str, ASGIApp] | None = None,
                     on_ready: Callable[[str], None] | None = None,
                     on_stop: Callable[[], Awaitable[None]] | None = None,
                     hurry: anyio.Event | None = None) -> None:
    """Serve streamable HTTP on ``sock`` until cancelled; open requests get GRACEFUL_SHUTDOWN seconds.

    ``on_stop`` is awaited (for up to GRACEFUL_SHUTDOWN seconds) when the server starts stopping,
    before it stops taking requests: to answer or end the requests that would otherwise stay open
    (running turns, listen streams) while their callers can still hear the answer. Once ``hurry``
    is set (a second Ctrl-C), the stop waits for none of that: open requests are dropped.

    ``also`` serves other APIs beside MCP, by path prefix (``/v1/``: the OpenAI-compatible one),
    behind the same tokens; ``refusals`` words their 401 (see :func:`require_bearer`)."""
    host = sock.getsockname()[0]
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, stateless_http=stateless,
        session_idle_timeout=sessions.idle_timeout, max_sessions=sessions.limit)
    app = no_session_on_refusals(app)
    if stateless:
        app = posts_only(app, MCP_PATH)
    else:
        app = refuse_past_the_limit(app, sessions)
    app = refuse_malformed(app, MCP_PATH)
    if also:
        app = by_path(app, also)
    app = open_requests = OpenRequests(app)
    if callers:
        app = require_bearer(app, callers, refusals=refusals)
    # uvicorn's own colour test looks at stdout; its log lines go to stderr.
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_keep_alive=KEEP_ALIVE, timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN),
                            use_colors=sys.stderr.isatty())
    web = _Uvicorn(config)
    finished = anyio.Event()

    async def run() -> None:
        try:
            with anyio.CancelScope(shield=True):  # it stops when told to (should_exit), not midway
                await web.serve(sockets=[sock])
        finally:
            finished.set()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        try:
            if on_ready is not None:
                on_ready(http_url(sock))
            await finished.wait()
        finally:
            with anyio.CancelScope(shield=True):
                async with cancelled_when(hurry):
                    if on_stop is not None:
                        with anyio.move_on_after(GRACEFUL_SHUTDOWN):
                            await on_stop()
                    with anyio.move_on_after(GRACEFUL_SHUTDOWN):
                        # Every answer (a stopped turn's) out first: ending a session drops what
                        # its responses have not sent yet.
                        await open_requests.answered()
                    with anyio.move_on_after(GRACEFUL_SHUTDOWN):
                        await end_sessions(server)
                    web.should_exit = True
                    with anyio.move_on_after(GRACEFUL_SHUTDOWN + 5):
                        await finished.wait()
                web.should_exit = web.force_exit = True  # hurried: uvicorn waits for no request
                with anyio.move_on_after(HURRIED_SHUTDOWN):
                    await finished.wait()
            sock.close()


@asynccontextmanager
async def cancelled_when(event: anyio.Event | None) -> AsyncIterator[None]:
    """The block, cancelled if ``event`` is set before it ends."""
    async with anyio.create_task_group() as group:

        async def cancel_when_set() -> None:
            if event is not None:
                await event.wait()
                group.cancel_scope.cancel()

        group.start_soon(cancel_when_set)
        yield
        group.cancel_scope.cancel()
