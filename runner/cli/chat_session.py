"""The chat loop of ``mcp-run FILE``: a :class:`ChatSession` reads lines through a view (a terminal
or JSON lines), runs turns, asks for approvals and answers, and dispatches prompt commands and the
chat commands registered with :func:`chat_command` (by ``runner.cli.chat_commands``, which
``runner.cli.chat`` imports before it starts a session).

Ctrl-C stops the current turn; a second Ctrl-C (or one at the prompt) exits (:class:`Interrupts`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import aclosing, contextmanager
from functools import partial
from typing import Any

import anyio
from langgraph.types import Command

from runner.agent.handoffs import current_agent
from runner.agent.resume import CONTINUE, CutOffTurn, close_cut_off_turn, cut_off_turn
from runner.agent.runtime import Runtime
from runner.agent.turns import stream_turn
from runner.cli import EXIT_OK
from runner.cli.answering import answer_question
from runner.cli.media import MediaFolder, save_turn_media
from runner.cli.rows import beside_rows, main_tool_names
from runner.cli.safe_text import visible
from runner.cli.terminal import ChatView
from runner.errors import RunnerError
from runner.evals.saving import ChatTrajectory, approval_entry
from runner.events import (
    AgentShown,
    ApprovalAsked,
    CatalogueChanged,
    ChatError,
    ChatReady,
    Interrupted,
    Question,
    ReloadEvent,
    ThreadShown,
    ToolResult,
    is_question,
)
from runner.manifest import CHAT_COMMANDS, MAIN_AGENT, did_you_mean
from runner.manifest.agents import conversing_agents
from runner.servers import CatalogueChange

LEAVE_COMMANDS = ("exit", "quit")

Handler = Callable[["ChatSession", str], Awaitable[None]]
# The handler of each chat command but the leave commands, by name (manifest.CHAT_COMMANDS).
CHAT_HANDLERS: dict[str, Handler] = {}


def chat_command(name: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        CHAT_HANDLERS[name] = handler
        return handler

    return register


def ready_event(runtime: Runtime) -> ChatReady:
    """The first event of a chat, and of a ``-p --json`` turn: agent, model, thread, the names of
    the main agent's tools (not those of servers only agents from other files use)."""
    tools = main_tool_names(runtime)
    return ChatReady(type="ready", name=runtime.manifest.name, model=runtime.manifest.model.id,
                     thread=runtime.thread_id, tools=tools,
                     agents=list(runtime.manifest.agent.agents),
                     handoffs=[row["name"] for row in beside_rows(runtime, schemas=False)
                               if row["kind"] == "handoff"])


def change_event(change: CatalogueChange) -> CatalogueChanged:
    """The event of a server's changed tools, prompts or resources."""
    return CatalogueChanged(type="change", server=change.server, kind=change.kind, added=list(change.added),
                            removed=list(change.removed), changed=list(change.changed))


class Interrupts:
    """Ctrl-C cancels the running turn; a second one while it stops, or one at the prompt, exits."""

    def __init__(self) -> None:
        self.turn: anyio.CancelScope | None = None

    def __call__(self, *_: Any) -> None:
        if self.turn is not None and not self.turn.cancel_called:
            self.turn.cancel()
        else:
            raise KeyboardInterrupt

    @contextmanager
    def cancelling(self) -> Iterator[anyio.CancelScope]:
        """A scope for one turn (or command) that Ctrl-C cancels while it runs."""
        with anyio.CancelScope() as scope:
            self.turn = scope
            try:
                yield scope
            finally:
                self.turn = None


class ChatSession:
    """One chat over a running agent, shown through a view (a terminal or JSON lines)."""

    def __init__(self, runtime: Runtime, view: ChatView, interrupts: Interrupts, *,
                 yes: bool = False, agent: str | None = None) -> None:
        self.runtime = runtime
        self.view = view
        self.interrupts = interrupts
        self.yes = yes
        # The agent the next message goes to (``--agent``, ``/agent NAME``): the thread's current
        # agent from that turn on (runner.agent.handoffs).
        self.switch_to = agent
        self._shown_agent = MAIN_AGENT  # the agent the view was last told answers
        self._direct_calls = 0  # numbers the ids of /call's tool calls
        self.media = MediaFolder(runtime.fleet.state_dir)
        # The approvals answered in each thread's turns, in order, as /save writes them in a case.
        self._answered: dict[str, list[dict[str, Any]]] = {}
        # The tool calls and agent runs of each thread's turns, every agent's, as /save writes them.
        self._trajectories: dict[str, ChatTrajectory] = {}
        # The cut-off turn of the thread the chat resumed (runner.agent.resume), until it is
        # continued (/resume) or a new message closes it.
        self._cut_off: CutOffTurn | None = None
        runtime.listeners.append(self._show_change)

    async def run(self) -> int:
        runtime = self.runtime
        self.view.show(ready_event(runtime))
        await self.follow_agent()
        if note := await self.find_cut_off():
            self.view.show(ThreadShown(type="thread", thread=runtime.thread_id, note=note))
        while True:
            line = await self.view.read()
            if line is None:
                return EXIT_OK
            line = line.strip()
            if not line:
                continue
            if not line.startswith("/"):
                await self._interruptible(partial(self._turn, line))
                continue
            name = line[1:].split(maxsplit=1)[0] if line[1:].strip() else ""
            if name in LEAVE_COMMANDS:
                return EXIT_OK
            if name in CHAT_HANDLERS:
                await self._interruptible(partial(CHAT_HANDLERS[name], self, line), f"/{name}")
            elif name in runtime.prompt_catalog:
                await self._prompt_command(line)
            else:
                self.error(self._unknown_command(name))

    def next_direct_call_id(self) -> str:
        """The id of a new ``/call`` tool call (``direct_1``, ``direct_2``, ...)."""
        self._direct_calls += 1
        return f"direct_{self._direct_calls}"

    def error(self, message: str) -> None:
        self.view.show(ChatError(type="error", message=message))

    def _unknown_command(self, name: str) -> str:
        prompts = [command.name for command in self.runtime.prompt_catalog]
        hint = did_you_mean(f"/{name}", [f"/{command}" for command in (*CHAT_COMMANDS, *prompts)])
        known = ", ".join(f"/{command}" for command in CHAT_COMMANDS)
        if prompts:
            known += "; prompt commands: " + ", ".join(f"/{prompt}" for prompt in prompts)
        return f"unknown command '/{name}'{hint}; commands: {known}"

    async def _interruptible(self, work: Callable[[], Awaitable[None]], what: str = "turn") -> None:
        """Run ``work`` (a turn, or the chat command ``what``) until it ends or Ctrl-C stops it."""
        with self.interrupts.cancelling() as scope:
            async with self.view.working():
                await work()
        if scope.cancelled_caught:
            self.view.show(Interrupted(type="interrupted", what=what))

    async def _prompt_command(self, line: str) -> None:
        try:
            messages = await self.runtime.prompt_messages(line)
        except RunnerError as exc:
            self.error(str(exc))
            return
        await self._interruptible(partial(self._turn, messages))

    async def find_cut_off(self) -> str:
        """What to say of the current thread's last turn if it was cut off (else nothing); a new
        message then closes it, ``/resume`` continues it."""
        self._cut_off = await cut_off_turn(self.runtime)
        if self._cut_off is None:
            return ""
        return visible(f"{self._cut_off.note()}: /resume continues it, a new message closes it")

    async def resume(self) -> None:
        """``/resume``: continue the thread's cut-off turn from the step it reached."""
        if await cut_off_turn(self.runtime) is None:
            self.error("nothing to resume: the thread's last turn ended, or waits for an answer")
            return
        self._cut_off = None
        await self._turn(CONTINUE)

    async def _turn(self, message: Any) -> None:
        """One turn and the questions it asks; a turn that fails (the model, after its retries and
        fallbacks; an answer object that never validated) is an error line, and the chat goes on."""
        if self._cut_off is not None and self._cut_off.thread_id == self.runtime.thread_id \
                and not isinstance(message, Command):
            await close_cut_off_turn(self.runtime, self._cut_off)
        self._cut_off = None
        if not isinstance(message, Command):  # a user's message or a prompt's (not /resume's continuation)
            self.trajectory().begin_turn(message)
        try:
            await self._turn_until_answered(message)
        except RunnerError as exc:
            self.error(f"the turn failed: {exc}")

    async def _turn_until_answered(self, message: Any) -> None:
        switch_to, self.switch_to = self.switch_to, None
        while True:
            pending: Question | None = None  # a tool call to approve, or a server's question
            results: list[ToolResult] = []
            turn = stream_turn(self.runtime, message, switch_to=switch_to)
            switch_to = None  # the turn's first run made the switch
            async with aclosing(turn) as events:  # even by a failed write
                async for event in events:
                    if is_question(event):
                        pending = event
                    else:
                        self.view.show(event)
                        self.trajectory().observe(event)
                        if event["type"] == "tool_result":
                            results.append(event)
                        elif event["type"] == "handoff":
                            self._shown_agent = event["to"]
            for saved in await save_turn_media(self.runtime, self.media, results):
                self.view.show(saved.event())
            if pending is None:
                return
            if pending["type"] == "approval":
                message = Command(resume=await self._answer_approval(pending))
            else:
                message = Command(resume=await answer_question(self.view, pending))

    async def _answer_approval(self, approval: ApprovalAsked) -> dict[str, Any]:
        """The answer to a turn's approval, remembered for /save; a question Ctrl-C leaves
        unanswered is remembered as one that stopped the turn."""
        answered = self._answered.setdefault(self.runtime.thread_id, [])
        answered.append(approval_entry(approval["tool"], None))
        answer = await self.approve(approval)
        answered[-1] = approval_entry(approval["tool"], answer)
        if answer["action"] == "edit":
            self.trajectory().edited(approval["id"], answer["args"])
        return answer

    def answered_approvals(self) -> list[dict[str, Any]]:
        """The approvals answered in the current thread's turns in this chat, in order."""
        return list(self._answered.get(self.runtime.thread_id, []))

    def trajectory(self) -> ChatTrajectory:
        """The tool calls and agent runs of the current thread's turns in this chat."""
        return self._trajectories.setdefault(self.runtime.thread_id, ChatTrajectory())

    async def approve(self, approval: ApprovalAsked) -> dict[str, Any]:
        if self.yes:
            return {"action": "approve"}
        return await self.view.ask_approval(approval)

    def switch_agent(self, agent: str) -> None:
        """Send the next message, and those after it, to ``agent`` (``/agent NAME``)."""
        self.switch_to = agent

    async def current_agent(self) -> str:
        """The agent answering the conversation: the one the next message goes to, after a
        switch; else the thread's current agent, as its checkpoint keeps it."""
        if self.switch_to is not None:
            return self.switch_to
        runtime = self.runtime
        state = await runtime.graph.aget_state(runtime.config())
        agent = current_agent(state.values or {})
        # An agent an edit removed no longer answers: main does (runner.agent.handoffs.StartRoute).
        return agent if agent in conversing_agents(runtime.manifest.agents) else MAIN_AGENT

    def agent_event(self, agent: str) -> AgentShown:
        self._shown_agent = agent
        choices = conversing_agents(self.runtime.manifest.agents)
        return AgentShown(type="current_agent", agent=agent, choices=choices)

    async def follow_agent(self) -> None:
        """Tell the view which agent answers when that is not the one it was last told (a
        resumed thread, another thread, ``--agent``)."""
        agent = await self.current_agent()
        if agent != self._shown_agent:
            self.view.show(self.agent_event(agent))

    def _show_change(self, change: CatalogueChange) -> None:
        self.view.show(change_event(change))

    def show_reload(self, event: ReloadEvent) -> None:
        if event["type"] == "reload":
            event = event | {"tools": main_tool_names(self.runtime)}
        self.view.show(event)
