"""One running agent per process, shared by every caller in it (LangGraph's server, for one).

A server that calls a graph factory for every run must not start the MCP servers every time:
:class:`AgentHost` starts the agent at the first need and keeps it until :meth:`AgentHost.close`.
"""

from __future__ import annotations

import asyncio
import os

import anyio

from runner.agent.host import Host
from runner.agent.runtime import Runtime, load_agent

MANIFEST_ENV = "MCP_RUN_MANIFEST"
STOP_WAIT = 30.0  # seconds the servers get to stop at shutdown


def manifest_path() -> str:
    """The manifest named by ``MCP_RUN_MANIFEST``, default ``agent.yaml`` in the working directory."""
    return os.environ.get(MANIFEST_ENV, "agent.yaml")


class AgentHost:
    """One running agent per process, started at the first need and kept until :meth:`close`.

    The agent lives in a task of its own (its servers' scopes are entered and left there), so it
    outlives the run or the request that first asked for it. Every caller must share that task's
    event loop (LangGraph's server runs its runs there unless ``BG_JOB_ISOLATED_LOOPS`` is set).
    """

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._started: asyncio.Future[Runtime] | None = None
        self._stop: asyncio.Event | None = None

    async def runtime(self) -> Runtime:
        """The running agent; the first call starts it. Raises what starting it raised (and the
        next call tries again: a required server may be back)."""
        if self._started is None or _failed(self._started):
            loop = asyncio.get_running_loop()
            self._started, self._stop = loop.create_future(), asyncio.Event()
            self._task = loop.create_task(self._live(self._started, self._stop), name="mcp-run agent")
        return await asyncio.shield(self._started)

    async def _live(self, started: asyncio.Future[Runtime], stop: asyncio.Event) -> None:
        try:
            async with load_agent(manifest_path(), host=Host()) as runtime:
                started.set_result(runtime)
                await stop.wait()
        except BaseException as exc:
            if started.done():  # it was running: whoever stops it (close) gets the error
                raise
            started.set_exception(exc)  # the callers of runtime() get it
            if not isinstance(exc, Exception):
                raise

    async def close(self) -> None:
        """Stop the agent and its servers (bounded); the next :meth:`runtime` starts a new one."""
        task, stop = self._task, self._stop
        self._task = self._started = self._stop = None
        if task is None or stop is None:
            return
        stop.set()
        with anyio.move_on_after(STOP_WAIT) as scope:
            await asyncio.shield(task)
        if scope.cancelled_caught:
            task.cancel()


def _failed(started: asyncio.Future[Runtime]) -> bool:
    return started.done() and (started.cancelled() or started.exception() is not None)


HOST = AgentHost()  # the process's agent (one module instance, however the server loads its caller)
