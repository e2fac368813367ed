"""One turn of the agent as a stream of JSON-ready events (what the chat, ``-p``, the evals and
``--json`` show): :func:`stream_turn` over a :class:`~runner.agent.runtime.Runtime`'s graph."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, TypeVar, cast

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, StreamMode

from runner import sdk, telemetry
from runner.agent.handoffs import ANSWER, answered_final, answering_notice, is_handoff_notice, switching_input
from runner.agent.runtime import Runtime
from runner.agent.spending import left_over, turn_started, usage_events
from runner.agent.structured import answer_object
from runner.agent.turn_stream import NAMESPACE, RERUN, StoppedTurnEvents, turn_events
from runner.errors import ModelError
from runner.events import Event, FinalAnswer, Token, ToolCall, ToolResult, is_question, question
from runner.manifest import MAIN_AGENT
from runner.store.thread_locks import thread_turn

logger = logging.getLogger(__name__)

EventT = TypeVar("EventT", ToolCall, ToolResult)
CLOSE_LIMIT = 5.0  # seconds a stopped turn waits for its graph run (and tool calls) to be cancelled

def turn_input(message: str | list[BaseMessage] | Command) -> Any:
    """Graph input for a user message, prompt messages, or an approval answer."""
    if isinstance(message, Command):
        return message
    if isinstance(message, str):
        return {"messages": [HumanMessage(message)]}
    return {"messages": message}


async def stream_turn(
    runtime: Runtime, message: str | list[BaseMessage] | Command, *, thread_id: str | None = None,
    agent: str = MAIN_AGENT, switch_to: str | None = None,
) -> AsyncGenerator[Event, None]:
    """Run one turn (or resume one) and yield its events (:mod:`runner.events`):

    ``token`` (text), ``tool_call`` (name, args, id), ``tool_result`` (name, id, status, text),
    ``approval`` (tool, args, id) — the turn then waits for ``Command(resume=...)`` —,
    ``elicitation`` (server, message, mode ``form`` with its JSON ``schema`` or ``url`` with ``url``
    and ``elicitation_id``) — resumed with ``{"action": "accept", "content": {...}}``, decline or
    cancel (a URL answer may name the ``url`` it was given for: it then answers no other page) —,
    ``sampling`` (server, system_prompt, messages, max_tokens, tools: what a server asks
    the model) — resumed with ``{"action": "approve"}`` or deny —, ``progress`` (tool, server, progress,
    total, message: a running tool call's progress notification), ``task`` (tool, server, task_id,
    status, message: a tool call running as a task was created or changed status),
    ``elicitation_complete`` (tool, server, elicitation_id: the server says a URL visit is done),
    ``tool_retry`` (tool, server, reason, fallback, id: the call made again, on a fallback or after a
    URL visit), and
    ``final`` (text, reason) when the model answered without tool calls.

    A turn stopped by cancelling its consumer (Ctrl-C) still yields, before the cancellation goes
    on, the events its calls sent as they were cancelled: a task's ``cancelled`` status.

    One turn at a time runs on a thread, in this process and across the processes sharing its
    checkpointer (:func:`runner.store.thread_locks.thread_turn`): a turn started while another of
    its thread runs waits for it (saying so), and starts from what that one wrote.

    ``agent`` names the agent the turn runs (``serve``'s tool or model of that name): one of
    ``agents:`` gets the message as its task, on its own thread of that id
    (:func:`runner.agent.team.agent_thread`); its events name it, as when another agent calls it.

    ``switch_to`` makes that agent the thread's current one (``/agent``, ``--agent``): it answers
    this message and the next ones (:mod:`runner.agent.handoffs`); a ``handoff`` event says when
    an agent hands the conversation on, and the events of the agent answering name it.
    """
    config = runtime.config(thread_id, agent=agent)
    async with thread_turn(runtime.checkpointer, config["configurable"]["thread_id"]):
        resumed = isinstance(message, Command)
        config = await turn_started(runtime.agents[agent], config, runtime.manifest.limits, resumed=resumed)
        given = turn_input(message)
        if switch_to is not None and not isinstance(message, Command):
            given = switching_input(given, switch_to)
        asked = False
        try:
            async with aclosing(_turn_events(runtime, given, config, agent)) as events:
                async for event in events:
                    asked = asked or is_question(event)
                    yield event
        except ModelError:  # a failed model step (or answer): the turn's steps and calls are the thread's
            await _save_left_over(runtime, config, agent, waiting=False)
            raise
        except anyio.get_cancelled_exc_class():  # stopped (Ctrl-C): what it spent is the thread's
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_LIMIT):
                await _save_left_over(runtime, config, agent, waiting=False)
            raise
        if asked:  # what the turn spent so far is the thread's while the question waits
            await _save_left_over(runtime, config, agent, waiting=True)


async def _save_left_over(runtime: Runtime, config: RunnableConfig, agent: str, *, waiting: bool) -> None:
    """Write what the turn spent and its steps did not write (:func:`left_over`) to the thread's
    state: a write of no task on its latest checkpoint, applied to the state whatever the thread's
    next run is (an answer resuming the turn reads it first)."""
    writes = left_over(config, waiting=waiting)
    if not writes or runtime.checkpointer is None:
        return
    state = await runtime.agents[agent].aget_state(config)
    await sdk.add_null_writes(runtime.checkpointer, state.config, writes)


async def _turn_events(
    runtime: Runtime, given: Any, config: RunnableConfig, served: str
) -> AsyncGenerator[Event, None]:
    names: dict[tuple[str | None, str], str] = {}
    # A run continuing a cut-off turn (not an answer to a question, whose turn told its calls):
    # the calls it runs again are told as they start.
    continued = isinstance(given, Command) and given.resume is None
    # The agents of 'agents:' running in this turn, by the namespace their graph's events come from.
    agents: dict[tuple[str, ...], str] = {}
    modes: list[StreamMode] = ["messages", "updates", "custom"]
    stream = runtime.agents[served].astream(given, config, stream_mode=modes, subgraphs=True)
    assert isinstance(stream, AsyncGenerator)  # typed as an AsyncIterator; _run_graph closes it
    send, receive = anyio.create_memory_object_stream[tuple[tuple[str, ...], str, Any]]()
    clock = telemetry.begin_turn(runtime.manifest.name, config["configurable"]["thread_id"],
                                 resumed=isinstance(given, Command))
    stopped = StoppedTurnEvents()
    structured = runtime.manifest.output is not None
    context = clock.context() or contextvars.copy_context()
    context.run(turn_events.set, stopped)
    run = asyncio.create_task(_run_graph(stream, send), context=context)
    try:
        async for namespace, mode, data in receive:
            agent = agents.get(namespace) if namespace else None
            if mode == "custom":  # progress of a running tool call, or an agent starting
                if is_handoff_notice(data):  # a handoff, or where the agent now answering runs
                    if (handed := answering_notice(data, agents)) is not None:
                        yield clock.seen(handed)
                    continue
                if data.get(RERUN):  # a call run again: told unless this turn told it already
                    data = {key: value for key, value in data.items() if key != RERUN}
                    if not continued or (agent, data["id"]) in names:
                        continue
                    names[agent, data["id"]] = data["name"]
                    yield clock.seen(_by(cast(ToolCall, data), agent))
                    continue
                if data.get("type") == "agent":
                    data = {**data, "caller": agent or MAIN_AGENT}
                    inner = data.pop(NAMESPACE)
                    agents[tuple(inner.split("|")) if inner else ()] = data["agent"]
                    if data.pop("resumed", False):
                        continue  # an answer resumed it: its start was told when it started
                    if agent is None and served != MAIN_AGENT:
                        continue  # the served agent itself, started by this turn, not by an agent
                elif agent is not None:
                    data = {**data, "agent": agent}
                yield clock.seen(data)
                continue
            if mode == "messages":
                chunk, metadata = data
                # With ``output:`` the answer is an object, shown whole by the final event.
                if metadata.get("langgraph_node") == "model" and isinstance(chunk, AIMessageChunk):
                    if (text := chunk.text) and agent is not None:
                        yield Token(type="token", text=text, agent=agent)
                    elif text and not structured:
                        yield Token(type="token", text=text)
                continue
            for node, update in data.items():
                for spent in usage_events(node, update, config, agent or MAIN_AGENT):
                    yield clock.seen(spent)
                if node == "__interrupt__":
                    if not namespace:  # a subgraph's interrupt reaches the turn's own graph too
                        for pending in update:
                            yield clock.seen(question(pending.value))
                    continue
                if namespace and agent is None:
                    continue  # a workflow's own steps: its agents' events say what happens
                if not namespace and node == ANSWER:  # the agent answering: its own events said the rest
                    if (answered := answered_final(update)) is not None:
                        yield clock.seen(answered)
                    continue
                for item in (update or {}).get("messages", []):
                    if isinstance(item, AIMessage) and item.tool_calls and node == "model":
                        for call in item.tool_calls:
                            call_id = cast(str, call["id"])  # set: the graph's tool tasks need it
                            names[agent, call_id] = call["name"]
                            called = ToolCall(type="tool_call", name=call["name"], args=call["args"],
                                              id=call_id)
                            yield clock.seen(_by(called, agent))
                    elif isinstance(item, AIMessage) and node == "model" and agent is None:
                        reason = item.response_metadata.get("finish_reason")
                        final = FinalAnswer(type="final", text=reply_text(item), reason=reason)
                        if (output := answer_object(item)) is not None:
                            final["output"] = output
                        yield clock.seen(final)
                    elif isinstance(item, ToolMessage):
                        # the name is set by the tool task
                        name = names.get((agent, item.tool_call_id)) or cast(str, item.name)
                        result = ToolResult(type="tool_result", name=name, id=item.tool_call_id,
                                            status=item.status, text=_message_text(item))
                        yield clock.seen(_by(result, agent))
        await run  # the run's own error, if it failed
    except anyio.get_cancelled_exc_class():
        # Stopped (Ctrl-C, a cancelled task, a stopped served turn): what the calls said as they
        # were cancelled (a task's cancelled status) is handed over before the stop goes on.
        stopped.stop()
        await _close(run)
        for event in stopped.kept:
            yield clock.seen(event)
        raise
    finally:
        await _close(run)
        receive.close()
        if run.done() and not run.cancelled() and (error := run.exception()) is not None:
            logger.debug("the graph run ended with %r", error)  # raised above unless stopped
        clock.end(asyncio.CancelledError() if not run.done() or run.cancelled() else run.exception())


def _by(event: EventT, agent: str | None) -> EventT:
    """``event`` naming the agent of 'agents:' it comes from (none: the main agent)."""
    if agent is not None:
        event["agent"] = agent
    return event


async def _close(run: asyncio.Task[None]) -> None:
    """Cancel the graph run once and wait for it to close, which cancels its tool calls (and so
    their requests on the servers); bounded, and shielded from the turn's own cancellation."""
    run.cancel()
    with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_LIMIT):
        await asyncio.wait([run])


async def _run_graph(stream: AsyncGenerator[Any, None], send: MemoryObjectSendStream[Any]) -> None:
    """Feed the graph run's events to the turn, in a task of its own.

    LangGraph closes a run (cancelling its tool tasks) in a task it awaits; inside the turn's
    cancelled scope that await would be cancelled again and again, cancelling the closing task
    before it ran and leaving the tool calls running. Here the run is cancelled exactly once.
    """
    async with send:
        try:
            async for item in stream:
                await send.send(item)
        finally:
            await stream.aclose()


def reply_text(message: AIMessage) -> str:
    """The text blocks of a reply, a newline between two (``message.text`` runs them together:
    'Checked.' and 'All good.' around a tool call would read 'Checked.All good.')."""
    if isinstance(message.content, str):
        return message.content
    return "\n".join(block if isinstance(block, str) else str(block.get("text", ""))
                     for block in message.content
                     if isinstance(block, str) or block.get("type") == "text")


def _message_text(message: BaseMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    parts = []
    for block in message.content:
        if isinstance(block, str):
            parts.append(block)
        elif block.get("type") == "text":
            parts.append(block.get("text", ""))
        else:
            parts.append(f"[{block.get('type')}]")
    return "\n".join(parts)
