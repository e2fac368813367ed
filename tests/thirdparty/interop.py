"""Helpers for the interop tests: the pinned third-party servers as manifest entries, manifests
written to a folder, and server-everything or mcp-proxy serving HTTP from a subprocess.

The servers are installed by ``tests/thirdparty/install.sh`` (``scripts/test.sh`` runs it):
npm packages in ``node_modules``, PyPI packages in their own ``.venv``, and the PyPI servers built
on mcp 1.x (mcp-proxy, mcp-server-sqlite, which crashes under mcp 2.x) in ``.venv-mcp1`` with mcp<2.
"""

from __future__ import annotations

import base64
import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import builders
import pytest

THIRDPARTY = Path(__file__).resolve().parent
NODE_BIN = THIRDPARTY / "node_modules" / ".bin"
PYPI_BIN = THIRDPARTY / ".venv" / "bin"
MCP1_VENV = THIRDPARTY / ".venv-mcp1"
MCP1_BIN = MCP1_VENV / "bin"

LEGACY_ERA = "2025-11-25"  # the npm servers (TypeScript SDK 1.x)
OLDEST_ERA = "2024-11-05"  # server-github (TypeScript SDK 1.0.1)
MODERN_ERA = "2026-07-28"  # the PyPI servers (built on mcp 2.3)

# Generous request and start-up bounds: the PyPI servers take seconds to import on a busy machine.
DEFAULTS = {
    "timeout": "30s",
    "startup_timeout": "60s",
    "heartbeat": {"interval": "60s", "stale_after": "120s"},
    "restart": {"max_attempts": 1, "backoff": "50ms", "max_backoff": "100ms"},
}
HTTP_READY_TIMEOUT = 30.0
HTTP_STOP_TIMEOUT = 10.0
PIXEL_PNG = base64.b64decode(  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
_LISTENING = re.compile(r"(?:listening on port |Uvicorn running on http://127\.0\.0\.1:)(\d+)")


def program(name: str) -> str:
    """The installed executable of server ``name``; fails the test when it is not installed."""
    for folder in (NODE_BIN, PYPI_BIN, MCP1_BIN):
        path = folder / name
        if path.exists():
            return str(path)
    pytest.fail(f"{name} is not installed: run tests/thirdparty/install.sh")


def everything(**settings: Any) -> dict[str, Any]:
    return {"command": program("mcp-server-everything"), "args": ["stdio"], **settings}


def filesystem(root: Path, **settings: Any) -> dict[str, Any]:
    return {"command": program("mcp-server-filesystem"), "args": [str(root)], **settings}


def memory(memory_file: Path, **settings: Any) -> dict[str, Any]:
    return {"command": program("mcp-server-memory"), "env": {"MEMORY_FILE_PATH": str(memory_file)},
            **settings}


def time_server(**settings: Any) -> dict[str, Any]:
    return {"command": program("mcp-server-time"), "args": ["--local-timezone", "UTC"], **settings}


def git(repository: Path, **settings: Any) -> dict[str, Any]:
    return {"command": program("mcp-server-git"), "args": ["--repository", str(repository)], **settings}


def github(**settings: Any) -> dict[str, Any]:
    """server-github without a token: it lists its tools; calls would need GITHUB_PERSONAL_ACCESS_TOKEN."""
    return {"command": program("mcp-server-github"), **settings}


def write_manifest(folder: Path, servers: dict[str, Any], *, model: str = "offline", **top: Any) -> Path:
    """A real ``agent.yaml`` in ``folder`` declaring ``servers``; returns its path."""
    return builders.write_manifest(folder, servers, **{"name": "interop", "model": {"id": model},
                                                        "defaults": DEFAULTS, **top})


def make_repository(path: Path) -> Path:
    """A git repository with one commit of ``README.md``, committing as a fixed test identity."""
    path.mkdir(parents=True)
    environment = {"PATH": os.environ.get("PATH", ""), "HOME": str(path), "GIT_CONFIG_NOSYSTEM": "1"}

    def run(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, env=environment, check=True, capture_output=True,
                       timeout=30)

    run("init", "--quiet", "--initial-branch=main")
    run("config", "user.name", "Interop Test")
    run("config", "user.email", "interop@example.invalid")
    (path / "README.md").write_text("first line\n")
    run("add", "README.md")
    run("commit", "--quiet", "-m", "initial commit")
    return path


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def everything_over_http() -> Iterator[str]:
    """server-everything's streamable HTTP transport on a free loopback port; yields the URL."""
    port = _free_loopback_port()
    environment = {"PATH": os.environ.get("PATH", ""), "PORT": str(port)}
    with _serving([program("mcp-server-everything"), "streamableHttp"], environment, port):
        yield f"http://127.0.0.1:{port}/mcp"


@contextmanager
def time_server_behind_proxy() -> Iterator[str]:
    """mcp-server-time (stdio) behind mcp-proxy on a free loopback port; yields the base URL.

    The proxy serves the same server as streamable HTTP at ``/mcp`` and as SSE at ``/sse``.
    """
    port = _free_loopback_port()
    environment = {"PATH": os.environ.get("PATH", "")}
    command = [program("mcp-proxy"), "--host", "127.0.0.1", "--port", str(port), "--",
               *_command_line(time_server())]
    with _serving(command, environment, port):
        yield f"http://127.0.0.1:{port}"


def _command_line(entry: dict[str, Any]) -> list[str]:
    return [entry["command"], *entry.get("args", [])]


@contextmanager
def _serving(command: list[str], environment: dict[str, str], port: int) -> Iterator[None]:
    """``command`` as an HTTP server on ``port``, in a process group of its own.

    Ready when it says it listens (read from its stderr, bounded); the whole group is stopped
    and reaped (bounded, killed if it lingers) when the block ends.
    """
    process = subprocess.Popen(
        command, env=environment, start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:  # keeps reading, so the server never blocks on a full pipe
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=drain, name=f"{Path(command[0]).name}-stderr", daemon=True)
    reader.start()
    try:
        _wait_until_listening(lines, port, Path(command[0]).name)
        yield
    finally:
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(HTTP_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(HTTP_STOP_TIMEOUT)
        _signal_group(process, signal.SIGKILL)  # what it spawned (the proxy's stdio server) too
        reader.join(HTTP_STOP_TIMEOUT)


def _signal_group(process: subprocess.Popen[str], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def _wait_until_listening(lines: queue.Queue[str | None], port: int, name: str) -> None:
    seen: list[str] = []
    deadline = time.monotonic() + HTTP_READY_TIMEOUT
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0))
        except queue.Empty:
            pytest.fail(f"{name} did not listen within {HTTP_READY_TIMEOUT:g}s: {seen}")
        if line is None:
            pytest.fail(f"{name} exited before listening: {''.join(seen)}")
        seen.append(line)
        if (match := _LISTENING.search(line)) and int(match.group(1)) == port:
            return
