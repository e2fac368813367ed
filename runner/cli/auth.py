"""``mcp-run auth login|status|logout``: log in to http/sse servers that need OAuth, once per user.

A login connects to the server exactly as a run does (``open_fleet``), with the browser as the
context's interaction, so the tokens it stores are the ones every later run, chat and watch mode
uses (``runner.cli.logins``). It ends with the server's tool count. ``status`` connects to each
http/sse server without asking anybody and says which of: no login needed, logged in, needs login,
login failed, cannot connect (its state is unknown; the command then exits 1).
"""

from __future__ import annotations

import sys
import time
from functools import partial

import anyio
import click

from runner.auth import login_command, token_record
from runner.auth.login import LOGIN_TIMEOUT, forget_login
from runner.cli import EXIT_FAILURE, counted, main, reports_errors, stdout
from runner.cli.logins import connect_alone, log_in
from runner.errors import AuthError, LoginRequiredError, ServerStartError
from runner.manifest import HttpServerSpec, did_you_mean
from runner.manifest.loading import LoadedManifest, load_manifest

STATUS_STARTUP_TIMEOUT = 15.0  # a status check that hangs on one server must not hang the listing


@main.group()
def auth() -> None:
    """Log in to remote servers that need OAuth; show or forget the stored logins."""


def _http_server(loaded: LoadedManifest, server: str) -> HttpServerSpec:
    servers = loaded.manifest.servers
    spec = servers.get(server)
    if spec is None:
        hint = did_you_mean(server, list(servers))
        raise click.BadParameter(f"no server {server!r} in {loaded.path}{hint}", param_hint="SERVER")
    if not isinstance(spec, HttpServerSpec):
        raise click.BadParameter(f"{server!r} is a stdio server: only http/sse servers log in",
                                 param_hint="SERVER")
    if token_record(spec) is None:
        raise click.BadParameter(
            f"{server!r} sends its own Authorization header: there is nothing to log in to",
            param_hint="SERVER",
        )
    return spec


@auth.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("server")
@click.option("--no-browser", is_flag=True, help="Only print the URL to open (also without a display).")
@click.option("--timeout", type=click.FloatRange(min=1), default=LOGIN_TIMEOUT, show_default=True,
              help="Seconds to wait for the browser to come back.")
@click.option("--force", is_flag=True, help="Log in again even if a stored login still works.")
@reports_errors
def login(file: str, server: str, no_browser: bool, timeout: float, force: bool) -> None:
    """Log in to SERVER of FILE in the browser; the tokens are stored for every later run."""
    loaded = load_manifest(file)
    spec = _http_server(loaded, server)
    record = token_record(spec)
    if force and record is not None:
        record.forget_tokens()
    count = anyio.run(partial(log_in, loaded, server, spec, browser=not no_browser, timeout=timeout))
    tools = counted(count, "tool")
    if record is None or record.login() is None:  # it answered without asking for authorization
        stdout.print(f"{server}: no login needed, {tools}", markup=False)
        return
    stdout.print(f"{server}: logged in, {tools}", markup=False)


@auth.command()
@click.argument("file", type=click.Path(dir_okay=False))
@reports_errors
def status(file: str) -> None:
    """For each http/sse server of FILE: no login needed, logged in, needs login, login failed, or
    cannot connect (then the exit status is 1)."""
    loaded = load_manifest(file)
    servers = {key: spec for key, spec in loaded.manifest.servers.items() if isinstance(spec, HttpServerSpec)}
    if not servers:
        stdout.print("no http/sse servers", markup=False)
        return
    unreachable = False
    for key, spec in servers.items():
        state, reached = anyio.run(_status_of, loaded, key, spec)
        stdout.print(f"{key}: {state}", markup=False)
        unreachable = unreachable or not reached
    if unreachable:  # its state is unknown: a script must not read this listing as all well
        sys.exit(EXIT_FAILURE)


async def _status_of(loaded: LoadedManifest, key: str, spec: HttpServerSpec) -> tuple[str, bool]:
    """The server's state, and whether it was reached (else the state is unknown)."""
    assert spec.startup_timeout is not None
    probe = spec.model_copy(
        update={"required": True, "startup_timeout": min(spec.startup_timeout, STATUS_STARTUP_TIMEOUT)}
    )
    try:
        await connect_alone(loaded, key, probe)
    except LoginRequiredError as exc:
        return f"needs login (run `{exc.command}`)", True
    except AuthError as exc:
        return f"login failed: {_reason(exc, key)}", True
    except ServerStartError as exc:
        return f"cannot connect: {_reason(exc, key)}", False
    record = token_record(spec)
    stored = record.login() if record is not None else None
    if stored is None:
        return "no login needed", True
    return f"logged in ({_describe_login(stored.scopes, stored.expires_at)})", True


def _reason(error: ServerStartError, key: str) -> str:
    return str(error).removeprefix(f"{key}: ")


def _describe_login(scopes: str | None, expires_at: float | None) -> str:
    parts = [f"scopes: {scopes}" if scopes else "no scopes"]
    if expires_at is not None:
        left = expires_at - time.time()
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(expires_at))
        parts.append(f"token expires {when}" + (" (renewed when used)" if left <= 0 else ""))
    return ", ".join(parts)


@auth.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("server")
@reports_errors
def logout(file: str, server: str) -> None:
    """Forget the stored login of SERVER (revoking its tokens where the server offers it)."""
    loaded = load_manifest(file)
    spec = _http_server(loaded, server)
    existed, revoked = anyio.run(forget_login, server, spec)
    if not existed:
        stdout.print(f"{server}: no stored login", markup=False)
        return
    note = " (revoked at the server)" if revoked else ""
    stdout.print(f"{server}: logged out{note}; next time run `{login_command(server)}`", markup=False)
