"""A turn cut off before it ended: its process killed (``kill -9``, a power cut, a crash), stopped
(Ctrl-C) or failed in the middle of a step.

Turns on a checkpointer that outlives the process write every step
(:func:`runner.store.checkpointers.turn_durability`), those of the agents and workflows they run
too, each under its own checkpoint namespace. Such a thread's latest checkpoint still has steps to
run and no question waiting: :func:`cut_off_turn` finds it when the thread is resumed.

Then either the turn is continued (:data:`CONTINUE`, the chat's ``/resume``): LangGraph runs the
steps that had not finished, from the checkpoints of every level, so a workflow goes on at the step
it had reached and no finished step runs again (a step in flight at the cut runs again whole). Or a
new message closes it (:func:`close_cut_off_turn`): its unanswered tool calls are recorded as
stopped, so the model is told they may have acted rather than that they did not run, and LangGraph
drops the unfinished steps when the new input comes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from runner import sdk
from runner.agent.call_ledger import STOPPED_CHANNEL
from runner.agent.nodes import TOOL, answered_calls
from runner.agent.runtime import Runtime
from runner.agent.turn_stream import AGENT_KEY
from runner.manifest import MAIN_AGENT

# The input that continues a cut-off turn: a resume that adds nothing (every agent's state has
# messages; LangGraph refuses a Command that writes nothing) and runs the steps left to run.
CONTINUE: Command[Any] = Command(update={"messages": []})
STEP_SEPARATOR = " › "


@dataclass(frozen=True)
class CutOffTurn:
    """The cut-off turn of a thread: where it stopped, and its tool calls that have no result."""

    thread_id: str
    checkpoint: RunnableConfig  # the thread's latest checkpoint, the one the turn stopped after
    step: str  # the steps it was in, outermost first: "pipeline › 1-writer › steps__work"
    calls: tuple[str, ...]  # ids of the turn's own tool calls without a result

    def note(self) -> str:
        """What the chat and ``-p`` say of it."""
        return f"the last turn of thread {self.thread_id} was cut off at step {self.step}"

    def closed_note(self) -> str:
        """What ``serve`` tells the caller whose new message closed it (the thread id it stores
        is not the caller's own: that one is left out)."""
        return (f"the thread's last turn was cut off at step {self.step}: closed, its unfinished "
                "tool calls answered as stopped (they may have acted)")


async def cut_off_turn(runtime: Runtime, thread_id: str | None = None, *, agent: str = MAIN_AGENT
                       ) -> CutOffTurn | None:
    """The cut-off turn of the thread (default: the runtime's), or None: it ended, it waits for an
    answer to a question (an interrupt), or it has no turn (nor a checkpointer: no model)."""
    if runtime.checkpointer is None:
        return None
    config = runtime.config(thread_id, agent=agent)
    state = await runtime.agents[agent].aget_state(config)
    if not state.next or state.interrupts:
        return None
    thread = str(config["configurable"]["thread_id"])
    messages = (state.values or {}).get("messages", [])
    calls = _unanswered(messages)
    if calls:
        outer = ", ".join(call["name"] for call in calls)
    else:  # an agent served on its own runs in its graph's one node: the step is that agent's
        outer = agent if agent != MAIN_AGENT else ", ".join(state.next)
    steps = [outer, *await _inner_steps(state, await _namespaces(runtime, thread))]
    return CutOffTurn(thread, state.config, STEP_SEPARATOR.join(steps),
                      tuple(str(call["id"]) for call in calls))


async def close_cut_off_turn(runtime: Runtime, turn: CutOffTurn) -> None:
    """Record the turn's unanswered calls as stopped on its checkpoint (a write of no task, which
    the thread's next run applies whatever its input): the next message's model step answers them
    as calls that may have acted (:func:`runner.agent.nodes.close_dangling_tool_calls`)."""
    if not turn.calls or runtime.checkpointer is None:
        return
    await sdk.add_null_writes(runtime.checkpointer, turn.checkpoint, [(STOPPED_CHANNEL, list(turn.calls))])


async def close_cut_off_thread(runtime: Runtime, thread_id: str, *, agent: str = MAIN_AGENT
                               ) -> CutOffTurn | None:
    """Before a new message on ``agent``'s thread ``thread_id`` (``serve``'s callers): its cut-off
    turn, closed (:func:`close_cut_off_turn`), or None when the thread has none."""
    if (cut_off := await cut_off_turn(runtime, thread_id, agent=agent)) is not None:
        await close_cut_off_turn(runtime, cut_off)
    return cut_off


def _unanswered(messages: list[Any]) -> list[dict[str, Any]]:
    """The tool calls of the last model message that have no result."""
    answered = answered_calls(messages)
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return [dict(call) for call in message.tool_calls if call["id"] not in answered]
    return []


@dataclass(frozen=True)
class _Saved:
    checkpoint_id: str
    values: dict[str, Any]
    agent: str | None  # the agent of 'agents:' (or workflow) whose run it is, from its metadata

    def finished(self) -> bool:
        """Whether its run had answered: its last message is a model's without tool calls."""
        messages = self.values.get("messages", [])
        return bool(messages) and isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls


async def _namespaces(runtime: Runtime, thread_id: str) -> dict[str, _Saved]:
    """Every checkpoint namespace of the thread (the runs of its agents and workflows), with its
    latest checkpoint."""
    saver = runtime.checkpointer
    found: dict[str, _Saved] = {}
    if saver is None:
        return found
    async for saved in saver.alist({"configurable": {"thread_id": thread_id}}):
        where = saved.config["configurable"]
        namespace, checkpoint_id = where.get("checkpoint_ns", ""), str(where.get("checkpoint_id", ""))
        if namespace and (namespace not in found or found[namespace].checkpoint_id < checkpoint_id):
            agent = (saved.metadata or {}).get(AGENT_KEY)
            found[namespace] = _Saved(checkpoint_id, saved.checkpoint.get("channel_values", {}),
                                      agent if isinstance(agent, str) else None)
    return found


async def _inner_steps(state: Any, namespaces: dict[str, _Saved]) -> list[str]:
    """The steps inside the turn's unfinished task, outermost first. A task's run of an agent or a
    workflow is checkpointed under its graph's namespace plus ``NODE:TASK_ID``; at each level the
    one running at the cut is the one written last of those that had not answered (a parallel
    workflow's other members may have); a model loop's tool step is named by the calls that have
    no result, a workflow's step by its node when that names the agent (a chain's ``1-writer``),
    else by the agent it runs (a parallel workflow's member, a router's choice, a loop's round)."""
    pending = [task for task in state.tasks if task.result is None]
    if not pending:
        return []
    level = f"{pending[0].name}:{pending[0].id}"  # where the graph the task runs keeps its steps
    steps: list[str] = []
    while level in namespaces:
        calls = _unanswered(namespaces[level].values.get("messages", []))
        children = [ns for ns in namespaces if sdk.parent_namespace(ns) == level]
        if not children:
            if calls:
                steps.append(", ".join(call["name"] for call in calls))
            return steps
        running = [ns for ns in children if not namespaces[ns].finished()] or children
        level = max(running, key=lambda ns: namespaces[ns].checkpoint_id)
        node, agent = sdk.namespace_node(level), namespaces[level].agent
        if node == TOOL and calls:
            steps.append(", ".join(call["name"] for call in calls))
        else:
            steps.append(node if agent is None or agent in (node, node.partition("-")[2]) else agent)
    return steps
