"""A protected MCP server with its own OAuth authorization server, on one loopback port.

Built on the SDK's server-side auth: ``MCPServer(auth_server_provider=..., auth=AuthSettings(...))``
serves the MCP endpoint (401 with ``WWW-Authenticate: Bearer`` without a valid token), protected
resource metadata, authorization server metadata, dynamic registration, the authorization and token
endpoints and revocation. :class:`Authority` is the provider: in memory, approving every
authorization request at once (the "person" is whoever follows the URL), with knobs the tests turn:

- ``access_lifetime``: seconds an access token lives (its ``expires_in``);
- ``grantable_scopes``: the scopes it grants at most (a step-up that cannot succeed);
- ``wrong_iss``: the redirect carries an ``iss`` that is not the issuer (RFC 9207; else none);
- ``expire_access_tokens()`` / ``revoke_everything()``: server-side expiry and revocation;
- machine clients (``add_machine_client``) get tokens by ``client_credentials`` (the SDK's token
  endpoint has no such grant; :func:`serve_protected` answers it in front of the SDK's);
- the tool ``admin_report`` needs scope ``admin``: without it the server answers 403
  ``insufficient_scope`` (step-up), counted in ``step_up_refusals``.

Every token starts with ``TOKEN_PREFIX`` so tests can look for leaks of any of them.
"""

from __future__ import annotations

import base64
import json
import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote

import anyio
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_servers.loopback import LoopbackServer, serve_app

TOKEN_PREFIX = "canary-oauth-"
BASE_SCOPE = "mcp"
ADMIN_SCOPE = "admin"
CODE_LIFETIME = 300


@dataclass
class Authority:
    """The in-memory authorization server (the SDK's ``OAuthAuthorizationServerProvider``)."""

    issuer: str
    access_lifetime: int = 3600
    wrong_iss: bool = False
    grantable_scopes: list[str] | None = None  # None: whatever is asked for
    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    authorizations: int = 0
    refreshes: int = 0
    revocations: int = 0
    step_up_refusals: int = 0

    def add_machine_client(self, client_id: str, secret: str) -> None:
        self.clients[client_id] = OAuthClientInformationFull(
            client_id=client_id, client_secret=secret, grant_types=["client_credentials"],
            token_endpoint_auth_method="client_secret_basic", scope=f"{BASE_SCOPE} {ADMIN_SCOPE}",
        )

    def expire_access_tokens(self) -> None:
        self.access.clear()

    def revoke_everything(self) -> None:
        self.access.clear()
        self.refresh.clear()

    def issued_tokens(self) -> list[str]:
        return [*self.access, *self.refresh]

    # -- OAuthAuthorizationServerProvider ----------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        # Every client may ask for every scope (a step-up must not fail at the authorize endpoint).
        self.clients[client_info.client_id] = client_info.model_copy(
            update={"scope": f"{BASE_SCOPE} {ADMIN_SCOPE}"}
        )

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.authorizations += 1
        code = secrets.token_urlsafe(16)
        scopes = params.scopes or [BASE_SCOPE]
        if self.grantable_scopes is not None:
            scopes = [scope for scope in scopes if scope in self.grantable_scopes]
        self.codes[code] = AuthorizationCode(
            code=code, scopes=scopes, expires_at=time.time() + CODE_LIFETIME,
            client_id=client.client_id, code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        iss = "http://127.0.0.1:1/not-the-issuer" if self.wrong_iss else None
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state, iss=iss)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        token = self.refresh.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refreshes += 1
        self.refresh.pop(refresh_token.token, None)
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.revocations += 1
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    # -- tokens ------------------------------------------------------------------------------

    def _issue(
        self, client_id: str, scopes: list[str], resource: str | None, *, refresh: bool = True
    ) -> OAuthToken:
        access = TOKEN_PREFIX + secrets.token_hex(16)
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes,
            expires_at=int(time.time()) + self.access_lifetime, resource=resource,
        )
        refresh_token = None
        if refresh:
            refresh_token = TOKEN_PREFIX + secrets.token_hex(16)
            self.refresh[refresh_token] = RefreshToken(
                token=refresh_token, client_id=client_id, scopes=scopes, resource=resource
            )
        return OAuthToken(access_token=access, expires_in=self.access_lifetime, scope=" ".join(scopes),
                          refresh_token=refresh_token)

    def client_credentials(self, form: dict[str, str], authorization: str | None) -> tuple[int, dict]:
        client_id, secret = form.get("client_id"), form.get("client_secret")
        if authorization and authorization.lower().startswith("basic "):
            decoded = base64.b64decode(authorization[6:]).decode()
            client_id, _, secret = (unquote(part) for part in decoded.partition(":"))
        client = self.clients.get(client_id or "")
        if client is None or "client_credentials" not in client.grant_types or client.client_secret != secret:
            return 401, {"error": "invalid_client"}
        scopes = (form.get("scope") or BASE_SCOPE).split()
        token = self._issue(client.client_id, scopes, form.get("resource"), refresh=False)
        return 200, token.model_dump(exclude_none=True)


def build(authority: Authority, url: str, endpoint: str = "/mcp") -> MCPServer:
    server = MCPServer(
        "protected",
        auth_server_provider=authority,
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(url),
            resource_server_url=AnyHttpUrl(f"{url}{endpoint}"),
            required_scopes=[BASE_SCOPE],
            validate_token_resource=False,
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=[BASE_SCOPE, ADMIN_SCOPE], default_scopes=[BASE_SCOPE]
            ),
            revocation_options=RevocationOptions(enabled=True),
        ),
    )

    @server.tool()
    def whoami() -> str:
        """Say that the caller is authorized."""
        return "authorized"

    @server.tool()
    def admin_report() -> str:
        """Needs the admin scope."""
        return "admin report"

    released = anyio.Event()

    @server.tool()
    async def wait_for_release() -> str:
        """Answer once ``release`` has been called (a call that overlaps another one)."""
        with anyio.fail_after(30):
            await released.wait()
        return "released"

    @server.tool()
    def release() -> str:
        """Let ``wait_for_release`` answer."""
        released.set()
        return "done"

    return server


def _insufficient_scope(authority: Authority, body: bytes, headers: dict[bytes, bytes]) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    if not (isinstance(message, dict) and message.get("method") == "tools/call"):
        return False
    if (message.get("params") or {}).get("name") != "admin_report":
        return False
    bearer = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
    token = authority.access.get(bearer)
    return token is None or ADMIN_SCOPE not in token.scopes


def _guard(authority: Authority, app: ASGIApp, url: str) -> ASGIApp:
    """Answer client_credentials at /token and 403 insufficient_scope at /mcp; the rest is the SDK's."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in ("/token", "/mcp"):
            await app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        headers = dict(scope["headers"])
        if scope["path"] == "/token":
            form = {name: values[0] for name, values in parse_qs(body.decode()).items()}
            if form.get("grant_type") == "client_credentials":
                authorization = headers.get(b"authorization", b"").decode() or None
                status, answer = authority.client_credentials(form, authorization)
                await _send_json(send, status, answer)
                return
        elif _insufficient_scope(authority, body, headers):
            authority.step_up_refusals += 1
            challenge = (
                f'Bearer error="insufficient_scope", scope="{BASE_SCOPE} {ADMIN_SCOPE}", '
                f'resource_metadata="{url}/.well-known/oauth-protected-resource/mcp"'
            )
            await _send_json(send, 403, {"error": "insufficient_scope"}, challenge)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return guarded


async def _send_json(send: Send, status: int, answer: dict, challenge: str | None = None) -> None:
    body = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if challenge:
        headers.append((b"www-authenticate", challenge.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Protected:
    authority: Authority
    server: LoopbackServer
    endpoint: str

    @property
    def url(self) -> str:
        return self.server.url(self.endpoint)


@contextmanager
def serve_protected(
    *, transport: str = "http", json_response: bool = False, **knobs: object
) -> Iterator[Protected]:
    """Serve the protected server (``transport`` http or sse; ``json_response``: answers as plain JSON,
    headers only when the answer is ready) and its authorization server on one free loopback port."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    authority = Authority(issuer=base, **knobs)  # type: ignore[arg-type]
    endpoint = "/sse" if transport == "sse" else "/mcp"
    server = build(authority, base, endpoint)
    app = server.sse_app() if transport == "sse" else server.streamable_http_app(json_response=json_response)
    with serve_app(_guard(authority, app, base), port=port) as running:
        yield Protected(authority, running, endpoint)
