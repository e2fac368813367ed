"""The agents of the manifest's ``agents:`` section, over the one fleet of servers.

Each agent is a compiled graph of its own, run *inside* the tool call of the agent that calls it:
LangGraph then treats it as a subgraph of the turn, so its checkpoints live under the caller's
thread, a question it raises (an approval, a server's form, sampling) interrupts the whole turn and
its answer resumes it where it was, and a run stopped by a crash resumes at the step it reached.
An agent is offered to the agents that name it as a tool taking a task; its final answer is the
tool's result. Workflows (chain, parallel, router, loop) are in :mod:`runner.agent.workflows`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, TypedDict, cast

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field

from runner import sdk, telemetry
from runner.agent.nodes import ArgumentsCheck, DirectToolCall, PolicyCheck, SystemPromptProvider
from runner.agent.spending import Spending, add_usage, latest_totals, turn_ledger
from runner.agent.turn_stream import AGENT_KEY, NAMESPACE, stream_writer
from runner.errors import BuildError, ToolError
from runner.events import Event
from runner.manifest import MAIN_AGENT, AgentDefinition, Manifest, ModelAgentSpec, ModelSpec
from runner.manifest.agents import called_agents
from runner.models import ModelChain
from runner.tools.policy import PolicyDecision

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from runner.agent.handoffs import Handoffs

TASK_DESCRIPTION = (
    "Everything the agent needs to do the task: it does not see this conversation, only this text."
)
ModelMaker = Callable[[ModelSpec], ModelChain]


class AgentTask(BaseModel):
    task: str = Field(min_length=1, description=TASK_DESCRIPTION)


@dataclass(frozen=True)
class TeamParts:
    """What the agents are built from: the manifest, the main agent's tools and checks, and how
    a model is made (the runtime keeps models across reloads)."""

    manifest: Manifest
    base_dir: Path
    catalog_tools: Callable[[], Sequence[BaseTool]]  # every tool of the catalog, as it is now
    server_of: Callable[[str], str | None]  # a catalog tool's server key (None: a local tool)
    direct_call: DirectToolCall
    policy: PolicyCheck  # the manifest's policy (and the servers' tools.approve), as for the main agent
    arguments_fit: ArgumentsCheck
    model_for: ModelMaker
    # An agent's system prompt, by its name and the tools it is given.
    system_prompt_for: Callable[[str, Callable[[], Sequence[BaseTool]]], SystemPromptProvider]
    # What an agent's model steps spend, by its name and model (the turn's budgets are shared).
    spending_for: Callable[[str, ModelSpec], Spending]
    checkpointer: Any = None  # what an agent served on its own keeps its threads in
    # Why a model named by an agent cannot be used here (None: it can); such an agent fails when called.
    model_problem: Callable[[ModelSpec], str | None] = lambda spec: None


@dataclass(frozen=True)
class Team:
    """The built agents: each one's runnable graph, the tool that runs it, and the graph that
    serves it on its own (:func:`hosted_graph`)."""

    graphs: Mapping[str, Runnable[Any, Any]]
    tools: Mapping[str, BaseTool]
    hosted: Mapping[str, CompiledStateGraph]
    # The graph of each agent with a model answering a conversation handed to it (runner.agent.handoffs).
    answering: Mapping[str, Runnable[Any, Any]] = field(default_factory=dict)

    def tools_of(self, names: Sequence[str]) -> list[BaseTool]:
        return [self.tools[name] for name in names if name in self.tools]


def build_team(parts: TeamParts) -> Team:
    """Every agent of ``parts.manifest``, callees before their callers (validation refused cycles)."""
    from runner.agent.workflows import build_workflow  # the workflows use this module's tools

    agents = parts.manifest.agents
    local = {tool.name for tool in parts.catalog_tools() if parts.server_of(tool.name) is None}
    if clashes := sorted(local & set(agents)):
        raise BuildError(f"agent '{clashes[0]}' has the name of a local tool; rename one of them")
    graphs: dict[str, Runnable[Any, Any]] = {}
    tools: dict[str, BaseTool] = {}
    for name in build_order(agents):
        spec = agents[name]
        if isinstance(spec, ModelAgentSpec):
            graph = _model_agent(name, spec, parts, [tools[callee] for callee in spec.agents])
        else:
            graph = build_workflow(name, spec, graphs, parts)
        graphs[name] = graph
        tools[name] = agent_tool(name, agent_tool_description(name, spec), graph, parts.policy)
    hosted = {name: hosted_graph(name, graph, parts.checkpointer) for name, graph in graphs.items()}
    from runner.agent.handoffs import agent_handoffs

    answering = {name: _model_agent(name, spec, parts, [tools[callee] for callee in spec.agents],
                                    agent_handoffs(parts.manifest, name))
                 for name, spec in agents.items() if isinstance(spec, ModelAgentSpec)}
    return Team(graphs, tools, hosted, answering)


def agent_tool_description(name: str, spec: AgentDefinition) -> str:
    """The description of the tool that calls agent ``name``, as its callers' models see it."""
    return spec.description or f"The {name} workflow."


def build_order(agents: Mapping[str, Any]) -> list[str]:
    """Agent names, each after every agent it calls."""
    order: list[str] = []
    placed: set[str] = set()

    def place(name: str) -> None:
        if name in placed or name not in agents:
            return
        placed.add(name)
        for _, callee in called_agents(agents[name]):
            place(callee)
        order.append(name)

    for name in sorted(agents):
        place(name)
    return order


def selected_tools(tools: Sequence[BaseTool], entries: Sequence[str],
                   server_of: Callable[[str], str | None]) -> list[BaseTool]:
    """The tools an agent is given: all of a named server's, the one named exactly, and those
    whose name matches a glob."""
    return [tool for tool in tools if is_given(tool.name, entries, server_of)]


def is_given(name: str, entries: Sequence[str], server_of: Callable[[str], str | None]) -> bool:
    """Whether the tool ``name`` is one the ``tools`` entries of an agent give it."""
    return any(fnmatch.fnmatchcase(name, entry) if _is_glob(entry) else entry in (name, server_of(name))
               for entry in entries)


def _is_glob(entry: str) -> bool:
    return any(mark in entry for mark in "*?[")


def _model_agent(
    name: str, spec: ModelAgentSpec, parts: TeamParts, callees: list[BaseTool],
    handoffs: Handoffs | None = None,  # set: the agent answering a conversation handed to it
) -> Runnable[Any, Any]:
    from runner.agent.graph import build_graph

    manifest = parts.manifest
    handoff_tools = list(handoffs.tools) if handoffs is not None else []

    def given() -> list[BaseTool]:
        return selected_tools(parts.catalog_tools(), spec.tools, parts.server_of) + callees + handoff_tools

    async def direct_call(call: dict[str, Any]) -> ToolMessage | None:
        # A name the agent was not given is not run for it, even if the catalog has it: the tool
        # node then answers that no such tool is offered. (Agents it calls are not the catalog's.)
        given_here = is_given(call["name"], spec.tools, parts.server_of)
        return await parts.direct_call(call) if given_here else None

    def policy(tool_name: str, arguments: dict[str, Any]) -> PolicyDecision | None:
        # The manifest's policy first: a deny or an ask of its own stands; the agent's own
        # 'approve' asks about what it would let run.
        decision = parts.policy(tool_name, arguments)
        asked = any(fnmatch.fnmatchcase(tool_name, glob) for glob in spec.approve)
        if asked and (decision is None or decision.action == "allow"):
            return PolicyDecision("ask", None, f"agents.{name}.approve", None)
        return decision

    model_spec = spec.model or manifest.model
    if (problem := parts.model_problem(model_spec)) is not None:
        return unusable_agent(f"agents.{name}.model: {problem}")
    model = parts.model_for(model_spec)
    return build_graph(
        model,
        tools_provider=given,
        system_prompt_provider=parts.system_prompt_for(name, given),
        max_steps=spec.max_steps or manifest.agent.max_steps,
        policy=policy,
        arguments_fit=parts.arguments_fit,
        checkpointer=None,  # run inside a tool call: the caller's checkpointer, under its thread
        direct_call=direct_call,
        name=name,
        spending=parts.spending_for(name, model_spec),
        handoffs=handoffs,
    )


def unusable_agent(reason: str) -> Runnable[Any, Any]:
    """The graph of an agent whose model cannot be used: each run fails with ``reason`` (a tool
    error for the agent that called it), the other agents unaffected."""
    from langchain_core.runnables import RunnableLambda

    def refuse(_: Any) -> Any:
        raise ToolError(reason)

    return RunnableLambda(refuse)


def agent_tool(name: str, description: str, graph: Runnable[Any, Any], policy: PolicyCheck) -> BaseTool:
    """The tool that runs agent ``name`` on a task and answers with its final answer. The manifest's
    policy judges a call of it as any tool's (an ``ask`` is put to the user before any call runs)."""

    async def run(task: str, config: RunnableConfig, call_id: str | None = None) -> str:
        decision = policy(name, {"task": task})
        if decision is not None and decision.action == "deny":
            raise ToolError(decision.denial(name))
        with telemetry.agent_call(name, len(task)):
            return await run_agent(name, graph, task, config, call_id=call_id)

    return AgentTool(name=name, description=description, args_schema=AgentTask, coroutine=run)


class AgentTool(StructuredTool):
    """The tool of an agent of ``agents:``. The graph's tool node has it answer a call itself
    (:class:`runner.agent.nodes.AnswersCalls`): its arguments checked as the tool's input schema
    checks them, its final answer the call's result, as LangChain's tool layer would make it."""

    async def answer_call(self, call: dict[str, Any], config: RunnableConfig) -> ToolMessage:
        assert self.coroutine is not None  # agent_tool gives every one its run
        task = AgentTask.model_validate(call["args"]).task
        return ToolMessage(content=await self.coroutine(task, config, call["id"]), tool_call_id=call["id"],
                           name=self.name)


async def run_agent(name: str, graph: Runnable[Any, Any], task: str, config: RunnableConfig,
                    *, call_id: str | None = None) -> str:
    """Agent ``name``'s final answer to ``task``. Given the config of the node (or tool call) it
    runs in, its graph is a subgraph of the turn. The turn's stream hears that it started (and
    from which tool call, ``call_id``, when another agent called it; a workflow's step has none),
    and where its own events will come from; the nodes inside it read its name from the metadata."""
    namespace = config.get("configurable", {}).get("checkpoint_ns", "")
    writer = stream_writer()
    resumed = sdk.resuming(config)  # an answer continues it: the turn has heard that it started
    if writer is not None:
        started = {"type": "agent", "agent": name, "caller": "", "task": task, NAMESPACE: namespace}
        if call_id is not None:
            started["call"] = call_id
        if resumed:
            started["resumed"] = True  # where its events come from, not shown as a new start
        writer(cast(Event, started))
    inner: RunnableConfig = {**config, "metadata": {**config.get("metadata", {}), AGENT_KEY: name}}
    with telemetry.agent_run(name, config.get("configurable", {}).get("thread_id"), resumed):
        result = await graph.ainvoke({"messages": [HumanMessage(task)]}, inner)
    return final_answer(result)


class HostedState(TypedDict):
    """The thread of an agent served on its own: the tasks and answers, and what it spent."""

    messages: Annotated[list[AnyMessage], add_messages]
    usage: NotRequired[Annotated[dict[str, dict[str, float]], add_usage]]
    # A turn waiting for an answer (runner.agent.spending).
    turn_usage: NotRequired[Annotated[dict[str, float], latest_totals]]


def hosted_graph(name: str, graph: Runnable[Any, Any], checkpointer: Any
                 ) -> CompiledStateGraph:
    """Agent ``name`` served on its own (``serve``'s tool of that name, the OpenAI API's model):
    a turn's last user message is its task, and its final answer the turn's reply. Its graph runs
    as a subgraph of this one, exactly as inside a caller's tool call, so a question it raises
    interrupts the turn and is resumed on the thread (kept in ``checkpointer``). The thread keeps
    the tasks and answers; the agent sees only the task at hand, as when another agent calls it."""
    from langgraph.graph import END, START, StateGraph

    async def model(state: HostedState, config: RunnableConfig) -> dict[str, Any]:
        task = state["messages"][-1].text
        ledger = turn_ledger(config)
        if ledger is not None:  # the thread's totals are this graph's: its run has only the task's
            ledger.seed(state.get("usage"))
        update: dict[str, Any] = {"messages": [AIMessage(await run_agent(name, graph, task, config))]}
        if ledger is not None and (spent := ledger.take_unsaved()):
            update["usage"] = spent  # the thread's totals (it runs as an agent of 'agents:')
        return update

    builder = StateGraph(HostedState)
    builder.add_node("model", model)  # the node the turn's final answer is read from
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    return builder.compile(checkpointer=checkpointer, name=name)


AGENT_THREAD_SEPARATOR = "@"  # never in a thread id a caller gives (THREAD_PATTERN)


def agent_thread(agent: str, thread_id: str) -> str:
    """The checkpointer's thread id of ``agent``'s thread ``thread_id``: the main agent's is the
    thread id itself, another agent's is ``thread_id@agent``, so serving it on the thread a
    caller names never reads or adds to the main agent's conversation of that name."""
    return thread_id if agent == MAIN_AGENT else f"{thread_id}{AGENT_THREAD_SEPARATOR}{agent}"


def final_answer(state: Mapping[str, Any]) -> str:
    """The text of the last model message of an agent's run."""
    from runner.agent.turns import reply_text

    for message in reversed(state.get("messages", [])):
        if isinstance(message, AIMessage):
            return reply_text(message)
    return ""
