"""Helpers of the fault suite: manifests of misbehaving servers, the CLI, request counters, reaping.

    path = write_manifest(folder, {"w": wire("--name", "w", timeout="2s")})
    async with load_agent(path) as runtime, server_requests("w") as requests:
        ...
        await requests.wait_for("tools/call", 3)   # the server has read three calls
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import builders
import psutil

SERVERS = builders.SERVERS
# Quick restarts, short waits and rare heartbeats, as in the other suites.
FAST = {"timeout": "10s", "startup_timeout": "30s",
        "heartbeat": {"interval": "30s", "stale_after": "60s"},
        "restart": {"max_attempts": 3, "backoff": "50ms", "max_backoff": "200ms"}}
FAULT_SUITE = {"name": "faults", "defaults": FAST, "checkpointer": "memory"}
REAP_TIMEOUT = 10.0
POLL_INTERVAL = 0.02  # only to poll for process exit, which has no event to wait on


def wire(*args: str, **settings: Any) -> dict[str, Any]:
    """A manifest entry for the hand-written misbehaving server (tests/mcp_servers/wire.py)."""
    return builders.server("wire", *args, **settings)


def demo(*args: str, **settings: Any) -> dict[str, Any]:
    """A manifest entry for the SDK demo server (tests/mcp_servers/demo.py)."""
    return builders.server("demo", *args, **settings)


def manifest_document(servers: Mapping[str, Any], **top: Any) -> dict[str, Any]:
    return builders.manifest_document(servers, **{**FAULT_SUITE, **top})


def write_manifest(folder: Path, servers: Mapping[str, Any], **top: Any) -> Path:
    return builders.write_manifest(folder, servers, **{**FAULT_SUITE, **top})


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids: list[int], timeout: float = REAP_TIMEOUT) -> list[int]:
    """Poll (bounded) until every pid has exited; the ones still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    while (alive := [pid for pid in pids if not gone(pid)]) and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL)
    return alive


async def still_running(pids: list[int], timeout: float = REAP_TIMEOUT) -> list[int]:
    """:func:`wait_gone` for async tests: the event loop keeps running (and reaping) meanwhile."""
    with anyio.move_on_after(timeout):
        while any(not gone(pid) for pid in pids):  # noqa: ASYNC110 - exit has no event here
            await anyio.sleep(POLL_INTERVAL)
    return [pid for pid in pids if not gone(pid)]


class ServerRequests(logging.Handler):
    """Counts the ``received <method> <id>`` lines a wire server writes to its stderr.

    The runner logs server stderr to ``runner.servers.stderr.<key>`` as it reads it, so a count
    reaching N means the server has read N such requests: a test can act "during calls".
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.counts: Counter[str] = Counter()
        self._changed = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        words = record.getMessage().split()
        if len(words) == 3 and words[0] == "received":
            self.counts[words[1]] += 1
            self._changed.set()

    async def wait_for(self, method: str, count: int) -> None:
        """Wait until ``count`` requests of ``method`` were read (bound it with fail_after)."""
        while self.counts[method] < count:
            self._changed = anyio.Event()
            await self._changed.wait()


@contextmanager
def server_requests(key: str) -> Iterator[ServerRequests]:
    handler = ServerRequests()
    logger = logging.getLogger(f"runner.servers.stderr.{key}")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
