"""Which tool calls of a stopped turn had started: the server may have acted on those.

LangGraph keeps nothing of a step whose run was cancelled but the checkpoint it started from (the
model's request), so the graph's tool node counts its calls in and out here, and a stopped call
records its step's started calls on that checkpoint (``stopped_calls``, see :func:`remember_stopped`).
"""

from __future__ import annotations

import anyio
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from runner import sdk

STOP_RECORD_LIMIT = 5.0  # seconds a stopped call waits to record that it had started
STOPPED_CHANNEL = "stopped_calls"
_Step = tuple[str, str, str]  # thread id, checkpoint namespace, checkpoint id


def remember_stopped(known: list[str], stopped: list[str]) -> list[str]:
    """The state's reducer of ``stopped_calls``: ids of calls stopped while they ran, once each."""
    return known + [call_id for call_id in stopped if call_id not in known]


class StartedCalls:
    """The tool calls started from each step's checkpoint, counted in and out by the tool node.

    A stopped call writes the ids of all its step's calls (they all started before the step was
    stopped) to that checkpoint as a write of no task, which the thread's next run applies whatever
    its input, after the writes it has (:func:`runner.sdk.add_null_writes`); the calls of a step
    stopped at once write the same ids, which the state keeps once.
    """

    def __init__(self, saver: BaseCheckpointSaver | None) -> None:
        self._saver = saver
        self._steps: dict[_Step, tuple[set[str], list[int]]] = {}

    def begin(self, call_id: str, config: RunnableConfig) -> _Step | None:
        """Count the call in; the step it belongs to (None: no thread to write to)."""
        step = _step_of(config) if self._saver is not None else None
        if step is not None:
            ids, active = self._steps.setdefault(step, (set(), [0]))
            ids.add(call_id)
            active[0] += 1
        return step

    async def stopped(self, step: _Step | None) -> None:
        """Record on the step's checkpoint that its calls had started (called when cancelled)."""
        if step is None or self._saver is None:
            return
        thread_id, namespace, checkpoint_id = step
        where: RunnableConfig = {"configurable": {
            "thread_id": thread_id, "checkpoint_ns": namespace, "checkpoint_id": checkpoint_id}}
        ids = sorted(self._steps[step][0])
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_RECORD_LIMIT):
            await sdk.add_null_writes(self._saver, where, [(STOPPED_CHANNEL, ids)])

    def end(self, step: _Step | None) -> None:
        if step is not None:
            active = self._steps[step][1]
            active[0] -= 1
            if not active[0]:
                del self._steps[step]


def _step_of(config: RunnableConfig) -> _Step | None:
    """(thread, namespace, checkpoint id) of the step a task runs in, from the task's config."""
    configurable = config.get("configurable", {})
    thread_id = configurable.get("thread_id")
    # A task's namespace is its graph's plus its own part; the map gives the graph's checkpoint.
    namespace = sdk.parent_namespace(configurable.get("checkpoint_ns", ""))
    checkpoint_id = configurable.get("checkpoint_map", {}).get(namespace)
    if thread_id is None or checkpoint_id is None:
        return None
    return str(thread_id), namespace, checkpoint_id
