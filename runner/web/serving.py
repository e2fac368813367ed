"""``mcp-run web``'s process: the agent loaded once, the page and its API served on one address
until the block is cancelled (a signal), the agent's servers stopped on the way out; with
``watch``, the agent reloaded on every edit and each page told (:class:`~runner.web.app.Notices`).
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import anyio
import uvicorn

from runner.agent.reload import watch_and_reload
from runner.agent.runtime import load_agent
from runner.events import CatalogueChanged, ReloadEvent
from runner.hosting.mcp.http_wire import Address, bind
from runner.manifest.loading import load_manifest
from runner.servers import CatalogueChange
from runner.task_groups import background_tasks
from runner.web.app import Notices, web_app
from runner.web.apps import apps_extension
from runner.web.security import TOKEN_PARAMETER, Gate
from runner.web.shown_apps import ShownApps
from runner.web.steps import WebHost
from runner.web.threads import Titles
from runner.web.timelines import Timelines

STOP_LIMIT = 5.0  # seconds open requests (streams of running turns) get once the page server stops


@dataclass(frozen=True)
class WebOptions:
    address: Address
    token: str
    watch: bool = False
    allow_remote: bool = False  # callers from other machines on purpose: any Host name, the token decides


def page_url(sock: socket.socket, token: str) -> str:
    """The page's address, with the token that opens it."""
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/?{TOKEN_PARAMETER}={token}"


def page_gate(options: WebOptions, host: str, port: int) -> Gate:
    """The gate of the page listening at ``host:port``: on loopback, the Host names are the
    loopback ones and the ``--host`` given; with ``--allow-remote``, any (the token decides)."""
    loopback = options.address.loopback and not options.allow_remote
    return Gate.for_address(options.token, host, port, loopback=loopback, names=(options.address.host,))


class _PageServer(uvicorn.Server):
    """uvicorn without its own signal handling: the command's signal handling stops it."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_web(file: str, options: WebOptions, on_ready: Callable[[str, str], None],
                    on_reload: Callable[[ReloadEvent], None]) -> None:
    """Serve the page of the agent of ``file`` until cancelled; ``on_ready(name, url)`` once it
    listens, ``on_reload`` for each reload in watch mode."""
    # The manifest first: a file that is missing or wrong is what to say, not a port in use.
    await anyio.to_thread.run_sync(load_manifest, file)
    sock = bind(options.address)
    host = WebHost(client_extensions=[apps_extension()])  # its servers are told the page shows MCP Apps
    try:
        async with load_agent(file, host=host) as runtime, background_tasks() as group:
            notices = Notices()
            apps = ShownApps(runtime)  # one per process: the app frames the page shows

            def told_of_change(change: CatalogueChange) -> None:
                notices.publish(dict(CatalogueChanged(
                    type="change", server=change.server, kind=change.kind, added=list(change.added),
                    removed=list(change.removed), changed=list(change.changed))))
                apps.refresh()

            def told_of_reload(event: ReloadEvent) -> None:
                apps.refresh()
                on_reload(event)
                notices.publish(dict(event))

            runtime.listeners.append(told_of_change)
            gate = page_gate(options, *sock.getsockname()[:2])
            app = web_app(runtime, gate, Titles(runtime.fleet.state_dir), notices, apps,
                          Timelines(runtime.fleet.state_dir))
            config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                    timeout_graceful_shutdown=int(STOP_LIMIT), use_colors=sys.stderr.isatty())
            server = _PageServer(config)
            stop = anyio.Event()
            if options.watch:
                watching = anyio.Event()
                group.start_soon(partial(watch_and_reload, runtime, told_of_reload, stop=stop,
                                         ready=watching))
                await watching.wait()
            finished = anyio.Event()

            async def run() -> None:
                try:
                    with anyio.CancelScope(shield=True):  # it stops when told to (should_exit), not midway
                        await server.serve(sockets=[sock])
                finally:
                    finished.set()

            group.start_soon(run)
            try:
                # The socket listens already: a request made now waits for uvicorn, not refused.
                on_ready(runtime.manifest.name, page_url(sock, options.token))
                await finished.wait()
            finally:
                with anyio.CancelScope(shield=True):
                    stop.set()
                    notices.close()  # the pages' notice streams end, so they hold up no stop
                    server.should_exit = True
                    with anyio.move_on_after(STOP_LIMIT + 2):
                        await finished.wait()
                    server.force_exit = True
                    with anyio.move_on_after(STOP_LIMIT):
                        await finished.wait()
    finally:
        sock.close()

