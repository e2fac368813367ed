"""Stored OAuth tokens: one file per server URL and client, mode 0600, outside the project.

The folder is ``$MCP_RUN_TOKEN_DIR`` when set, else ``$XDG_STATE_HOME/mcp-run/tokens`` (by
default ``~/.local/state/mcp-run/tokens``), created 0700. A record holds the tokens, the absolute
time the access token expires (``expires_in`` alone means nothing once the process that received it
has ended), the client registration, and the revocation endpoint for ``mcp-run auth logout``.
Files are written whole (a temporary file renamed over the old one), never with wider permissions.

:class:`TokenRecord` implements the SDK's ``TokenStorage`` protocol, so the SDK's provider reads
and writes it directly. Nothing here prints or logs a token.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from runner.manifest import AuthSpec, HttpServerSpec
from runner.store.private import private_folder
from runner.store.state_folder import user_state_root

TOKEN_DIR_VARIABLE = "MCP_RUN_TOKEN_DIR"
FILE_MODE = 0o600
LOCK_WAIT = 60.0  # a refresh in another process: one token request, however slow
LOCK_POLL = 0.05


def token_dir() -> Path:
    """The folder of token files (not created here)."""
    if configured := os.environ.get(TOKEN_DIR_VARIABLE):
        return Path(configured)
    return user_state_root(os.environ) / "tokens"


def record_path(server_url: str, client: str) -> Path:
    """The file of the record for ``server_url`` and ``client`` (a client id, or how it registers)."""
    digest = hashlib.sha256(f"{server_url}\n{client}".encode()).hexdigest()[:32]
    return token_dir() / f"{digest}.json"


@dataclass
class StoredLogin:
    """What ``auth status`` shows of a record: never the tokens themselves."""

    scopes: str | None
    expires_at: float | None
    refreshable: bool


class TokenRecord:
    """The stored login of one server URL and client (the SDK's ``TokenStorage``)."""

    def __init__(self, server_url: str, client: str) -> None:
        self.server_url = server_url
        self.client = client
        self.path = record_path(server_url, client)

    def __repr__(self) -> str:
        return f"<TokenRecord {self.path.name}>"

    @property
    def lock_path(self) -> Path:
        """Beside the token files, not among them: watch mode follows those."""
        return self.path.parent / "locks" / f"{self.path.stem}.lock"

    # -- the SDK's TokenStorage protocol -----------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        data = self._read().get("tokens")
        return OAuthToken.model_validate(data) if data else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        self._update(tokens=tokens.model_dump(mode="json", exclude_none=True), expires_at=expires_at)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        data = self._read().get("client_info")
        return OAuthClientInformationFull.model_validate(data) if data else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._update(client_info=client_info.model_dump(mode="json", exclude_none=True))

    # -- what the rest of runner.auth needs --------------------------------------------------

    def expires_at(self) -> float | None:
        value = self._read().get("expires_at")
        return float(value) if value is not None else None

    def set_revocation_endpoint(self, url: str | None) -> None:
        self._update(revocation_endpoint=url)

    def revocation_endpoint(self) -> str | None:
        return self._read().get("revocation_endpoint")

    def login(self) -> StoredLogin | None:
        data = self._read()
        tokens = data.get("tokens")
        if not tokens:
            return None
        return StoredLogin(tokens.get("scope"), data.get("expires_at"), bool(tokens.get("refresh_token")))

    def forget_tokens(self, *, unless_replaced: OAuthToken | None = None) -> None:
        """Drop the tokens, keep the client registration (a refresh that failed, a revoked token).
        With ``unless_replaced``, only while the record still holds those tokens: another process
        may have stored newer ones meanwhile, which are not to be lost."""
        stored = self._read().get("tokens") or {}
        if unless_replaced is not None and stored.get("access_token") != unless_replaced.access_token:
            return
        self._update(tokens=None, expires_at=None)

    def forget_client(self) -> None:
        """Drop the client registration (and the tokens issued to it): the authorization server
        no longer knows that client."""
        self._update(client_info=None, tokens=None, expires_at=None)

    @contextlib.asynccontextmanager
    async def locked(self, wait: float = LOCK_WAIT) -> AsyncIterator[None]:
        """Hold the record's lock, which every mcp-run process takes around a refresh: with
        refresh tokens that rotate, two processes refreshing one login at once would log each
        other out. Raises TimeoutError after ``wait`` s (the holder is stuck: a crash frees it)."""
        for folder in (self.path.parent, self.lock_path.parent):
            private_folder(folder)
        descriptor = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            with anyio.fail_after(wait):
                while True:
                    try:
                        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        await anyio.sleep(LOCK_POLL)  # flock has no awaitable form
            yield
        finally:
            os.close(descriptor)  # releases the lock

    def delete(self) -> bool:
        """Remove the record; True when there was one."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    # -- the file ------------------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # unreadable or corrupt: as good as no login; the next login rewrites it
        return data if isinstance(data, dict) else {}

    def _update(self, **changes: Any) -> None:
        data = self._read()
        data.update(server_url=self.server_url, client=self.client, **changes)
        private_folder(self.path.parent)
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            os.fchmod(descriptor, FILE_MODE)  # an older temporary file may have other bits
            with os.fdopen(descriptor, "w") as file:
                json.dump(data, file)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        os.replace(temporary, self.path)


def client_name(auth: AuthSpec) -> str:
    """Which client a stored record belongs to: the configured id, else how it registers."""
    if auth.client_id:
        return f"{auth.grant}:{auth.client_id}"
    return f"{auth.grant}:{auth.client_metadata_url or 'registered'}"


def effective_auth(spec: HttpServerSpec) -> AuthSpec | None:
    """The server's ``auth`` block; without one, the defaults - unless a static token is configured."""
    if spec.auth is not None:
        return spec.auth
    if any(name.lower() == "authorization" for name in spec.headers):
        return None  # `headers: {Authorization: ...}` is the user's own token: leave it alone
    return AuthSpec.model_validate({})


def token_record(spec: HttpServerSpec) -> TokenRecord | None:
    """The stored login of ``spec`` (None when it uses a static Authorization header)."""
    auth = effective_auth(spec)
    return TokenRecord(spec.url, client_name(auth)) if auth is not None else None


def login_files(servers: Mapping[str, object]) -> dict[str, Path]:
    """The token file of each http/sse server that can log in, by server key (watch mode watches
    them: a login in another terminal restarts a server that was waiting for one). The token
    folder is created (0700) so that it can be watched before the first login."""
    files = {
        key: record.path
        for key, spec in servers.items()
        if isinstance(spec, HttpServerSpec) and (record := token_record(spec)) is not None
    }
    if files:
        private_folder(token_dir())
    return files
