"""Shared fixtures: loopback HTTP servers, state folders, and the no-orphan-process guard.

The guard (autouse) fails any test that leaves a child process of the test process running. The
test process is made a child subreaper (Linux), so a grandchild whose parent died is re-parented
here and still counts as ours.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:  # builders, mcp_servers, ... importable from every test
    sys.path.insert(0, str(TESTS_DIR))

# services: PostgreSQL and HAProxy fixtures; provider_server: the local OpenAI-compatible server;
# browser: Debian's Chromium through Playwright, for the web interface; scheduling: the order in
# which files reach the test workers
pytest_plugins = ["pytester", "services", "fast_tier", "scheduling", "provider_server", "browser"]

import engines  # noqa: E402
from child_processes import ChildProcessGuard  # noqa: E402

PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


_become_subreaper()


def _let_interrupts_through() -> None:
    """A run started in the background of a shell without job control (a CI script's ``cmd &``)
    begins with SIGINT ignored, and every process it starts would inherit that: a shell cannot trap
    a signal ignored when it started, and Ctrl-C could reach no child. The tests of Ctrl-C need it
    delivered, as in a terminal; processes started after this get SIGINT's default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_let_interrupts_through()


@pytest.fixture(autouse=True)
def no_orphan_processes() -> Iterator[None]:
    guard = ChildProcessGuard()
    yield
    leftovers = guard.leftovers()
    if leftovers:
        pytest.fail("the test left child processes running:\n" + "\n".join(leftovers))


@pytest.fixture(scope="session")
def docker_daemon() -> Iterator[engines.DockerDaemon]:
    """A private dockerd (own socket and data folder) with the test image; DOCKER_HOST points at it.

    Tests that use it are skipped, with the reason, when the daemon truly cannot start here.
    """
    try:
        daemon = engines.start_docker_daemon()
    except engines.EngineUnavailable as exc:
        pytest.skip(f"no container engine: {exc}")
    patch = pytest.MonkeyPatch()
    try:
        engines.import_test_image(daemon)
        patch.setenv("DOCKER_HOST", daemon.host)
        engines.ACTIVE = daemon
        yield daemon
    finally:
        engines.ACTIVE = None
        patch.undo()
        engines.stop_docker_daemon(daemon)


@pytest.fixture(autouse=True)
def no_leftover_containers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test that leaves a container of mcp-run behind (removing it), as for processes.

    Not for the fast tier's tests: they start no process, so no container, and the check's own
    ``docker ps`` would run while their guard still refuses processes."""
    yield
    if engines.ACTIVE is not None and request.node.get_closest_marker("fast") is None:
        leftovers = engines.ACTIVE.remove_run_containers()
        assert not leftovers, f"containers outlived the test: {leftovers}"


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A TCP port on the host's loopback that accepts connections."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """Where a fleet keeps per-server logs (``state_dir/logs/<key>.log``)."""
    return tmp_path / "state"


@pytest.fixture(scope="session")
def demo_urls() -> Iterator[dict[str, str]]:
    """One shared demo server over HTTP per era: ``{"2026-07-28": url, "2025-11-25": url}``.

    Shared by many tests, so tests must not depend on its state (counters only grow).
    """
    # Imported here, not at the top: the fast tier starts no server and need not import the SDK's.
    from mcp_servers import demo
    from mcp_servers._serve import http_app
    from mcp_servers.loopback import serve_app

    with serve_app(http_app(demo.build(), transport="http")) as modern:
        with serve_app(http_app(demo.build(), transport="http", legacy=True)) as legacy:
            yield {"2026-07-28": modern.url(), "2025-11-25": legacy.url()}


@pytest.fixture
def serve_http() -> Iterator[Callable[..., str]]:
    """``serve_http(server, transport="http"|"sse", legacy=False, wrap=None) -> url``.

    Runs ``server`` as a real HTTP server on 127.0.0.1 until the test ends; ``wrap`` may wrap the
    ASGI app (to fail requests, for instance).
    """
    from mcp_servers._serve import http_app
    from mcp_servers.loopback import serve_app

    with ExitStack() as stack:

        def start(
            server: MCPServer,
            *,
            transport: str = "http",
            legacy: bool = False,
            wrap: Callable[[ASGIApp], ASGIApp] | None = None,
        ) -> str:
            app = http_app(server, transport=transport, legacy=legacy)
            if wrap is not None:
                app = wrap(app)
            running = stack.enter_context(serve_app(app))
            return running.url("/sse" if transport == "sse" else "/mcp")

        yield start
