"""Who may drive the agent through the page: a per-process token, and the request's Host and Origin.

The token is made when ``mcp-run web`` starts and printed in the page's address
(``/?token=…``); the page is served only to a request that carries it, and embeds it for its own
API requests, which send it in the ``X-MCP-Run-Token`` header. Another site can neither read the
page (the browser's same-origin rule; and without the token it is refused) nor send that header
without a CORS preflight, which is never allowed. Checked besides:

* ``Host``: on loopback, only the loopback names at the served port, so a site that rebinds its own
  name to 127.0.0.1 (DNS rebinding) is refused before anything else;
* ``Origin``: when a browser sends one, it is the page's own (``http://`` + its ``Host``).

Every answer carries a strict Content-Security-Policy (scripts and styles from the page's own
files only, nothing inline; frames only of the MCP Apps' pages under ``/apps/frame/``) and asks for
no referrer, so the token never leaves in a link. An MCP App's page (``/apps/frame/KEY``) is the
exception: it carries its own policy (:meth:`runner.web.apps.AppPage.headers`), not the page's, and
its unguessable key is its credential (a frame's load carries neither the token nor an Origin).
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

TOKEN_HEADER = "x-mcp-run-token"
TOKEN_PARAMETER = "token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "media-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
APP_FRAME_PATH = "/apps/frame/"
_HOST = re.compile(r"[A-Za-z0-9.-]+(?::[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?")
SECURITY_HEADERS = (
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
)


def page_policy(host: str | None) -> str:
    """The page's Content-Security-Policy for a request to ``host`` (its Host header, checked by
    the gate): :data:`CONTENT_SECURITY_POLICY`, and frames only from :data:`APP_FRAME_PATH` there."""
    frames = f"http://{host}{APP_FRAME_PATH}" if host is not None and _HOST.fullmatch(host) else "'none'"
    return f"{CONTENT_SECURITY_POLICY}; frame-src {frames}"


def security_headers(host: str | None) -> list[tuple[str, str]]:
    """The headers every answer but an app's frame carries (``http://`` in ``frame-src`` matches
    ``https://`` too)."""
    return [("content-security-policy", page_policy(host)), *SECURITY_HEADERS]


def new_token() -> str:
    """A token no other site can guess (256 bits)."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Gate:
    """The checks every request passes: ``token`` (the process's, or the one given with
    ``--allow-remote``), and the ``Host`` names the page answers to (``None``: any, when remote
    callers are allowed and the token alone decides)."""

    token: str
    hosts: frozenset[str] | None

    @classmethod
    def for_address(cls, token: str, host: str, port: int, *, loopback: bool,
                    names: Iterable[str] = ()) -> Gate:
        """The gate of a page served at ``host:port``; ``names``: the host names it was asked to
        listen on (``--host``), which reach it too."""
        if not loopback:
            return cls(token, None)
        known = (*LOOPBACK_HOSTS, host, *names)
        bracketed = (f"[{name}]" if ":" in name and not name.startswith("[") else name for name in known)
        return cls(token, frozenset(f"{name}:{port}".lower() for name in bracketed))

    def host_refusal(self, host: str | None) -> str | None:
        """Why a request with this ``Host`` header is refused, or None."""
        if self.hosts is None:
            return None
        if host is None or host.lower() not in self.hosts:
            return ("this page answers only at the loopback address it listens on (the Host header names "
                    "another; to be reached by other names, serve it with --allow-remote)")
        return None

    def origin_refusal(self, origin: str | None, host: str | None) -> str | None:
        """Why a request from ``origin`` (its Origin header; absent for same-origin GETs) is refused."""
        if origin is None:
            return None
        if host is None or origin.lower() not in (f"http://{host.lower()}", f"https://{host.lower()}"):
            return "cross-site requests are refused (the Origin is not this page's)"
        return None

    @staticmethod
    def given_token(headers: dict[str, str]) -> str | None:
        """The token a request carries: its ``X-MCP-Run-Token`` header, or ``Authorization: Bearer``."""
        if token := headers.get(TOKEN_HEADER):
            return token
        scheme, _, given = headers.get("authorization", "").partition(" ")
        return given.strip() if scheme.lower() == "bearer" else None

    def token_refusal(self, given: str | None) -> str | None:
        """Why a request carrying ``given`` as its token is refused (compared in constant time)."""
        if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
            return "a valid token is required: open the address mcp-run web printed"
        return None
