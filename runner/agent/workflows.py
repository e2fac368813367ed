"""Workflows over the manifest's agents: ``chain``, ``parallel``, ``router`` and ``loop``.

Each is a small LangGraph graph whose nodes run member agents (:mod:`runner.agent.team`); run
inside a tool call, it is a subgraph of the turn like any agent, so each step is checkpointed under
the caller's thread (a crashed run resumes at the step it reached) and a member's question
interrupts the turn. Its input is the task as a user message; its output adds the final answer as
a model message, as an agent's run does.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Send

from runner.agent.nodes import Route
from runner.agent.spending import totals, turn_ledger
from runner.agent.team import AgentTask, run_agent, unusable_agent
from runner.agent.turn_stream import stream_writer
from runner.errors import RunnerError
from runner.events import UsageReported
from runner.manifest import ChainSpec, LoopSpec, ParallelSpec, RouterSpec

if TYPE_CHECKING:
    from runner.agent.team import TeamParts

ACCEPT = "ACCEPT"  # how an evaluator's answer starts when it accepts the generator's


def _merged(left: dict[str, str], right: dict[str, str]) -> dict[str, str]:
    return {**left, **right}


class WorkflowState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    answers: NotRequired[Annotated[dict[str, str], _merged]]  # by step (chain, loop) or agent (parallel)
    route: NotRequired[str]  # the router's pick
    rounds: NotRequired[Annotated[int, operator.add]]  # loop: answers written so far
    accepted: NotRequired[bool]  # loop: the evaluator accepted the last answer


class MemberTask(TypedDict):
    member: str
    task: str


def build_workflow(name: str, spec: Any, graphs: Mapping[str, Runnable[Any, Any]], parts: TeamParts
                   ) -> Runnable[Any, Any]:
    """The compiled graph of workflow ``name`` over the already built ``graphs`` of its members."""
    if isinstance(spec, ChainSpec):
        graph = _chain(spec, graphs)
    elif isinstance(spec, ParallelSpec):
        graph = _parallel(spec, graphs)
    elif isinstance(spec, RouterSpec):
        if (problem := parts.model_problem(spec.model or parts.manifest.model)) is not None:
            return unusable_agent(f"agents.{name}.model: {problem}")
        graph = _router(name, spec, graphs, parts)
    elif isinstance(spec, LoopSpec):
        graph = _loop(spec, graphs)
    else:
        raise TypeError(f"not a workflow: {type(spec).__name__}")
    # Run inside a tool call: the caller's checkpointer, under its thread.
    return graph.compile(checkpointer=None, name=name)




def task_of(state: WorkflowState) -> str:
    """The workflow's task: the text of its last user message."""
    for message in reversed(state["messages"]):
        if isinstance(message, HumanMessage):
            return message.text
    return ""


def _finish(key: str) -> Any:
    async def finish(state: WorkflowState) -> dict[str, Any]:
        return {"messages": [AIMessage(state.get("answers", {}).get(key, ""))]}

    return finish


def _chain(spec: ChainSpec, graphs: Mapping[str, Runnable[Any, Any]]) -> StateGraph:
    graph = StateGraph(WorkflowState)
    previous = START
    for index, member in enumerate(spec.chain):
        node = f"{index}-{member}"
        graph.add_node(node, _chain_step(index, member, graphs[member]))
        graph.add_edge(previous, node)
        previous = node
    graph.add_node("answer", _finish(str(len(spec.chain) - 1)))
    graph.add_edge(previous, "answer")
    graph.add_edge("answer", END)
    return graph


def _chain_step(index: int, name: str, member: Runnable[Any, Any]) -> Any:
    async def step(state: WorkflowState, config: RunnableConfig) -> dict[str, Any]:
        given = task_of(state) if index == 0 else state.get("answers", {})[str(index - 1)]
        return {"answers": {str(index): await run_agent(name, member, given, config)}}

    return step


def _parallel(spec: ParallelSpec, graphs: Mapping[str, Runnable[Any, Any]]) -> StateGraph:
    graph = StateGraph(WorkflowState)
    template = JoinTemplate(spec.template) if spec.template is not None else None

    async def fan_out(state: WorkflowState) -> list[Send]:
        return [Send("member", MemberTask(member=member, task=task_of(state))) for member in spec.parallel]

    async def member(task: MemberTask, config: RunnableConfig) -> dict[str, Any]:
        name = task["member"]
        return {"answers": {name: await run_agent(name, graphs[name], task["task"], config)}}

    async def join(state: WorkflowState, config: RunnableConfig) -> dict[str, Any]:
        answers = {name: state.get("answers", {}).get(name, "") for name in spec.parallel}
        if spec.join is not None:
            text = await run_agent(spec.join, graphs[spec.join], joined_task(task_of(state), answers),
                                   config)
        else:
            assert template is not None  # validation: a join agent or a template
            text = template.render(task_of(state), answers)
        return {"messages": [AIMessage(text)]}

    # A Send target: takes a MemberTask. Which error mypy reports depends on the order it checks the
    # import cycle through runner.agent.team in, hence both codes.
    graph.add_node("member", member)  # type: ignore[call-overload, arg-type, unused-ignore]
    graph.add_node("join", join)
    graph.add_conditional_edges(START, Route(fan_out), ["member"])
    graph.add_edge("member", "join")
    graph.add_edge("join", END)
    return graph


def joined_task(task: str, answers: Mapping[str, str]) -> str:
    parts = [f"The task was:\n{task}\n", "Several agents answered it. Combine their answers into one."]
    parts += [f"\n## {name}\n{answer}" for name, answer in answers.items()]
    return "\n".join(parts)


class JoinTemplate:
    """A parallel workflow's ``template``, compiled at its first run and kept for the next ones
    (compiling costs more than the rest of a fan-out's own work)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._compiled: Any = None

    def render(self, task: str, answers: Mapping[str, str]) -> str:
        from jinja2 import TemplateError
        from jinja2.sandbox import SandboxedEnvironment

        try:
            if self._compiled is None:
                self._compiled = SandboxedEnvironment(autoescape=False).from_string(self.source)
            return str(self._compiled.render(task=task, answers=dict(answers)))
        except TemplateError as exc:
            raise RunnerError(f"the parallel workflow's template failed: {exc}") from exc


def _router(name: str, spec: RouterSpec, graphs: Mapping[str, Runnable[Any, Any]], parts: TeamParts
            ) -> StateGraph:
    manifest = parts.manifest
    model = parts.model_for(spec.model or manifest.model)
    spending = parts.spending_for(name, spec.model or manifest.model)  # its step is the router's
    choices = [StructuredTool(name=member, description=_description(manifest, member), args_schema=AgentTask,
                              func=_never_run) for member in spec.router]
    system = ("Choose the one agent best suited to the task, by calling its tool with the task. "
              "Call exactly one.")
    graph = StateGraph(WorkflowState)

    async def route(state: WorkflowState, config: RunnableConfig) -> dict[str, Any]:
        reply = await model.ainvoke([SystemMessage(system), HumanMessage(task_of(state))], tools=choices,
                                    config=config)
        _report_usage(name, reply, spending.after_step(reply, config), config)
        picked = next((call["name"] for call in getattr(reply, "tool_calls", [])
                       if call["name"] in spec.router), None)
        if picked is None and spec.fallback is None:
            raise RunnerError(f"the router picked none of {', '.join(spec.router)} and has no fallback")
        return {"route": picked or spec.fallback}

    async def run(state: WorkflowState, config: RunnableConfig) -> dict[str, Any]:
        text = await run_agent(state["route"], graphs[state["route"]], task_of(state), config)
        return {"messages": [AIMessage(text)]}

    graph.add_node("route", route)
    graph.add_node("run", run)
    graph.add_edge(START, "route")
    graph.add_edge("route", "run")
    graph.add_edge("run", END)
    return graph


def _report_usage(name: str, reply: Any, update: Mapping[str, Any], config: RunnableConfig) -> None:
    """The ``usage`` event of a router's own model step (recorded in the turn's ledger: it counts
    in the budgets and the thread's totals, as an agent's step does)."""
    ledger, writer = turn_ledger(config), stream_writer()
    if ledger is None or writer is None:
        return
    model = reply.response_metadata.get("model_name") if isinstance(reply, AIMessage) else None
    writer(UsageReported(type="usage", agent=name, model=model if isinstance(model, str) else None,
                         step=totals(update["usage"][name]), turn=totals(ledger.turn()),
                         thread=totals(ledger.thread())))


def _never_run(task: str) -> str:
    raise RunnerError("a router's choice is not a tool to run")


def _description(manifest: Any, name: str) -> str:
    return str(manifest.agents[name].description or f"The {name} workflow.")


def _loop(spec: LoopSpec, graphs: Mapping[str, Runnable[Any, Any]]) -> StateGraph:
    body = spec.loop
    graph = StateGraph(WorkflowState)

    async def generate(state: WorkflowState, config: RunnableConfig) -> dict[str, Any]:
        rounds = state.get("rounds", 0)
        answers = state.get("answers", {})
        if rounds == 0:
            given = task_of(state)
        else:
            given = (f"The task:\n{task_of(state)}\n\nYour previous answer:\n{answers['answer']}\n\n"
                     f"A reviewer asked for these changes:\n{answers['review']}\n\nWrite the answer again.")
        answer = await run_agent(body.generator, graphs[body.generator], given, config)
        return {"answers": {"answer": answer}, "rounds": 1}

    async def evaluate(state: WorkflowState, config: RunnableConfig) -> dict[str, Any]:
        given = (f"The task:\n{task_of(state)}\n\nThe answer to judge:\n{state['answers']['answer']}\n\n"
                 f"Reply {ACCEPT} if the answer does the task well; otherwise say what to change.")
        review = await run_agent(body.evaluator, graphs[body.evaluator], given, config)
        return {"answers": {"review": review}, "accepted": review.strip().upper().startswith(ACCEPT)}

    async def again(state: WorkflowState) -> str:
        return "answer" if state.get("accepted") or state.get("rounds", 0) >= body.max_rounds else "generate"

    graph.add_node("generate", generate)
    graph.add_node("evaluate", evaluate)
    graph.add_node("answer", _finish("answer"))
    graph.add_edge(START, "generate")
    graph.add_edge("generate", "evaluate")
    graph.add_conditional_edges("evaluate", Route(again), ["generate", "answer"])
    graph.add_edge("answer", END)
    return graph
