"""What ``mcp-run auth`` needs beside the flow: a person in a browser, and logging out.

:class:`BrowserLogin` is the :class:`~runner.auth.flow.Interaction` of ``mcp-run auth login``: it
listens on 127.0.0.1 first, then shows the authorization URL (and opens the browser when there is a
display and the user did not say ``--no-browser``), and waits a bounded time for the redirect.
:func:`forget_login` revokes the stored tokens where the authorization server offers revocation (RFC
7009) and deletes the record either way.
"""

from __future__ import annotations

import os
import sys
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.shared.auth import AuthorizationCodeResult

from runner.auth.callback import CallbackListener
from runner.auth.flow import token_record
from runner.errors import AuthError
from runner.manifest import HttpServerSpec

LOGIN_TIMEOUT = 300.0  # a person logging in, 2FA included
REVOKE_TIMEOUT = 10.0


def has_display() -> bool:
    """Whether a browser can be opened here (a desktop session, not SSH or a container)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


@dataclass
class BrowserLogin:
    """Show the URL (``show``), open it when ``open_browser``, wait ``timeout`` s for the redirect."""

    show: Callable[[str], None]
    open_browser: bool
    timeout: float = LOGIN_TIMEOUT

    async def authorize(self, server: str, url: str, port: int) -> AuthorizationCodeResult:
        state = parse_qs(urlsplit(url).query).get("state", [""])[0]
        async with CallbackListener(server, port, state) as listener:
            self.show(url)
            if self.open_browser:
                await anyio.to_thread.run_sync(webbrowser.open, url)
            return await listener.result(self.timeout)


async def forget_login(key: str, spec: HttpServerSpec) -> tuple[bool, bool]:
    """Forget server ``key``'s stored login: (there was one, it was revoked at the server)."""
    record = token_record(spec)
    if record is None:
        return False, False
    tokens = await record.get_tokens()
    client = await record.get_client_info()
    endpoint = record.revocation_endpoint()
    revoked = False
    if tokens is not None and client is not None and endpoint:
        revoked = await _revoke(key, endpoint, client.client_id, client.client_secret, tokens)
    existed = record.delete()
    return existed and tokens is not None, revoked


async def _revoke(key: str, endpoint: str, client_id: str, secret: str | None, tokens: object) -> bool:
    """RFC 7009: revoke the refresh token and the access token; True when the server accepted."""
    accepted = True
    async with httpx2.AsyncClient(timeout=REVOKE_TIMEOUT, trust_env=True) as client:
        for hint in ("refresh_token", "access_token"):
            value = getattr(tokens, hint, None)
            if not value:
                continue
            form = {"token": value, "token_type_hint": hint, "client_id": client_id}
            if secret:
                form["client_secret"] = secret
            try:
                response = await client.post(endpoint, data=form)
            except httpx2.HTTPError as exc:
                raise AuthError(key, f"cannot reach the revocation endpoint: {type(exc).__name__}") from exc
            accepted = accepted and response.status_code == 200
    return accepted
