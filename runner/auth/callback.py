"""The login redirect: a one-shot HTTP listener on 127.0.0.1 that receives the authorization code.

:class:`CallbackListener` binds before the authorization URL is shown (so the browser can never
arrive first), answers ``GET /callback?code=…&state=…[&iss=…]`` with a short page, and hands the
parameters to the SDK's flow as an ``AuthorizationCodeResult``. Other paths get 404 and are
ignored (browsers ask for ``/favicon.ico``), and so is a redirect whose ``state`` is not the one of
this login (a forged or stray redirect gets an error page; the login goes on waiting for its own).
It listens on the loopback interface only and for a bounded time: no redirect within ``timeout``
seconds is an ``AuthError`` saying so.
"""

from __future__ import annotations

import secrets
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from mcp.shared.auth import AuthorizationCodeResult

from runner.errors import AuthError

CALLBACK_PATH = "/callback"
DEFAULT_CALLBACK_PORT = 33418
REQUEST_LIMIT = 16 * 1024  # a request line and headers; the code and state are short
READ_TIMEOUT = 10.0  # one connection that sends nothing must not hold the listener

_DONE_PAGE = (
    "<!doctype html><title>mcp-run</title><p>{message} You can close this window.</p>"
)


def redirect_uri(port: int) -> str:
    return f"http://127.0.0.1:{port}{CALLBACK_PATH}"


class CallbackListener:
    """``async with CallbackListener(server, port, state) as listener``; then ``await
    listener.result(timeout)``. ``state`` is the one the authorization URL carries: only a redirect
    bringing it back counts.
    """

    def __init__(self, server: str, port: int, state: str) -> None:
        self.server = server
        self.port = port
        self._state = state
        self._listener: anyio.abc.SocketListener | None = None

    @classmethod
    async def check_free(cls, server: str, port: int) -> None:
        """Raise AuthError now if the redirect could not be listened for, before a login registers
        a client at the authorization server for nothing."""
        async with cls(server, port, state=""):
            pass

    async def __aenter__(self) -> CallbackListener:
        try:
            listeners = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self.port)
            # One address (127.0.0.1), so one socket: accept on it directly.
            self._listener = listeners.listeners[0]  # type: ignore[assignment]
        except OSError as exc:
            raise AuthError(
                self.server, f"cannot listen for the login redirect on 127.0.0.1:{self.port}: "
                f"{exc.strerror} (another login in progress? servers.{self.server}.auth.callback_port "
                "sets another port)"
            ) from exc
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._listener is not None:
            await self._listener.aclose()

    async def result(self, timeout: float) -> AuthorizationCodeResult:
        """The redirect's parameters; ``AuthError`` when none arrives within ``timeout`` seconds."""
        assert self._listener is not None, "use the listener inside `async with`"
        with anyio.move_on_after(timeout):
            while True:
                stream = await self._listener.accept()
                async with stream:
                    found = await self._answer(stream)
                if found is not None:
                    return found
        raise AuthError(
            self.server,
            f"no login redirect reached {redirect_uri(self.port)} within {timeout:g}s; "
            "run the login again and finish it in the browser",
        )

    async def _answer(self, stream: anyio.abc.SocketStream) -> AuthorizationCodeResult | None:
        """Read one request; the result when it is the redirect (an error answer raises)."""
        request = b""
        with anyio.move_on_after(READ_TIMEOUT):
            while b"\r\n\r\n" not in request and len(request) < REQUEST_LIMIT:
                try:
                    request += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
        line = request.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        target = urlsplit(parts[1]) if len(parts) == 3 and parts[0] == "GET" else None
        if target is None or target.path != CALLBACK_PATH:
            await _respond(stream, "404 Not Found", "Not the login redirect.")
            return None
        query = {name: values[0] for name, values in parse_qs(target.query).items()}
        if not secrets.compare_digest(query.get("state", "").encode(), self._state.encode()):
            await _respond(stream, "400 Bad Request", "This redirect is not the one of the login in "
                           "progress: it was ignored, and the login was not completed.")
            return None
        if "error" in query:
            await _respond(stream, "400 Bad Request", "The login was not completed.")
            detail = query.get("error_description") or query["error"]
            raise AuthError(self.server, f"the authorization server refused the login: {detail}")
        if not query.get("code"):
            await _respond(stream, "400 Bad Request", "The redirect carried no authorization code.")
            return None
        await _respond(stream, "200 OK", "Logged in.")
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


async def _respond(stream: anyio.abc.SocketStream, status: str, message: str) -> None:
    body = _DONE_PAGE.format(message=message).encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    try:
        await stream.send(head + body)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the browser went away; the parameters arrived all the same
