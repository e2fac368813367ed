"""The langchain-mcp-adapters comparison: its own virtual environment, driven from this run.

langchain-mcp-adapters pins ``mcp<2``, so it cannot live in mcp-run's environment. The harness
creates ``bench/.venv-adapters`` on first use (``pip install`` from PyPI, about a minute) and
reuses it afterwards; ``bench.adapters_worker`` runs there as a subprocess of this run, measures
its own raw floor (mcp 1.x) beside the adapters' paths, and answers one case at a time, so its
cases take their turn in the same rounds as everything else.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from bench.harness import BenchError, Case, Settings
from bench.launch import ROOT, server_command, stop
from bench.stats import Metrics

logger = logging.getLogger(__name__)

VENV = ROOT / "bench" / ".venv-adapters"
REQUIREMENT = "langchain-mcp-adapters==0.3.2"  # pinned: the comparison should not drift by itself
MARKER = VENV / "bench-requirement.txt"
INSTALL_TIMEOUT = 900.0
SETUP_TIMEOUT = 180.0
MEASURE_TIMEOUT = 600.0
QUIT_TIMEOUT = 15.0
MAX_LINE = 16 * 2**20


def venv_python() -> Path:
    return VENV / "bin" / "python"


def venv_is_ready() -> bool:
    return MARKER.is_file() and MARKER.read_text().strip() == REQUIREMENT and venv_python().exists()


async def ensure_venv() -> Path:
    """The adapters environment's interpreter; creates (or refreshes) the environment if needed."""
    if venv_is_ready():
        return venv_python()
    logger.warning("creating %s with %s (needs PyPI; about a minute, once)", VENV, REQUIREMENT)
    with anyio.fail_after(INSTALL_TIMEOUT):
        await _run([sys.executable, "-m", "venv", "--clear", str(VENV)])
        await _run([str(venv_python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    REQUIREMENT])
    MARKER.write_text(REQUIREMENT + "\n")
    return venv_python()


async def _run(command: list[str]) -> None:
    done = await anyio.run_process(command, check=False, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        output = done.stdout.decode(errors="replace")[-4000:]
        raise BenchError(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n{output}")


class Worker:
    """The adapters worker process: one request, one answer, in turn."""

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
            raise BenchError(f"the adapters worker failed on {request.get('op')}:\n{answer['error']}")
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
    """Start the worker and open its sessions; yields its cases and the versions it runs."""
    python = await ensure_venv()
    process = await anyio.open_process([str(python), "-m", "bench.adapters_worker"], cwd=ROOT,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
    worker = Worker(process)
    try:
        setup = {"op": "setup", "server_command": server_command(), "http_url": f"{http_url}/mcp",
                 "settings": {**asdict(settings), "concurrency": list(settings.concurrency)}}
        answer = await worker.ask(setup, SETUP_TIMEOUT)
        cases = [_proxy(worker, description) for description in answer["cases"]]
        yield cases, answer["versions"]
    finally:
        with anyio.move_on_after(QUIT_TIMEOUT, shield=True):
            await worker.quit()
        await stop(process)


def _proxy(worker: Worker, description: dict[str, Any]) -> Case:
    case_id = description["id"]

    async def measure() -> Metrics:
        answer = await worker.ask({"op": "measure", "id": case_id}, MEASURE_TIMEOUT)
        return answer["metrics"]

    return Case(description["row"], description["path"], measure, description["key"], description["floor"])

