"""Task-augmented tool calls (protocol 2025-11-25): the call creates a task on the server, the
client polls it and fetches its result.

Which calls run as tasks is decided per tool and per server (``tasks:`` in the manifest):
``auto`` (the default) runs a tool as a task when its ``execution.taskSupport`` is ``required``;
``always`` also when it is ``optional``; ``never`` runs none, so a tool that requires it cannot
be called (the catalog does not offer it). A server that does not declare
``tasks.requests.tools.call`` never gets a task-augmented request, as the specification demands.

A task run: ``tools/call`` with a ``task`` field answers a ``CreateTaskResult``; ``tasks/get`` is
polled at the server's ``pollInterval`` (1s when it gives none) and each new status is reported;
``tasks/result`` is asked once the task is ``input_required`` (the server's questions for it
arrive while that request is open, and are answered like any elicitation) or finished, and
answers the tool's ``CallToolResult``. A run that ends early (the caller cancelled, Ctrl-C, a
timeout) sends ``tasks/cancel`` before it ends (shielded, bounded), so the server stops working
on a task nobody waits for.

The SDK's ``call_tool`` validates the answer as a ``CallToolResult`` and rejects the task handle,
so the creating request goes out through the session's dispatcher with the session's own
per-request stamp (``send_task_request``); the ``tasks/*`` requests are unknown to the SDK's
method tables and go through ``ClientSession.send_request`` unvalidated by them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from runner import sdk
from runner.errors import CANCELLED_CODE, ServerRequestError
from runner.events import TaskUpdate
from runner.servers.inbound_requests import CallEvents

logger = logging.getLogger(__name__)

TaskSetting = Literal["auto", "always", "never"]

TERMINAL = frozenset({"completed", "failed", "cancelled"})
RESULT_READY = TERMINAL | {"input_required"}  # tasks/result may be asked (it blocks until the end)
DEFAULT_POLL_INTERVAL = 1.0  # seconds, when the server suggests none
MIN_POLL_INTERVAL = 0.01  # a server suggesting 0 must not make the client spin
CANCEL_LIMIT = 5.0  # seconds a stopped run waits for the server to acknowledge tasks/cancel
TTL_MARGIN = 60.0  # seconds the server keeps a task beyond the time the client may wait for it


class _TaskRequest(types.Request[dict[str, Any] | None, str]):
    """A ``tasks/*`` request: methods the SDK defines types for but does not send itself."""

    method: str
    params: dict[str, Any] | None = None


def task_update(task: types.Task) -> TaskUpdate:
    """What a call's events hear of its task (the tool and server are added by ``call_events``)."""
    return TaskUpdate(type="task", task_id=task.task_id, status=task.status, message=task.status_message)


def server_runs_tasks(capabilities: types.ServerCapabilities | None) -> bool:
    """The server declares task-augmented ``tools/call`` (2025-11-25 sessions only)."""
    tasks = capabilities.tasks if capabilities is not None else None
    return bool(tasks and tasks.requests and tasks.requests.tools and tasks.requests.tools.call)


def task_support(tool: types.Tool) -> str:
    return (tool.execution.task_support if tool.execution is not None else None) or "forbidden"


def offered_to_agent(tool: types.Tool, setting: TaskSetting) -> bool:
    """Whether the agent can call ``tool`` at all: a task-only tool needs ``tasks`` not ``never``."""
    return setting != "never" or task_support(tool) != "required"


def unavailable(tool: types.Tool, setting: TaskSetting, server_capable: bool) -> str | None:
    """Why ``tool``, which only runs as a task, cannot be called here (None: it can, or needs no task)."""
    if task_support(tool) != "required":
        return None
    if setting == "never":
        return "the tool only runs as a task, and tasks is 'never' for this server"
    if not server_capable:
        return "the tool only runs as a task, and the server does not declare task support"
    return None


def runs_as_task(tool: types.Tool, setting: TaskSetting, server_capable: bool) -> bool:
    """Whether a call of ``tool`` is task-augmented (see :func:`unavailable` first)."""
    support = task_support(tool)
    wanted = support == "required" or (support == "optional" and setting == "always")
    return wanted and setting != "never" and server_capable


def poll_interval(task: types.Task) -> float:
    if task.poll_interval is None:
        return DEFAULT_POLL_INTERVAL
    return max(task.poll_interval / 1000, MIN_POLL_INTERVAL)


async def send_task_request(
    session: ClientSession, name: str, arguments: dict[str, Any], *, ttl: float, timeout: float
) -> types.CreateTaskResult:
    """``tools/call`` with a ``task`` field; the server's ``CreateTaskResult``."""
    data: dict[str, Any] = {
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "task": {"ttl": int(ttl * 1000)}},
    }
    raw = await sdk.send_raw(session, data, timeout=timeout)  # send_request would refuse the answer
    return types.CreateTaskResult.model_validate(raw, by_name=False)


async def _task_request(
    session: ClientSession, method: str, task_id: str, result_type: type[Any], timeout: float
) -> Any:
    request = _TaskRequest(method=method, params={"taskId": task_id})
    return await session.send_request(request, result_type, request_read_timeout_seconds=timeout)


class TaskRun:
    """One task-augmented call on one session, from creation to its result."""

    def __init__(
        self, server: str, session: ClientSession, name: str, arguments: dict[str, Any], *,
        events: CallEvents | None = None, alive: Callable[[], None] = lambda: None,
    ) -> None:
        self.server = server
        self.session = session
        self.name = name
        self.arguments = arguments
        self.events = events
        self.alive = alive  # a status change shows the task is alive (extends an idle limit)
        self.task: types.Task | None = None

    async def run(self, deadline: float) -> types.CallToolResult:
        """Create the task, follow it, and return its result; by ``deadline`` (anyio time) at most."""
        with anyio.fail_after(max(deadline - anyio.current_time(), 0.001)):
            remaining = max(deadline - anyio.current_time(), 0.001)
            created = await send_task_request(
                self.session, self.name, self.arguments, ttl=remaining + TTL_MARGIN, timeout=remaining
            )
            self._report(created.task)
            try:
                return await self._follow(deadline)
            except BaseException:
                if self.task is not None and self.task.status not in TERMINAL:
                    await self._cancel()
                raise

    async def _follow(self, deadline: float) -> types.CallToolResult:
        ready = anyio.Event()
        results: list[types.CallToolResult] = []

        async def poll() -> None:
            assert self.task is not None
            while self.task.status not in TERMINAL:
                if self.task.status in RESULT_READY:
                    ready.set()
                await anyio.sleep(poll_interval(self.task))
                self._report(await self._request("tasks/get", types.GetTaskResult, deadline))
            ready.set()

        assert self.task is not None
        async with anyio.create_task_group() as group:
            group.start_soon(poll)
            await ready.wait()
            if self.task.status == "cancelled":
                raise ServerRequestError(
                    self.server, f"tools/call {self.name!r}: the server cancelled the task"
                    + (f" ({self.task.status_message})" if self.task.status_message else ""),
                    code=CANCELLED_CODE,
                )
            # Blocks until the task ends; the server's questions for it arrive meanwhile.
            results.append(await self._request("tasks/result", types.CallToolResult, deadline))
            group.cancel_scope.cancel()
        if self.task.status not in TERMINAL:  # the result came while input was required: its end
            self._report(await self._request("tasks/get", types.GetTaskResult, deadline))
        return results[0]

    async def _request(self, method: str, result_type: type[Any], deadline: float) -> Any:
        assert self.task is not None
        timeout = max(deadline - anyio.current_time(), 0.001)
        return await _task_request(self.session, method, self.task.task_id, result_type, timeout)

    def _report(self, task: types.Task) -> None:
        """A task as the server gave it: any update shows it alive; a new status is an event."""
        previous, self.task = self.task, task
        shown = (task.status, task.status_message)
        if previous is not None and (previous.status, previous.status_message) == shown:
            if previous.last_updated_at != task.last_updated_at:
                self.alive()
            return
        self.alive()
        if self.events is not None:
            self.events(task_update(task))

    async def _cancel(self) -> None:
        """Ask the server to stop the task; a failure to do so is logged, never raised."""
        assert self.task is not None
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_LIMIT) as scope:
            try:
                cancelled = await _task_request(
                    self.session, "tasks/cancel", self.task.task_id, types.CancelTaskResult, CANCEL_LIMIT
                )
            except (MCPError, ValidationError, OSError, RuntimeError, anyio.ClosedResourceError,
                    anyio.BrokenResourceError, anyio.EndOfStream) as exc:  # the session may be ending
                logger.info("could not cancel task %s of %s: %s", self.task.task_id, self.name, exc)
                return
            self._report(cancelled)
        if scope.cancelled_caught:
            logger.info("task %s of %s: no answer to tasks/cancel within %gs",
                        self.task.task_id, self.name, CANCEL_LIMIT)
