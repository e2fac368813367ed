"""``mcp-run web FILE``: the agent of FILE in a browser page (:mod:`runner.web`), served on
loopback (another address needs ``--allow-remote`` and the token of ``--token-env``).

The address printed carries the process's token: only a browser given it can open the page and
drive the agent. Ctrl-C stops the page server and the agent's servers (exit 130).
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
import webbrowser
from functools import partial

import anyio
import click

from runner.cli import EXIT_OK, main, reports_errors, stderr
from runner.cli.listening import token_from_env
from runner.events import ReloadEvent
from runner.hosting.mcp import check_binding
from runner.hosting.mcp.http_wire import Address, parse_address
from runner.servers import stop_on_signals
from runner.web.security import new_token
from runner.web.serving import WebOptions, serve_web

DEFAULT_PORT = 8765


def _show_ready(name: str, url: str, *, open_browser: bool) -> None:
    stderr.print(f"the page of '{name}' is at {url}", markup=False, highlight=False)
    stderr.print("  (the address carries this run's token: keep it to yourself; Ctrl-C stops)", style="dim",
                 markup=False)
    if open_browser:  # in a thread: a browser command that takes its time holds up no request
        threading.Thread(target=_open_browser, args=(url,), daemon=True).start()


def _open_browser(url: str) -> None:
    if not webbrowser.open(url):
        stderr.print("no browser could be opened (no display, or no browser found): open the address above "
                     "yourself", style="yellow", markup=False, highlight=False)


def _show_reload(event: ReloadEvent) -> None:
    if event["type"] == "reload":
        stderr.print(event["summary"], style="dim", markup=False)
    else:
        stderr.print("reload failed; the page keeps the last good manifest:", style="yellow", markup=False)
        for problem in event["problems"]:
            stderr.print(f"  {problem}", markup=False)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--watch", is_flag=True, help="Reload the manifest, templates and modules on change; the page "
                                             "says what changed.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (loopback unless --allow-remote).")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="The port to listen on; 0 picks a free one.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default browser.")
@click.option("--allow-remote", is_flag=True,
              help="Allow a --host other than loopback (needs --token-env: the page's token).")
@click.option("--token-env", metavar="VAR",
              help="The page's token comes from environment variable VAR (else a new one each run).")
@reports_errors
def web(file: str, watch: bool, host: str, port: int, open_browser: bool, allow_remote: bool,
        token_env: str | None) -> None:
    """Open the agent of FILE in a browser page: chat, tool calls, questions, threads, servers."""
    token = token_from_env(token_env)
    try:
        address = parse_address(f"{host}:{port}") if ":" not in host else Address(host.strip("[]"), port)
        check_binding(address, allow_remote=allow_remote, token=token)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--host") from exc
    options = WebOptions(address=address, token=token or new_token(), watch=watch, allow_remote=allow_remote)
    code = anyio.run(_until_signalled, file, options, open_browser)
    # Stopped: the interpreter's last collections would walk every object of the SDK, LangChain
    # and pydantic (seconds on a busy machine) before the exit the person waits for.
    gc.freeze()
    sys.exit(code)


async def _until_signalled(file: str, options: WebOptions, open_browser: bool) -> int:
    async with stop_on_signals(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as stopped:
        await serve_web(file, options, partial(_show_ready, open_browser=open_browser), _show_reload)
    if stopped.received is not None:
        stderr.print(f"stopped by {stopped.received.name}", style="yellow")
        return 128 + int(stopped.received)
    return EXIT_OK
