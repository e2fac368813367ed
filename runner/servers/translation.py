"""The one table that turns foreign errors (MCP SDK, anyio, httpx, pydantic) into runner errors.

    with translated(Boundary("demo", "tools/call 'echo'", timeout=30.0)):
        await client.call_tool("echo", {...})

Every place that talks to a server through the SDK goes through :func:`translated` (or
:func:`translate`), so a foreign exception leaves ``runner.servers`` only as one of the
``ServerError`` classes of ``runner.errors``, chained to its cause. As in httpx's
``map_exceptions``, the mapping is an ordered table: the first entry whose type matches wins, and
inside an exception group (the SDK's task groups raise them) the most telling leaf is translated.
The OAuth flow (``runner.auth.flow``, the ``httpx2.Auth`` of an http/sse server) is a boundary of
its own: it raises ``AuthError``, a ``ServerError`` that passes through here unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from runner.errors import (
    ServerClosedError,
    ServerError,
    ServerRequestError,
    ServerStartError,
    ServerTimeoutError,
)
from runner.redaction import redact_urls
from runner.servers.transports.isolation import IsolationUnavailable

SDK_CONNECTION_CLOSED = "Connection closed"  # the SDK's own words when a session ends: nothing to add


def _never() -> bool:
    return False


@dataclass(frozen=True)
class Boundary:
    """What a translated error is worded from: which server, which request, which limit.

    ``setting`` names the manifest settings that change ``timeout``; ``session_gone`` tells whether
    the session the request went out on has ended meanwhile (then any failure means "closed").
    """

    server: str
    what: str
    timeout: float = 0.0
    setting: str = ""
    session_gone: Callable[[], bool] = _never


def timed_out(boundary: Boundary, detail: str = "") -> ServerTimeoutError:
    """``… timed out after 1s (set servers.demo.timeout to allow longer)``."""
    hint = f" (set {boundary.setting} to allow longer)" if boundary.setting else ""
    return ServerTimeoutError(
        boundary.server, f"{boundary.what} timed out after {boundary.timeout:g}s{detail}{hint}",
        timeout=boundary.timeout,
    )


def _closed(boundary: Boundary, exc: BaseException) -> ServerError:
    # The SDK's HTTP transport says why it gave a request up ("SSE stream failed: ...").
    said = exc.error.message if isinstance(exc, MCPError) else ""
    why = f" ({said})" if said and said != SDK_CONNECTION_CLOSED else ""
    return ServerClosedError(boundary.server, f"{boundary.what} failed: the connection closed{why}")


def _answer(boundary: Boundary, exc: MCPError) -> ServerError:
    if boundary.session_gone():  # answered by the transport for a session that is over
        return ServerClosedError(boundary.server, f"{boundary.what} failed: the session ended")
    if exc.code == types.REQUEST_TIMEOUT:
        return timed_out(boundary)
    if exc.code == types.CONNECTION_CLOSED:
        return _closed(boundary, exc)
    # Servers built on the TypeScript SDK put "MCP error CODE: " in the message: the code is said once.
    message = exc.error.message.removeprefix(f"MCP error {exc.code}: ")
    return ServerRequestError(boundary.server, f"{boundary.what}: {message}", code=exc.code,
                              data=exc.error.data)


def _timeout(boundary: Boundary, exc: TimeoutError) -> ServerError:
    return timed_out(boundary)


def _invalid(boundary: Boundary, exc: ValidationError) -> ServerError:
    return ServerRequestError(
        boundary.server, f"{boundary.what}: the answer is not valid MCP", code=types.INTERNAL_ERROR
    )


def _http_status(boundary: Boundary, exc: httpx2.HTTPStatusError) -> ServerError:
    return ServerClosedError(boundary.server, f"{boundary.what} failed: {describe(exc)}")


def _unreachable(boundary: Boundary, exc: httpx2.TransportError) -> ServerError:
    return ServerClosedError(
        boundary.server, f"{boundary.what} failed: cannot reach the server: {describe(exc)}"
    )


def _os_error(boundary: Boundary, exc: OSError) -> ServerError:
    return ServerClosedError(boundary.server, f"{boundary.what} failed: {describe(exc)}")


def _isolation(boundary: Boundary, exc: IsolationUnavailable) -> ServerError:
    return ServerStartError(boundary.server, str(exc), permanent=exc.permanent)


def _sdk_state(boundary: Boundary, exc: RuntimeError) -> ServerError:
    """The SDK's "not connected" and result-validation failures."""
    if boundary.session_gone():
        return _closed(boundary, exc)
    return ServerRequestError(boundary.server, f"{boundary.what}: {exc}", code=types.INTERNAL_ERROR)


# Any: each function takes the kind of exception it is paired with below, which one type cannot say.
Translation = Callable[[Boundary, Any], ServerError]

# In order: the first matching entry wins (TimeoutError before OSError, of which it is a subclass).
TRANSLATIONS: tuple[tuple[type[Exception] | tuple[type[Exception], ...], Translation], ...] = (
    (MCPError, _answer),
    (IsolationUnavailable, _isolation),
    (TimeoutError, _timeout),
    ((anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream), _closed),
    (ValidationError, _invalid),
    (httpx2.HTTPStatusError, _http_status),
    (httpx2.TransportError, _unreachable),
    (OSError, _os_error),
    (RuntimeError, _sdk_state),
)


def translate(boundary: Boundary, exc: BaseException) -> ServerError | None:
    """The runner error for ``exc`` (or the most telling leaf of a group); None if not foreign."""
    found = leaves(exc)
    for leaf in found:
        if isinstance(leaf, ServerError):
            return leaf
    for kinds, translation in TRANSLATIONS:
        for leaf in found:
            if isinstance(leaf, kinds):
                return translation(boundary, leaf)
    return None


class translated:  # lower case: used like the function it reads as, ``with translated(boundary):``
    """Let runner errors through; raise the translation of a foreign one, chained to it.

    A class rather than a generator context manager: it wraps every request."""

    __slots__ = ("boundary",)

    def __init__(self, boundary: Boundary) -> None:
        self.boundary = boundary

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> Literal[False]:
        # Foreign errors only: runner errors pass, and cancellation is not an Exception.
        if exc is None or isinstance(exc, ServerError) or not isinstance(exc, Exception):
            return False
        error = translate(self.boundary, exc)
        if error is None:
            return False
        raise error from exc


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or ``exc`` itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def root_cause(exc: BaseException) -> BaseException:
    """The most telling exception inside an exception group from the SDK's task groups."""
    found = leaves(exc)
    for kind in (ServerStartError, httpx2.HTTPError, MCPError, OSError):
        for leaf in found:
            if isinstance(leaf, kind):
                return leaf
    return found[0]


def describe(exc: BaseException) -> str:
    """A foreign exception in a few words, for the message of the runner error replacing it (the
    URLs in its text redacted: HTTP clients name the URL they failed on)."""
    if isinstance(exc, MCPError):
        return f"{exc.error.message} (code {exc.code})"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code} {exc.response.reason_phrase}".rstrip()
    text = redact_urls(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
