"""Who answers an authorization request in this context, and how hints name the manifest.

Light on purpose (no SDK import): the CLI names the manifest for every command, including the ones
that never touch a server. :func:`interacting` chooses the :class:`Interaction` for a block and the
tasks started in it; by default nobody is asked (:class:`NoInteraction`), so a run never blocks
waiting for a browser.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from runner.errors import LoginRequiredError

if TYPE_CHECKING:
    from mcp.shared.auth import AuthorizationCodeResult


class Interaction(Protocol):
    """Gets a person (or a test) through the authorization URL; returns the redirect's parameters."""

    async def authorize(self, server: str, url: str, port: int) -> AuthorizationCodeResult: ...


class NoInteraction:
    """Runs that cannot ask anybody: a needed login is a ``LoginRequiredError``."""

    async def authorize(self, server: str, url: str, port: int) -> AuthorizationCodeResult:
        raise LoginRequiredError(server, login_command(server))


@dataclass(frozen=True)
class _AuthContext:
    interaction: Interaction
    manifest_file: str | None


_DEFAULT = _AuthContext(NoInteraction(), None)
_context: ContextVar[_AuthContext | None] = ContextVar("runner_auth_context", default=None)


def _current() -> _AuthContext:
    return _context.get() or _DEFAULT


def current_interaction() -> Interaction:
    return _current().interaction


def can_ask() -> bool:
    """Whether somebody answers authorization requests here (else a login is not even started)."""
    return not isinstance(current_interaction(), NoInteraction)


@contextmanager
def interacting(interaction: Interaction) -> Iterator[None]:
    """Within the block (and tasks started in it), authorization requests go to ``interaction``."""
    token = _context.set(_AuthContext(interaction, _current().manifest_file))
    try:
        yield
    finally:
        _context.reset(token)


def set_manifest_file(path: str) -> None:
    """Name the manifest in "run mcp-run auth login FILE SERVER" hints (the CLI calls this)."""
    _context.set(_AuthContext(_current().interaction, path))


def login_command(server: str) -> str:
    file = _current().manifest_file
    return f"mcp-run auth login {shlex.quote(file) if file else 'FILE'} {server}"
