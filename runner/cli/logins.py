"""Logging in to an http/sse server from the CLI: ``mcp-run auth login`` and the chat's offer.

A login connects to the server exactly as a run does (``open_fleet``), with the browser as the
context's interaction, so the tokens it stores are the ones every later run uses. No command is
defined here, so the chat can offer logins without registering ``mcp-run auth``. Ctrl-C during
one of the chat's logins cancels that login only.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

from runner.agent.reload import reload_runtime
from runner.agent.runtime import Runtime
from runner.auth import BrowserLogin, has_display, interacting, login_files
from runner.auth.callback import DEFAULT_CALLBACK_PORT, CallbackListener
from runner.auth.login import LOGIN_TIMEOUT
from runner.auth.store import effective_auth
from runner.cli import counted, stderr, stdout
from runner.errors import AuthError, LoginRequiredError, StaleClientError
from runner.manifest import HttpServerSpec
from runner.manifest.loading import LoadedManifest
from runner.servers import open_fleet


async def connect_alone(loaded: LoadedManifest, key: str, spec: HttpServerSpec) -> int:
    """Start server ``key`` alone (required, no restarts); its tool count."""
    async with open_fleet({key: spec}, base_dir=loaded.base_dir, state_dir=loaded.state_dir) as fleet:
        return len(fleet.connections[key].tools)


async def log_in(
    loaded: LoadedManifest, key: str, spec: HttpServerSpec, *, browser: bool, timeout: float
) -> int:
    """Log in to server ``key`` (the URL is shown, the browser opened when ``browser``); its tool count."""
    assert spec.startup_timeout is not None

    def show(url: str) -> None:
        stderr.print(f"Open this URL in a browser to log in to {key}:", markup=False)
        stderr.print(url, markup=False, crop=False, overflow="ignore")

    launch = spec.model_copy(update={"required": True, "startup_timeout": spec.startup_timeout + timeout})
    auth = effective_auth(spec)
    await CallbackListener.check_free(key, (auth.callback_port if auth else None) or DEFAULT_CALLBACK_PORT)
    with interacting(BrowserLogin(show, open_browser=browser and has_display(), timeout=timeout)):
        try:
            return await connect_alone(loaded, key, launch)
        except StaleClientError as exc:  # dropped: this second try registers a new client
            stderr.print(f"warning: {exc}; registering again", style="yellow", markup=False)
            return await connect_alone(loaded, key, launch)


async def offer_logins(runtime: Runtime, read_line: Callable[[str], Awaitable[str | None]]) -> None:
    """The chat's offer: log in now to each server that was skipped for want of a login."""
    waiting = {
        key: connection.spec for key, connection in runtime.fleet.connections.items()
        if isinstance(connection.error, LoginRequiredError) and isinstance(connection.spec, HttpServerSpec)
    }
    logged_in: set[Path] = set()
    files = login_files(waiting)
    for key, spec in waiting.items():
        answer = await read_line(f"{key} needs a login. Log in now? [Y/n] ")
        if answer is None or answer.strip().lower() not in ("", "y", "yes"):
            continue
        try:
            with _cancelled_by_ctrl_c() as login:
                count = await log_in(runtime.loaded, key, spec, browser=True, timeout=LOGIN_TIMEOUT)
        except AuthError as exc:
            stderr.print(f"error: {exc}", style="red", markup=False)
            continue
        if login.cancelled_caught:
            stderr.print(f"{key}: login cancelled", style="yellow", markup=False)
            continue
        stdout.print(f"{key}: logged in, {counted(count, 'tool')}", markup=False)
        logged_in.add(files[key].resolve())
    if logged_in:  # start them in the running agent, as watch mode does after a login elsewhere
        await reload_runtime(runtime, changed_files=logged_in)


@contextmanager
def _cancelled_by_ctrl_c() -> Iterator[anyio.CancelScope]:
    """Ctrl-C cancels the block (one login) instead of leaving the chat; the handler is restored."""
    with anyio.CancelScope() as scope:
        previous = signal.signal(signal.SIGINT, lambda *_: scope.cancel())
        try:
            yield scope
        finally:
            signal.signal(signal.SIGINT, previous)
