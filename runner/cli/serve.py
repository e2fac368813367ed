"""``mcp-run serve FILE``: the agent as an MCP server, over stdio or streamable HTTP (and there the
OpenAI-compatible API beside it, :mod:`runner.hosting.chat_completions`).

Everything meant for people goes to stderr: over stdio, stdout is the MCP wire. The command ends
with 0 when the client closes stdin, 130 on Ctrl-C, 128+N on signal N (SIGTERM: 143); the
agent's servers are stopped in every case. A signal that arrives once stdin has closed hurries that
stop and leaves its 0: MCP clients close stdin, wait (the SDK's stdio client: 2 s), then send SIGTERM.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from pathlib import Path

import anyio
import click

from runner.cli import EXIT_OK, main, reports_errors, stderr
from runner.cli.listening import token_from_env
from runner.errors import ServeError
from runner.events import ServeEvent
from runner.hosting.callers import TOKEN_VARIABLE_PREFIX, Callers, read_callers
from runner.hosting.chat_completions import API_PREFIX
from runner.hosting.mcp import (
    DEFAULT_ANSWER_WITHIN,
    DEFAULT_MAX_QUEUED,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_TURNS,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    ServeOptions,
    Sessions,
    check_binding,
    parse_address,
    serve_agent,
)
from runner.hosting.mcp.http_wire import MCP_PATH
from runner.manifest.basics import parse_duration
from runner.servers import stop_on_signals


def _show(event: ServeEvent) -> None:
    if event["type"] == "listening":
        stderr.print(f"serving '{event['name']}' on {event['url']}", markup=False)
        api = event["url"].removesuffix(MCP_PATH) + API_PREFIX.rstrip("/")
        stderr.print(
            f"  and the OpenAI-compatible API on {api} (model '{event['name']}')", style="dim", markup=False
        )
        if "a2a" in event:
            stderr.print(f"  and A2A, its agent card at {event['a2a']}", style="dim", markup=False)
    elif event["type"] == "ready":
        stderr.print(f"serving '{event['name']}' over stdio", style="dim", markup=False)
    elif event["type"] == "reload":
        stderr.print(event["summary"], style="dim", markup=False)
    elif event["type"] == "reload_error":
        stderr.print("reload failed; still serving the last good manifest:", style="yellow", markup=False)
        for problem in event["problems"]:
            stderr.print(f"  {problem}", markup=False)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--http",
    "address",
    metavar="HOST:PORT",
    help="Serve streamable HTTP on HOST:PORT (path /mcp) instead of stdio; port 0 picks a free one.",
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow --http on an address other than loopback (needs a bearer token).",
)
@click.option(
    "--token-env",
    metavar="VAR",
    help="Require the bearer token held by environment variable VAR on every HTTP request.",
)
@click.option(
    "--tokens-file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PATH",
    help="Callers kept apart: 'caller: token' lines (mode 0600), each token naming its caller, "
    "who sees only its own threads; MCP_RUN_TOKEN_<CALLER> variables add callers too.",
)
@click.option(
    "--a2a",
    is_flag=True,
    help="Also serve A2A on the HTTP server, under /a2a (its agent card at "
    "/a2a/.well-known/agent-card.json); needs mcp-run[a2a].",
)
@click.option("--watch", is_flag=True, help="Reload the manifest, templates and modules on change.")
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_TURNS,
    show_default=True,
    help="Turns that run at once (over all conversations).",
)
@click.option(
    "--max-queued",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_QUEUED,
    show_default=True,
    help="Requests that may wait for a turn; past that a request gets a 'busy' error.",
)
@click.option(
    "--stateless",
    is_flag=True,
    help="HTTP without sessions (behind a load balancer); callers on 2025-11-25 then get no "
    "questions forwarded and hear of no list changes.",
)
@click.option(
    "--answer-within",
    metavar="DURATION",
    default=f"{DEFAULT_ANSWER_WITHIN / 60:g}m",
    show_default=True,
    help="How long a caller has to answer a question asked during its call (an approval, a "
    "server's form); unanswered, approvals are denied and questions declined.",
)
@click.option(
    "--session-idle-timeout",
    metavar="DURATION",
    help="HTTP sessions (2025-11-25 callers) with no request in flight this long end "
    f"(a new one can be opened) [default: {DEFAULT_SESSION_IDLE_TIMEOUT / 60:g}m].",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1),
    help=f"HTTP sessions open at once; past that a new one is refused with an error naming "
    f"this option [default: {DEFAULT_MAX_SESSIONS}].",
)
@reports_errors
def serve(
    file: str,
    address: str | None,
    allow_remote: bool,
    token_env: str | None,
    tokens_file: Path | None,
    a2a: bool,
    watch: bool,
    max_turns: int,
    max_queued: int,
    stateless: bool,
    answer_within: str,
    session_idle_timeout: str | None,
    max_sessions: int | None,
) -> None:
    """Serve the agent of FILE as an MCP server: tool 'ask', its prompt commands, its threads
    (over --http, also the OpenAI Chat Completions API under /v1)."""
    session_options = session_idle_timeout is not None or max_sessions is not None
    if address is None and (allow_remote or token_env or tokens_file or stateless or session_options or a2a):
        raise click.UsageError(
            "--allow-remote, --token-env, --tokens-file, --stateless, "
            "--session-idle-timeout, --max-sessions and --a2a apply to --http only"
        )
    if stateless and session_options:
        raise click.UsageError(
            "--session-idle-timeout and --max-sessions apply to sessions, which --stateless does without"
        )
    token = token_from_env(token_env)
    # Over stdio there is one caller, whoever started the process: tokens are HTTP's.
    try:
        callers = Callers() if address is None else read_callers(tokens_file, os.environ)
    except ServeError as exc:  # a bad tokens file or variable is bad input
        raise click.UsageError(str(exc)) from exc
    if token is not None and callers:
        raise click.UsageError(
            "--token-env serves one caller; callers kept apart come from --tokens-file "
            f"and {TOKEN_VARIABLE_PREFIX}<CALLER> variables: use one or the other"
        )
    if a2a and callers:
        raise click.UsageError(
            "--a2a serves one caller: callers kept apart (--tokens-file, "
            f"{TOKEN_VARIABLE_PREFIX}<CALLER> variables) do not reach A2A; "
            "use --token-env"
        )
    if address is None:
        http = None
    else:
        try:
            http = parse_address(address)
            check_binding(http, allow_remote=allow_remote, token=token or callers)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--http") from exc
    answer_seconds = _duration(answer_within, "--answer-within")
    sessions = Sessions(
        idle_timeout=(
            DEFAULT_SESSION_IDLE_TIMEOUT
            if session_idle_timeout is None
            else _duration(session_idle_timeout, "--session-idle-timeout")
        ),
        limit=DEFAULT_MAX_SESSIONS if max_sessions is None else max_sessions,
    )
    options = ServeOptions(
        http=http,
        token=token,
        callers=callers,
        a2a=a2a,
        allow_remote=allow_remote,
        stateless=stateless,
        watch=watch,
        max_turns=max_turns,
        max_queued=max_queued,
        answer_within=answer_seconds,
        sessions=sessions,
    )
    code = anyio.run(_until_signalled, file, options)
    # Stopped, and the exit code known: a signal now has nothing left to stop.
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, signal.SIG_IGN)
    # The interpreter's last collections would walk every object of the SDK, LangChain and pydantic
    # (0.5 to 2 s here), while the client that closed stdin waits for the exit.
    gc.freeze()
    sys.exit(code)


def _duration(text: str, option: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from exc


async def _until_signalled(file: str, options: ServeOptions) -> int:
    # Ctrl-C takes SIGTERM's way out (running turns answered, then the HTTP server stopped):
    # asyncio's own Ctrl-C handling cancels this task alone and leaves the turns running. A
    # second signal while it stops hurries the stop (no turn or request waited for; the agent's
    # servers are still stopped) instead of raising KeyboardInterrupt midway.
    hurry = anyio.Event()
    input_ended = anyio.Event()  # over stdio: the client closed stdin, and serve stops on its own
    async with stop_on_signals(
        signal.SIGINT, signal.SIGTERM, signal.SIGHUP, hurry=hurry, stopping=input_ended
    ) as stopped:
        await serve_agent(file, options, _show, hurry=hurry, input_ended=input_ended)
    if stopped.received is not None:
        stderr.print(f"stopped by {stopped.received.name}", style="yellow")
        return 128 + int(stopped.received)
    return EXIT_OK
