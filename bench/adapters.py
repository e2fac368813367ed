"""Peers in environments of their own (langchain-mcp-adapters, ``langchain.mcp``), driven from this run.

langchain-mcp-adapters pins ``mcp<2``, so it cannot live in mcp-run's environment. The harness
creates ``bench/.venv-adapters`` on first use (``pip install`` from PyPI, about a minute) and
reuses it afterwards; ``bench.adapters_worker`` runs there as a subprocess of this run, measures
its own raw floor (mcp 1.x) beside the adapters' paths, and answers one case at a time, so its
cases take their turn in the same rounds as everything else.

LangChain's ``langchain.mcp`` needs FastMCP 4, which mcp-run does not depend on, so it gets the
same treatment in ``bench/.venv-langchain`` (``bench.langchain_mcp_worker``).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from bench.harness import BenchError, Case, Settings
from bench.launch import ROOT, extra_for, server_command, stop
from bench.stats import Metrics, combined_latency, combined_throughput

logger = logging.getLogger(__name__)

INSTALL_TIMEOUT = 900.0
SETUP_TIMEOUT = 180.0
MEASURE_TIMEOUT = 600.0
QUIT_TIMEOUT = 15.0
MAX_LINE = 16 * 2**20


@dataclass(frozen=True)
class PeerEnvironment:
    """A peer's own virtual environment under ``bench/``, and the worker module run there."""

    folder: Path
    requirements: tuple[str, ...]  # pinned: the comparison should not drift by itself
    worker: str

    def python(self) -> Path:
        return self.folder / "bin" / "python"

    @property
    def marker(self) -> Path:
        return self.folder / "bench-requirement.txt"

    def is_ready(self) -> bool:
        wanted = "\n".join(self.requirements)
        return self.marker.is_file() and self.marker.read_text().strip() == wanted and self.python().exists()


ADAPTERS = PeerEnvironment(ROOT / "bench" / ".venv-adapters", ("langchain-mcp-adapters==0.3.2",),
                           "bench.adapters_worker")
# langchain.mcp needs FastMCP, which mcp-run does not depend on; mcp pinned to mcp-run's release
LANGCHAIN_MCP = PeerEnvironment(ROOT / "bench" / ".venv-langchain",
                                ("langchain[mcp]==1.5.2", "fastmcp==4.2.3", "mcp==2.3.0"),
                                "bench.langchain_mcp_worker")


async def ensure_venv(peer: PeerEnvironment = ADAPTERS) -> Path:
    """The peer environment's interpreter; creates (or refreshes) the environment if needed."""
    if peer.is_ready():
        return peer.python()
    logger.warning("creating %s with %s (needs PyPI; a minute or two, once)", peer.folder,
                   " ".join(peer.requirements))
    with anyio.fail_after(INSTALL_TIMEOUT):
        await _run([sys.executable, "-m", "venv", "--clear", str(peer.folder)])
        await _run([str(peer.python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    *peer.requirements])
    peer.marker.write_text("\n".join(peer.requirements) + "\n")
    return peer.python()


async def _run(command: list[str]) -> None:
    done = await anyio.run_process(command, check=False, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        output = done.stdout.decode(errors="replace")[-4000:]
        raise BenchError(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n{output}")


class Worker:
    """A peer's worker process: one request, one answer, in turn."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = BufferedByteReceiveStream(process.stdout)
        self._lock = anyio.Lock()

    async def ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        async with self._lock:
            with anyio.fail_after(timeout):
                await self._stdin.send((json.dumps(request) + "\n").encode())
                line = await self._stdout.receive_until(b"\n", MAX_LINE)
        answer = json.loads(line)
        if "error" in answer:
            raise BenchError(f"the peer worker failed on {request.get('op')}:\n{answer['error']}")
        return answer

    async def quit(self) -> None:
        """Ask the worker to close its sessions and exit, and wait for it (bound it)."""
        try:
            await self._stdin.send(b'{"op": "quit"}\n')
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # it is gone already
        await self.process.wait()


@asynccontextmanager
async def adapters_suite(settings: Settings, http_url: str) -> AsyncIterator[tuple[list[Case], dict]]:
    """Start the adapters worker and open its sessions; yields its cases and the versions it runs."""
    async with peer_suite(ADAPTERS, settings, http_url) as opened:
        yield opened


@asynccontextmanager
async def langchain_mcp_suite(settings: Settings, http_url: str) -> AsyncIterator[tuple[list[Case], dict]]:
    """Start the ``langchain.mcp`` worker (rows 1, 2 and 4a); yields its cases and versions."""
    many = server_command(extra_for(settings.many_tools))
    async with peer_suite(LANGCHAIN_MCP, settings, http_url, many_command=many) as opened:
        yield opened


@asynccontextmanager
async def peer_suite(peer: PeerEnvironment, settings: Settings, http_url: str,
                     **setup: Any) -> AsyncIterator[tuple[list[Case], dict]]:
    """Start ``peer``'s worker in its environment; yields its cases and the versions it runs.

    ``setup`` adds worker-specific fields to the setup request.
    """
    python = await ensure_venv(peer)
    process = await anyio.open_process([str(python), "-m", peer.worker], cwd=ROOT,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
    worker = Worker(process)
    try:
        request = {"op": "setup", "server_command": server_command(), "http_url": f"{http_url}/mcp",
                   "settings": {**asdict(settings), "concurrency": list(settings.concurrency)}, **setup}
        answer = await worker.ask(request, SETUP_TIMEOUT)
        cases = [_proxy(worker, description, settings) for description in answer["cases"]]
        yield cases, answer["versions"]
    finally:
        with anyio.move_on_after(QUIT_TIMEOUT, shield=True):
            await worker.quit()
        await stop(process)


def _proxy(worker: Worker, description: dict[str, Any], settings: Settings) -> Case:
    """A peer's case, measured by its worker; latency and throughput in slices, as mcp-run's own."""
    case_id = description["id"]
    throughput = description["key"] == "calls_per_s"
    if description.get("sliced"):
        slices, combine = settings.latency_slices, combined_latency
    elif throughput:
        slices, combine = settings.throughput_slices, combined_throughput
    else:
        slices, combine = 1, None

    async def measure() -> Metrics:
        answer = await worker.ask({"op": "measure", "id": case_id}, MEASURE_TIMEOUT)
        return answer["metrics"]

    return Case(description["row"], description["path"], measure, description["key"], description["floor"],
                slices=slices, combine=combine)



PEER_ENVIRONMENTS = {"adapters": ADAPTERS, "langchain.mcp": LANGCHAIN_MCP}
PEER_SUITES = {"adapters": adapters_suite, "langchain.mcp": langchain_mcp_suite}
