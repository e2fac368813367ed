"""What the agent asks of whoever runs it: its host.

One :class:`AgentHost` is passed to :func:`runner.agent.runtime.load_agent`, and from the runtime
to every tool call (:class:`runner.tools.caller.CallHost` is the part the calls need) and to the
servers' sampling. The terminal chat and the JSON chat (:mod:`runner.cli.chat`), ``mcp-run call``
(:mod:`runner.cli.inspecting`), ``serve`` (:mod:`runner.hosting.mcp`), the LangGraph Server host
(:mod:`runner.hosting.agent_host`) and the evals (:class:`runner.evals.case_sessions.EvalSessions`)
each pass one.

A question a server asks during a tool call, in order:

1. the server's request reaches :class:`runner.servers.inbound_requests.ServerRequests`
   (``on_elicit``, ``on_sample``), which hands it to the asking call's ``ask``;
2. :func:`runner.tools.asking.call_answering` relays it to the tool's task, where the caller's
   host (the runtime) answers it;
3. the runtime asks its :class:`AgentHost`: :meth:`~AgentHost.ask` (or, for sampling,
   :meth:`~AgentHost.approve_sampling` and then the agent's model completes);
4. :class:`Host` asks by a graph interrupt: the turn pauses, and the turn's reader shows the
   question (:mod:`runner.agent.turns` → :mod:`runner.cli.answering`,
   :mod:`runner.hosting.mcp.relayed_questions`, or the evals' scripted answers);
5. the answer resumes the graph, the tool runs again and the same question gets the saved answer,
   which goes back to the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import mcp_types as types
from mcp.client.extension import ClientExtension

from runner.agent.checks import CheckedAgent
from runner.agent.turn_stream import stream_writer
from runner.events import EventSink
from runner.manifest import ModelSpec
from runner.tools.caller import ToolCall
from runner.tools.content import ToolOutput

if TYPE_CHECKING:  # the model is imported when a model is used
    from runner.models import ModelChain

Sampling = Literal["ask", "deny"]


class AgentHost(Protocol):
    """What the agent asks of whoever runs it; :class:`Host` does it for a graph run."""

    @property
    def answers_questions(self) -> bool:
        """False (one-shot runs, the evals): a server's questions during a tool call are declined
        at once, and the tool result tells the model so."""
        ...

    @property
    def sampling(self) -> Sampling:
        """What a server whose entry sets no ``sampling`` gets: ``ask`` declares the capability."""
        ...

    @property
    def client_extensions(self) -> Sequence[ClientExtension]:
        """The MCP extensions the agent's connections announce to every server (the page's MCP
        Apps); read once, when the servers are opened."""
        ...

    def ask(self, server: str, request: types.ElicitRequestParams) -> types.ElicitResult:
        """The user's answer to server ``server``'s elicitation, in the tool's task; may raise to
        pause the graph until it comes."""
        ...

    def approve_sampling(self, server: str, request: types.CreateMessageRequestParams) -> bool:
        """Whether server ``server``'s sampling request may go to the model; may raise to pause."""
        ...

    def progress_sink(self) -> EventSink | None:
        """Where the calling task's tool-call progress goes (None: nowhere)."""
        ...

    def agent(self, checked: CheckedAgent) -> CheckedAgent:
        """The agent as it is run. ``load_agent`` calls it once more on the first manifest, to
        open the checkpointer it names: it must depend on ``checked`` alone."""
        ...

    def model(self, spec: ModelSpec, base_dir: Path) -> ModelChain:
        """The model chain of ``spec``; called when the model spec changed, not at every reload."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any], call: ToolCall) -> ToolOutput:
        """A call the model makes to the tool ``name``; ``call`` is the caller's own."""
        ...


class Host:
    """The host of a graph run: questions and sampling approvals are asked by graph interrupts
    (the turn's reader answers them), progress goes to the graph's stream, and the agent, its
    model and its tool calls are the manifest's own. Hosts that change one of these subclass it.
    """

    def __init__(self, *, answers_questions: bool = True, sampling: Sampling | None = None,
                 client_extensions: Sequence[ClientExtension] = ()) -> None:
        self.answers_questions = answers_questions
        self.sampling: Sampling = sampling or ("ask" if answers_questions else "deny")
        self.client_extensions: Sequence[ClientExtension] = tuple(client_extensions)

    def ask(self, server: str, request: types.ElicitRequestParams) -> types.ElicitResult:
        from runner.agent.graph import ask_by_interrupt

        return ask_by_interrupt(server, request)

    def approve_sampling(self, server: str, request: types.CreateMessageRequestParams) -> bool:
        from runner.agent.sampling import approve_by_interrupt

        return approve_by_interrupt(server, request)

    def progress_sink(self) -> EventSink | None:
        return stream_writer()

    def agent(self, checked: CheckedAgent) -> CheckedAgent:
        return checked

    def model(self, spec: ModelSpec, base_dir: Path) -> ModelChain:
        from runner.models import build_model_chain

        return build_model_chain(spec, base_dir=base_dir, events=self.progress_sink)

    async def call_tool(self, name: str, arguments: dict[str, Any], call: ToolCall) -> ToolOutput:
        return await call(name, arguments)
