"""The LangGraph agent: a model node and a tool node around a live tool registry.

A small hand-written ``StateGraph`` rather than ``create_agent``: the tools and the system prompt
are read from providers at every model call and every tool execution, so a tool-list change is seen
at the next step of a running turn, and a checkpointed thread survives recompiling the graph with
another tool set. Tool calls of one model turn run concurrently, one LangGraph task each. Calls that
need approval interrupt the graph first, one at a time, before any call of that step runs, so
re-running the approval node on resume repeats no side effect. A call whose arguments do not fit
its tool's input schema is not asked: the tool node answers the model with the problems.

    START -> model -> (a call needs approval?) -> approve -> tool (one task per call) -> model
                   -> (tool calls, none needing approval) -> tool (one task per call) -> model
                   -> (no tool calls, or max_steps reached) -> END

Each superstep costs a checkpoint, so the common step (no approval) takes two: model, then tools.
The nodes and routes are in :mod:`runner.agent.nodes`; this module wires them together, and holds
the interrupt by which a server's request for input reaches the user.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

import jsonschema
import mcp_types as types
from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt
from pydantic import BaseModel, ConfigDict, model_validator

from runner import sdk
from runner.agent.call_ledger import StartedCalls
from runner.agent.context import ContextWindow
from runner.agent.handoffs import Handoffs
from runner.agent.nodes import (
    APPROVE,
    MODEL,
    SEARCH,
    TOOL,
    AgentState,
    ApprovalNode,
    ApprovalPredicate,
    Approvals,
    ArgumentsCheck,
    CallDispatch,
    DirectToolCall,
    ModelNode,
    ModelRoute,
    PolicyCheck,
    Route,
    SearchNode,
    SystemPromptProvider,
    ToolNode,
    ToolsProvider,
)
from runner.agent.spending import Spending
from runner.agent.structured import StructuredOutput
from runner.agent.turn_stream import naming_agent
from runner.events import ElicitationAsked
from runner.models import ModelChain, as_model_chain
from runner.store.checkpointers import Durability, turn_durability
from runner.tools.asking import count_question
from runner.tools.search import ToolSearch

# --------------------------------------------------------------------------- elicitation


class ElicitationAnswer(BaseModel):
    """The answer to a server's request for input: accept (with the form's values), decline, cancel."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, str | int | float | bool | list[str] | None] | None = None
    # URL mode: the request the answer was given for. The tool runs again on resume and its
    # server may ask with a new id (and a new query string) each time: the answer stands for any
    # request to the same page (origin and path), not for another page.
    elicitation_id: str | None = None
    url: str | None = None


def elicitation_request(server: str, request: types.ElicitRequestParams) -> ElicitationAsked:
    """The interrupt payload (and event) for a server's request for input (form or URL mode)."""
    if isinstance(request, types.ElicitRequestURLParams):
        return naming_agent(ElicitationAsked(type="elicitation", server=server, message=request.message,
                                             mode="url", url=request.url,
                                             elicitation_id=request.elicitation_id))
    return naming_agent(ElicitationAsked(type="elicitation", server=server, message=request.message,
                                         mode="form", schema=request.requested_schema))


def _answer_schema(requested: dict[str, Any] | None) -> type[ElicitationAnswer]:
    """ElicitationAnswer whose accepted content must match the requested schema, so a bad value
    fails the resume (nothing is saved) and the same question can be answered again."""

    class Answer(ElicitationAnswer):
        @model_validator(mode="after")
        def _content_matches(self) -> Answer:
            if self.action == "accept" and requested:
                # The schema's defaults count as given: the server receives them filled in.
                given = {**_defaults(requested), **(self.content or {})}
                problems = sorted(jsonschema.Draft202012Validator(requested).iter_errors(given), key=str)
                if problems:
                    where = ".".join(map(str, problems[0].absolute_path)) or "content"
                    raise ValueError(f"{where}: {problems[0].message}")
            return self

    return Answer


def _defaults(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    return {name: field["default"] for name, field in properties.items()
            if isinstance(field, dict) and "default" in field}


def ask_by_interrupt(server: str, request: types.ElicitRequestParams) -> types.ElicitResult:
    """Interrupt the graph with the request; resume with ``Command(resume={"action": "accept",
    "content": {...}})`` (or decline / cancel). Outside a graph run no one can answer: declined.

    On resume the tool runs again and its server asks again: resume values are matched to
    interrupts by position, so the n-th answer of the call goes to the re-run's n-th question,
    whatever elicitation id the server gave it this time. Only a URL answer that names a
    different page (a retried call asking for the next step) is not taken for this one: the
    request is asked, and counts as one more of the call's questions
    (:func:`runner.tools.asking.count_question`): a server whose every question is new ends the
    call after a few, not the user's patience."""
    try:
        get_config()
    except RuntimeError:  # a direct call (the chat's /call, `mcp-run call`): not in a graph
        return types.ElicitResult(action="decline")
    schema = request.requested_schema if isinstance(request, types.ElicitRequestFormParams) else None
    answer = interrupt(elicitation_request(server, request), response_schema=_answer_schema(schema))
    while isinstance(request, types.ElicitRequestURLParams) and not _answers_url(answer, request):
        count_question(server)
        answer = interrupt(elicitation_request(server, request), response_schema=_answer_schema(None))
    if answer.action != "accept" or isinstance(request, types.ElicitRequestURLParams):
        return types.ElicitResult(action=answer.action)
    return types.ElicitResult(action="accept", content=answer.content or {})


def _answers_url(answer: ElicitationAnswer, request: types.ElicitRequestURLParams) -> bool:
    """Whether ``answer`` was given for ``request``'s page: the same request, the same page (its
    query and fragment may differ), or an answer that names no URL (taken by position)."""
    if answer.url is None or answer.elicitation_id == request.elicitation_id:
        return True
    return _page(answer.url) == _page(request.url)


def _page(url: str) -> tuple[str, str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/")


# --------------------------------------------------------------------------- the graph


def build_graph(
    model: ModelChain | BaseChatModel,
    *,
    tools_provider: ToolsProvider,
    system_prompt_provider: SystemPromptProvider,
    max_steps: int,
    needs_approval: ApprovalPredicate = lambda name: False,
    arguments_fit: ArgumentsCheck = lambda name, arguments: True,
    policy: PolicyCheck | None = None,
    checkpointer: BaseCheckpointSaver | None = None,
    tool_search: ToolSearch | None = None,
    direct_call: DirectToolCall | None = None,
    name: str = "mcp-run",
    output: StructuredOutput | None = None,
    spending: Spending | None = None,
    context: ContextWindow | None = None,
    handoffs: Handoffs | None = None,
    durability: Durability | None = None,
) -> CompiledStateGraph:
    """Compile the agent graph. Invoke with ``{"messages": [HumanMessage(...)]}`` and a thread id;
    resume an approval interrupt with ``Command(resume={"action": "approve"})`` (or deny / edit).

    With ``policy`` (ToolCaller.decide), a call is put to the user when the manifest's policy says
    ``ask`` for its name and arguments (``needs_approval`` is then not asked).

    With ``tool_search``, each model step is offered what it selects (``search_tools``, pinned and
    found tools, or everything below its threshold); ``search_tools`` calls run in the ``search``
    node, which remembers the tools found in the thread's ``found_tools``.

    With ``handoffs`` (:mod:`runner.agent.handoffs`), a call of a handoff tool (which
    ``tools_provider`` offers) hands the conversation over; the main graph's turns start with the
    thread's current agent."""
    approvals = Approvals(needs_approval, arguments_fit, policy)
    dispatch = CallDispatch(max_steps, tool_search)
    graph = StateGraph(AgentState)
    graph.add_node(MODEL, ModelNode(as_model_chain(model), tools_provider, system_prompt_provider,
                                    max_steps, tool_search, output, spending, context))
    graph.add_node(APPROVE, ApprovalNode(tools_provider, approvals))
    # Send targets: they take the Send's ToolTask, not the state, which add_node's types cannot say.
    graph.add_node(TOOL, ToolNode(tools_provider, StartedCalls(checkpointer), tool_search,  # type: ignore[call-overload]
                                  direct_call))
    if handoffs is None:  # else the handoffs say where a turn starts
        graph.add_edge(START, MODEL)
    graph.add_edge(TOOL, MODEL)
    call_nodes = [TOOL, MODEL]
    if tool_search is not None:
        graph.add_node(SEARCH, SearchNode(tool_search))  # type: ignore[call-overload]  # a Send target too
        graph.add_edge(SEARCH, MODEL)
        call_nodes.append(SEARCH)
    if handoffs is None:
        after_model = Route(ModelRoute(approvals, dispatch))
        graph.add_conditional_edges(MODEL, after_model, [APPROVE, *call_nodes, END])
    else:
        graph.add_conditional_edges(MODEL, *handoffs.wire(graph, ModelRoute(approvals, dispatch), approvals,
                                                          dispatch, call_nodes))
    if handoffs is None:  # else a handoff approved goes to its own node
        graph.add_conditional_edges(APPROVE, Route(dispatch), call_nodes)
    compiled = graph.compile(checkpointer=checkpointer, name=name)
    # A model step takes at most three supersteps (model, approve, tool); max_steps is the limit that counts.
    # The durability is the run's default (a caller's own ``durability=`` still wins).
    durability = durability or turn_durability(checkpointer)
    return compiled.with_config(recursion_limit=3 * max_steps + 5,
                                configurable=sdk.durability_config(durability))
