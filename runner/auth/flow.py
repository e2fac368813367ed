"""The SDK's OAuth provider, wired to the token store, the login interaction and the error tree.

``http_auth(key, spec)`` is the one call the server layer makes: the ``httpx2.Auth`` for an
http/sse server (or None when its manifest entry has no ``auth`` block). The MCP authorization flow
itself - discovery of protected resource and authorization server metadata, PKCE, ``state``,
``resource``, the RFC 9207 ``iss`` check, CIMD / dynamic registration, scope selection and step-up
- is the SDK's ``mcp.client.auth.OAuthClientProvider`` (``ClientCredentialsOAuthProvider`` for
``grant: client_credentials``). What this module adds, in :class:`_RunnerAuth`:

- the stored token's absolute expiry is loaded with it (the SDK keeps expiry only in memory), and
  the access token counts as expired ``REFRESH_MARGIN`` early, so it is refreshed before it lapses;
- requests with a valid token go out without the SDK's lock, which it holds from sending a
  request until the answer's headers arrive (so one slow call would hold up every other);
- a 401 on a request that carried a token triggers one refresh before a new authorization;
- a server without an ``auth`` block is only authorized after a 401 with a Bearer challenge;
- where nobody can be asked, a needed login is a ``LoginRequiredError`` before any discovery or
  dynamic client registration (only a login registers a client; the registration is stored);
- a refresh that fails drops the stored tokens (a new login is needed, not a crash);
- a pre-registered client authenticates at the token endpoint the way the server's metadata
  allows (``client_secret_basic``, ``client_secret_post`` or ``none``);
- the SDK's flow errors leave as ``AuthError``; its own traceback log of them is dropped (the
  runner reports the translated error once).

Who answers the authorization request is the context's ``Interaction`` (``runner.auth.context``):
by default nobody (``LoginRequiredError``, naming ``mcp-run auth login``), the browser for
``mcp-run auth login``.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import AnyUrl

from runner.auth.callback import DEFAULT_CALLBACK_PORT, redirect_uri
from runner.auth.context import can_ask, current_interaction, login_command
from runner.auth.store import (  # noqa: F401 (login_files, token_record: also imported from here)
    LOCK_WAIT,
    TokenRecord,
    client_name,
    effective_auth,
    login_files,
    token_record,
)
from runner.errors import AuthError, LoginRequiredError, StaleClientError
from runner.manifest import HttpServerSpec
from runner.sdk import OAuthProviderSteps

logger = logging.getLogger(__name__)

PROBE_TIMEOUT = 10.0  # the authorization URL, asked for once before a person is sent there
REFRESH_MARGIN = 60.0  # seconds before expiry an access token is refreshed (at most half its life)
CLIENT_NAME = "mcp-run"


def http_auth(key: str, spec: HttpServerSpec) -> httpx2.Auth | None:
    """The ``httpx2.Auth`` of server ``key``; None when it sends a static Authorization header.

    A server without an ``auth`` block gets one with the defaults that acts only on a 401 carrying
    a ``WWW-Authenticate: Bearer`` challenge (or when a login for it is stored).
    """
    auth, record = effective_auth(spec), token_record(spec)
    if auth is None or record is None:
        return None
    scope = " ".join(auth.scopes) if auth.scopes else None
    if auth.grant == "client_credentials":
        assert auth.client_id and auth.client_secret, "the manifest checks this"
        with warnings.catch_warnings():
            # Without `issuer` the SDK warns that it trusts the server's choice of authorization
            # server; that is the manifest's documented default, not news for every run.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            machine = MachineAuth(
                key,
                record,
                server_url=spec.url,
                storage=record,
                client_id=auth.client_id,
                client_secret=auth.client_secret,
                scope=scope,
                issuer=auth.issuer,
                fixed_scope=scope,
            )
        return machine
    port = auth.callback_port or DEFAULT_CALLBACK_PORT
    redirect = [AnyUrl(redirect_uri(port))]
    preregistered = None
    if auth.client_id:
        preregistered = OAuthClientInformationFull(
            client_id=auth.client_id,
            client_secret=auth.client_secret,
            redirect_uris=redirect,
            token_endpoint_auth_method="client_secret_basic" if auth.client_secret else "none",
        )
    metadata = OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=redirect,
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=scope,
    )
    provider = LoginAuth(
        key,
        record,
        server_url=spec.url,
        client_metadata=metadata,
        storage=record,
        client_metadata_url=auth.client_metadata_url,
        fixed_scope=scope,
        challenge_only=spec.auth is None,
    )
    provider.prepare(port=port, preregistered=preregistered)
    return provider


class _RunnerAuth(OAuthProviderSteps):
    """What the runner adds to the SDK's providers (see the module docstring). A mixin, through
    the public-named steps of :class:`runner.sdk.OAuthProviderSteps`."""

    context: Any  # the SDK provider's OAuthContext

    def __init__(
        self, key: str, record: TokenRecord, *, fixed_scope: str | None = None,
        challenge_only: bool = False, **kwargs: Any,
    ) -> None:
        self.key = key
        self.record = record
        self._preregistered: OAuthClientInformationFull | None = None
        self._stored_client = False
        self.fixed_scope = fixed_scope  # the manifest's scopes
        self._stepping_up = False
        self.challenge_only = challenge_only  # no auth block: only a Bearer challenge starts a flow
        super().__init__(**kwargs)

    def _apply_fixed_scope(self) -> None:
        """The manifest's scopes replace the server's suggestion; a step-up adds to them."""
        if self.fixed_scope is None:
            return
        current = self.context.client_metadata.scope
        wanted = union_scopes(self.fixed_scope, current) if self._stepping_up else self.fixed_scope
        self.context.client_metadata.scope = wanted

    async def load_state(self) -> None:
        await super().load_state()
        self._stored_client = self.context.client_info is not None  # registered by an earlier login
        if self._preregistered is not None:
            self.context.client_info = self._preregistered
        expires_at = self.record.expires_at()
        if self.context.current_tokens is not None and expires_at is not None:
            lifetime = self.context.current_tokens.expires_in or 0
            self.context.token_expiry_time = expires_at - min(REFRESH_MARGIN, lifetime / 2)

    def _margin_expiry(self) -> None:
        tokens = self.context.current_tokens
        if tokens is not None and tokens.expires_in is not None:
            margin = min(REFRESH_MARGIN, tokens.expires_in / 2)
            self.context.token_expiry_time = time.time() + tokens.expires_in - margin

    async def take_token_response(self, response: httpx2.Response) -> None:
        await super().take_token_response(response)
        self._margin_expiry()
        metadata = self.context.oauth_metadata
        endpoint = metadata.revocation_endpoint if metadata is not None else None
        self.record.set_revocation_endpoint(str(endpoint) if endpoint else None)

    async def take_refresh_response(self, response: httpx2.Response) -> bool:
        used = self.context.current_tokens
        refreshed = await super().take_refresh_response(response)
        if refreshed:
            self._margin_expiry()
        else:
            self.record.forget_tokens(unless_replaced=used)
        return refreshed

    async def take_stored_tokens(self) -> None:
        """Tokens another process stored since these were loaded (it refreshed them, or logged in
        again) replace the ones in hand, which may be spent: refresh tokens can be used once."""
        stored = await self.record.get_tokens()
        current = self.context.current_tokens
        if stored is not None and (current is None or stored.access_token != current.access_token):
            await self.load_state()

    @contextlib.asynccontextmanager
    async def refreshing(self) -> AsyncIterator[None]:
        """This process's one refresh at a time, and the record's lock that other processes take."""
        async with self.context.lock:
            try:
                async with self.record.locked():
                    yield
            except TimeoutError:
                raise AuthError(self.key, "another mcp-run process has held the stored login's lock "
                                          f"for over {LOCK_WAIT:.0f} s ({self.record.lock_path})") from None

    def _choose_token_endpoint_auth(self) -> None:
        """A pre-registered client authenticates the way the server's metadata allows."""
        client, metadata = self.context.client_info, self.context.oauth_metadata
        if self._preregistered is None or client is None or metadata is None:
            return
        supported = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]
        if client.client_secret:
            preferences = ["client_secret_basic", "client_secret_post", "none"]
        else:
            preferences = ["none"]
        chosen = next((method for method in preferences if method in supported), preferences[0])
        self.context.client_info = client.model_copy(update={"token_endpoint_auth_method": chosen})

    async def refresh_request(self) -> httpx2.Request:
        self._choose_token_endpoint_auth()
        return await super().refresh_request()

    async def authorizing_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """Send with the current token; the SDK's flow only when the answer asks for authorization.

        The SDK's flow holds one lock from sending a request until its answer's headers arrive,
        which would line up every request of a session behind a long call (servers that answer
        in plain JSON send headers last). Here a request with a valid token (or with nothing to
        send, when only a challenge starts a flow) goes out without the lock; a 401 on a token
        tries one refresh; what still needs authorizing enters the SDK's flow with that answer.
        """
        if not self.state_loaded or self.context.lock.locked():  # else taking it would only yield
            async with self.context.lock:  # waits for a refresh in flight
                if not self.state_loaded:
                    await self.load_state()
        response: httpx2.Response | None = None
        self._stepping_up = False
        if not self.context.is_token_valid() and self.context.can_refresh_token():
            async with self.refreshing():  # expired: refreshed here, with the other processes
                await self.take_stored_tokens()
                if not self.context.is_token_valid() and self.context.can_refresh_token():
                    await self.take_refresh_response((yield await self.refresh_request()))
        # Without a token to refresh first, the request goes out as the SDK would send it; its
        # answer decides whether a new authorization is needed (and possible: see below).
        if self.context.is_token_valid() or not self.context.can_refresh_token():
            if self.context.is_token_valid():
                self.add_auth_header(request)
            response = yield request
            if not self._asks_for_authorization(response):
                return
            sent = request.headers.get("Authorization")
            if response.status_code == 401:
                async with self.refreshing():  # one refresh, even when many requests got a 401
                    tokens = self.context.current_tokens
                    await self.take_stored_tokens()  # refreshed, or logged in again, elsewhere
                    spent = tokens is not None and sent == f"Bearer {tokens.access_token}"
                    if spent and self.context.current_tokens is tokens and self.context.can_refresh_token():
                        await self.take_refresh_response((yield await self.refresh_request()))
                now = self.context.current_tokens
                if self.context.is_token_valid() and now is not None and sent != f"Bearer {now.access_token}":
                    self.add_auth_header(request)
                    response = yield request
                    if not self._asks_for_authorization(response):
                        return
            self._stepping_up = response.status_code == 403
            if not self._can_authorize():
                # Not even discovery or registration: a run or ``auth status`` must leave no
                # registered client behind at the authorization server for a login never made.
                raise LoginRequiredError(self.key, login_command(self.key))
        flow = self.sdk_flow(request)
        try:
            outgoing = await flow.__anext__()
            if response is not None and outgoing is request:
                outgoing = await flow.asend(response)  # the answer this request already got
            while True:
                outgoing = await flow.asend((yield outgoing))
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    def _can_authorize(self) -> bool:
        """Whether a new authorization can be made here (a person may be needed: see LoginAuth)."""
        return True

    def _asks_for_authorization(self, response: httpx2.Response) -> bool:
        """A 401 or a 403 ``insufficient_scope`` (without an ``auth`` block: with a Bearer challenge)."""
        if response.status_code == 403:
            asked = extract_field_from_www_auth(response, "error") == "insufficient_scope"
        else:
            asked = response.status_code == 401
        return asked and (not self.challenge_only or _bearer_challenge(response))

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The flow with the SDK's errors translated into ``AuthError``."""
        flow = super().async_auth_flow(request)  # type: ignore[misc]
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except OAuthFlowError as exc:
            raise AuthError(self.key, f"authorization failed: {_without_secrets(exc)}") from exc
        finally:
            await flow.aclose()


class LoginAuth(_RunnerAuth, OAuthClientProvider):
    """Authorization code with PKCE; the redirect goes to the context's :class:`Interaction`."""

    def prepare(self, *, port: int, preregistered: OAuthClientInformationFull | None) -> None:
        self._port = port
        self._preregistered = preregistered
        self._result: AuthorizationCodeResult | None = None
        self.context.redirect_handler = self._redirect
        self.context.callback_handler = self._callback

    def _can_authorize(self) -> bool:
        return can_ask()

    async def _redirect(self, url: str) -> None:
        await self._check_client_known(url)
        self._result = await current_interaction().authorize(self.key, url, self._port)

    async def _check_client_known(self, url: str) -> None:
        """The authorization URL is asked for once before anybody is sent there: an authorization
        server that forgot the client registered with it (restarted, clients kept in memory) answers
        with an error page instead of a login, and the person would wait for a redirect that never
        comes. Then the stored registration is dropped (StaleClientError): the next login registers."""
        if self._preregistered is not None or not self._stored_client:
            return  # a client registered by this very login is known
        # With a response type nobody supports, an authorization server that knows the client
        # redirects back with an error (RFC 6749 4.1.2.1) and issues nothing; one that does not
        # know it cannot redirect and answers 400 itself.
        parts = urlsplit(url)
        query = [(name, "mcp-run-client-check" if name == "response_type" else value)
                 for name, value in parse_qsl(parts.query, keep_blank_values=True)]
        try:
            async with httpx2.AsyncClient(timeout=PROBE_TIMEOUT, trust_env=True) as client:
                checking = urlunsplit(parts[:3] + (urlencode(query), parts.fragment))
                answer = await client.get(checking, follow_redirects=False)
        except httpx2.HTTPError:
            return  # the browser may reach what this cannot (a proxy, a VPN): let the person try
        if answer.status_code != 400:
            return
        self.record.forget_client()
        excerpt = " ".join(answer.text.split())[:200]
        raise StaleClientError(
            self.key, f"the authorization server refused the client mcp-run registered with it "
            f"(HTTP {answer.status_code}: {excerpt}); that registration was dropped"
        )

    async def _callback(self) -> AuthorizationCodeResult:
        result, self._result = self._result, None
        if result is None:
            raise AuthError(self.key, "the login redirect carried no authorization code")
        return result

    async def code_exchange_request(self, auth_code: str, code_verifier: str) -> httpx2.Request:
        self._choose_token_endpoint_auth()
        return await super().code_exchange_request(auth_code, code_verifier)

    async def authorization_code_grant(self) -> tuple[str, str]:
        self._apply_fixed_scope()
        if self.context.oauth_metadata is None:
            # The 2025-03-26 fallback: default endpoints on the server's origin. A server that
            # publishes no metadata may have no OAuth at all; say so before anybody waits.
            origin = self.context.get_authorization_base_url(self.context.server_url)
            logger.warning(
                "%s publishes no OAuth metadata (protected resource or authorization server); "
                "trying the default endpoint %s/authorize, which may not exist",
                self.key, origin,
            )
        return await super().authorization_code_grant()


class MachineAuth(_RunnerAuth, ClientCredentialsOAuthProvider):
    """``grant: client_credentials``: no person, no redirect; a new token whenever one is needed."""

    async def client_credentials_request(self) -> httpx2.Request:
        self._apply_fixed_scope()
        return await super().client_credentials_request()


def _without_secrets(error: OAuthFlowError) -> str:
    """The SDK's message, except that a state mismatch names both values (the expected one is secret)."""
    message = str(error)
    if message.startswith("State parameter mismatch"):
        return "the login redirect's state is not the one of this login"
    return message


def _bearer_challenge(response: httpx2.Response) -> bool:
    return response.headers.get("www-authenticate", "").strip().lower().startswith("bearer")


class _DropTranslatedFlowErrors(logging.Filter):
    """The SDK logs every flow error with a traceback before raising it; the runner reports it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "OAuth flow error"


logging.getLogger("mcp.client.auth.oauth2").addFilter(_DropTranslatedFlowErrors())
