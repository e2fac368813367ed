"""The ``agents:`` section: more agents beside the manifest's own, and workflows over them.

An entry is one of five kinds, told apart by the key that only it has::

    agents:
      researcher:                  # a model loop (the default kind)
        description: Finds facts.  # shown to the models that may call it
        tools: [search]            # server keys or tool-name globs; default none
        agents: [writer]           # agents it may call as tools
      writer: {description: Writes.}
      pipeline: {chain: [researcher, writer]}
      fanout: {parallel: [a, b], join: writer}
      triage: {router: [billing, tech], fallback: tech}
      polish: {loop: {generator: writer, evaluator: critic, max_rounds: 3}}
      research: {file: research.yaml}   # another manifest (runner.agent.included)

``main`` names the manifest's own agent wherever an agent is named. Which names exist and whether
calls form a cycle are cross-references: :func:`agent_problems` reports them with their paths.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, model_validator

from runner.manifest.basics import PositiveInt, Spec, UniqueNames
from runner.manifest.model import ModelField

AGENT_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
AGENT_NAME_RULE = (
    "agent names become tool names, so they must start with a lowercase letter and use only "
    "lowercase letters, digits, '_' and '-' (at most 32 characters)"
)
MAIN_AGENT = "main"  # the manifest's own agent, wherever an agent is named

AgentName = Annotated[str, Field(pattern=AGENT_NAME_PATTERN)]
AgentNames = Annotated[UniqueNames, Field(description="Agent names ('main': the manifest's own agent).")]
WORKFLOW_KINDS = ("chain", "parallel", "router", "loop")
FILE_KEY = "file"  # an agent from another manifest file
AGENT_KIND_TAGS = ("model", *WORKFLOW_KINDS, FILE_KEY)  # the union's tags, which error paths leave out
HANDOFFS_DESCRIPTION = (
    "Agents it may hand the conversation to ('main' too): they answer the following turns, "
    "seeing the conversation so far. Handing back to the agent that handed off is always allowed."
)


class _Described(Spec):
    description: str | None = Field(
        None, min_length=1, description="What the agent is for; shown to the models that may call it."
    )


class ModelAgentSpec(_Described):
    """An agent of its own: a model loop over the tools it is given."""

    description: str = Field(  # required here, optional in the other kinds
        min_length=1, description="What the agent is for; shown to the models that may call it."
    )
    model: ModelField | None = Field(
        None, description="The agent's chat model (an id or a mapping); default the manifest's model."
    )
    prompt: str | None = Field(
        None,
        description="System prompt: a template file relative to the manifest or inline Jinja2 text.",
    )
    tools: UniqueNames = Field(
        default_factory=list,
        description="Server keys (all of that server's tools) or globs of tool names "
        "('notes__read_*'). Default none: an agent sees only what it is given.",
    )
    approve: UniqueNames = Field(
        default_factory=list,
        description="Globs of tool names this agent must have approved before each call "
        "(besides the servers' own 'approve').",
    )
    max_steps: PositiveInt | None = Field(
        None, description="Model calls in one run; default agent.max_steps."
    )
    agents: AgentNames = Field(default_factory=list, description="Agents it may call as tools.")
    handoffs: AgentNames = Field(default_factory=list, description=HANDOFFS_DESCRIPTION)


class FileAgentSpec(_Described):
    """An agent from another manifest file: its model, system prompt, servers (their tools, with
    their approvals), max_steps and its own agents. Loading resolves it into a model agent
    (:mod:`runner.agent.included`); its servers join the one fleet."""

    file: str = Field(
        min_length=1,
        description="Another manifest, relative to this one; 'description' here overrides its own.",
    )


class ChainSpec(_Described):
    """Steps run in order, each receiving the previous one's answer."""

    chain: Annotated[AgentNames, Field(min_length=1)]


class ParallelSpec(_Described):
    """The task fanned out to several agents at once; their answers combined by an agent or a template."""

    parallel: Annotated[AgentNames, Field(min_length=2)]
    join: AgentName | None = Field(None, description="An agent given every answer, which writes the result.")
    template: str | None = Field(
        None, min_length=1,
        description="Jinja2 text combining the answers: 'answers' maps each agent to its answer.",
    )

    @model_validator(mode="after")
    def _one_way_to_join(self) -> ParallelSpec:
        if (self.join is None) == (self.template is None):
            raise ValueError("a parallel workflow needs exactly one of 'join' (an agent) or "
                             "'template' (Jinja2 text) to combine the answers")
        return self


class RouterSpec(_Described):
    """A model picks the one agent, by its description, that answers the task."""

    router: Annotated[AgentNames, Field(min_length=2)]
    fallback: AgentName | None = Field(None, description="Taken when the model picks none of them.")
    model: ModelField | None = Field(
        None, description="The model that picks (an id or a mapping); default the manifest's model."
    )

    @model_validator(mode="after")
    def _fallback_is_a_route(self) -> RouterSpec:
        if self.fallback is not None and self.fallback not in self.router:
            raise ValueError(f"fallback '{self.fallback}' is not one of the router's agents")
        return self


class LoopBody(Spec):
    generator: AgentName = Field(description="Writes an answer, then revises it with the evaluator's notes.")
    evaluator: AgentName = Field(
        description="Judges each answer: accepts it, or says what to change."
    )
    max_rounds: PositiveInt = Field(3, description="Answers written at most; the last one is kept.")


class LoopSpec(_Described):
    """A generator and an evaluator, until the evaluator accepts or ``max_rounds``."""

    loop: LoopBody


def _kind(value: Any) -> str | None:
    if isinstance(value, Mapping):
        present = [key for key in (*WORKFLOW_KINDS, FILE_KEY) if key in value]
        return present[0] if present else "model"
    kinds: dict[type, str] = {ModelAgentSpec: "model", ChainSpec: "chain",
             ParallelSpec: "parallel", RouterSpec: "router", LoopSpec: "loop", FileAgentSpec: FILE_KEY}
    return kinds.get(type(value))


def _one_kind(value: Any) -> Any:
    if isinstance(value, Mapping):
        present = [key for key in (*WORKFLOW_KINDS, FILE_KEY) if key in value]
        if len(present) > 1:
            raise ValueError(f"an agent is of one kind: {' and '.join(present)} cannot be used together")
    return value


AgentDefinition = Annotated[
    Annotated[ModelAgentSpec, Tag("model")]
    | Annotated[ChainSpec, Tag("chain")]
    | Annotated[ParallelSpec, Tag("parallel")]
    | Annotated[RouterSpec, Tag("router")]
    | Annotated[LoopSpec, Tag("loop")]
    | Annotated[FileAgentSpec, Tag(FILE_KEY)],
    Discriminator(_kind, custom_error_type="agent_kind",
                  custom_error_message="one agent: a mapping with description and its settings, "
                                       "or one of chain, parallel, router, loop, file"),
    BeforeValidator(_one_kind),
]


def agent_kind(spec: Any) -> str:
    """``model``, ``chain``, ``parallel``, ``router``, ``loop`` or ``file`` (before loading
    resolves it)."""
    kind = _kind(spec)
    assert kind is not None, f"not an agent definition: {type(spec).__name__}"
    return kind


def called_agents(spec: Any) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """The agents ``spec`` calls (as tools, or as the steps of a workflow), each with its path
    inside the entry."""
    if isinstance(spec, ModelAgentSpec):
        for index, name in enumerate(spec.agents):
            yield ("agents", index), name
    elif isinstance(spec, ChainSpec):
        for index, name in enumerate(spec.chain):
            yield ("chain", index), name
    elif isinstance(spec, ParallelSpec):
        for index, name in enumerate(spec.parallel):
            yield ("parallel", index), name
        if spec.join is not None:
            yield ("join",), spec.join
    elif isinstance(spec, RouterSpec):
        for index, name in enumerate(spec.router):
            yield ("router", index), name
    elif isinstance(spec, LoopSpec):
        yield ("loop", "generator"), spec.loop.generator
        yield ("loop", "evaluator"), spec.loop.evaluator


Problems = list[tuple[tuple[str | int, ...], str]]


def agent_problems(
    agents: Mapping[str, Any],
    main_calls: list[str],
    server_keys: list[str],
    separator: str,
    local_tools: Sequence[str] = (),
    main_handoffs: Sequence[str] = (),
    unchecked: Collection[str] = (),
) -> Problems:
    """Unknown agent and server names (with the closest known one), the reserved name ``main``,
    cycles of agents calling each other (with the path of the cycle), and handoffs to an agent
    that cannot take over a conversation. ``unchecked`` names agents left out of ``agents`` because
    their entries are invalid (reported already): they exist, so naming them is no problem, but
    what they call and whether they take a conversation is not known."""
    from runner.manifest import did_you_mean  # the package imports this module

    problems: Problems = []
    names = sorted(agents)
    known = [MAIN_AGENT, *names, *sorted(unchecked)]
    if MAIN_AGENT in agents:
        problems.append((("agents", MAIN_AGENT), "'main' is the manifest's own agent; choose another name"))

    def unknown(path: tuple[str | int, ...], name: str) -> None:
        if name == MAIN_AGENT:
            problems.append((path, "'main' (the manifest's own agent) is not called by other agents"))
        elif name not in known:
            problems.append((path, f"unknown agent '{name}'{did_you_mean(name, known)}"))

    for index, name in enumerate(main_calls):
        unknown(("agent", "agents", index), name)
    for name in names:
        spec = agents[name]
        for where, target in called_agents(spec):
            unknown(("agents", name, *where), target)
        if isinstance(spec, ModelAgentSpec):
            for index, entry in enumerate(spec.tools):
                problem = _tool_entry_problem(entry, server_keys, separator, local_tools)
                if problem:
                    problems.append((("agents", name, "tools", index), problem))
    problems.extend(_cycle_problems(agents, main_calls))
    problems.extend(handoff_problems(agents, main_handoffs, unchecked))
    return problems


def handoff_problems(agents: Mapping[str, Any], main_handoffs: Sequence[str],
                     unchecked: Collection[str] = ()) -> Problems:
    """The ``handoffs`` entries naming no agent (with the closest name), a workflow (only an agent
    with a model of its own answers a conversation), or the agent itself."""
    from runner.manifest import did_you_mean

    problems: Problems = []
    entries: list[tuple[tuple[str, ...], str, Sequence[str]]] = [(("agent",), MAIN_AGENT, main_handoffs)]
    entries += [(("agents", name), name, spec.handoffs) for name, spec in sorted(agents.items())
                if isinstance(spec, ModelAgentSpec)]
    for owner, name, handoffs in entries:
        for index, target in enumerate(handoffs):
            where: tuple[str | int, ...] = (*owner, "handoffs", index)
            if target == name:
                problems.append((where, "an agent cannot hand the conversation to itself"))
            elif target in unchecked:
                continue  # its entry is invalid: whether it could take over is not known
            elif target != MAIN_AGENT and target not in agents:
                problems.append((where, f"unknown agent '{target}'"
                                        f"{did_you_mean(target, [MAIN_AGENT, *sorted(agents)])}"))
            elif target != MAIN_AGENT and not isinstance(agents[target], ModelAgentSpec):
                problems.append((where, f"'{target}' is a {agent_kind(agents[target])} workflow: only an "
                                        "agent with a model answers a conversation handed to it"))
    return problems


def switch_problem(name: str, agents: Mapping[str, Any]) -> str | None:
    """Why the conversation cannot be switched to agent ``name`` (``/agent``, ``--agent``), or None."""
    from runner.manifest import did_you_mean

    choices = conversing_agents(agents)
    if name in choices:
        return None
    if name in agents:
        return (f"'{name}' is a {agent_kind(agents[name])} workflow: a conversation goes to main or "
                f"an agent with a model ({', '.join(choices)})")
    hint = did_you_mean(name, [*choices, *agents])
    return f"unknown agent '{name}'{hint}; the agents: {', '.join(choices)}"


HANDOFF_PREFIX = "handoff_to_"  # a model's tool handing the conversation to the agent named after it
HANDOFF_BACK = "handoff_back"  # the tool of an agent answering a handed conversation: back to who handed it


def handoff_tool_names(agents: Mapping[str, Any], main_handoffs: Sequence[str]) -> list[str]:
    """The names of the handoff tools some model is offered (``handoff_to_NAME``, and
    ``handoff_back`` once any agent can be handed the conversation): tools for ``policy``."""
    targets = {*main_handoffs, *(target for spec in agents.values() if isinstance(spec, ModelAgentSpec)
                                 for target in spec.handoffs)}
    names = [f"{HANDOFF_PREFIX}{target}" for target in sorted(targets)]
    return [*names, HANDOFF_BACK] if names else []


def conversing_agents(agents: Mapping[str, Any]) -> list[str]:
    """The agents a conversation can be handed to, or switched to (``/agent``, ``--agent``):
    ``main`` and every agent with a model of its own."""
    return [MAIN_AGENT, *(name for name, spec in sorted(agents.items()) if isinstance(spec, ModelAgentSpec))]


def _tool_entry_problem(entry: str, server_keys: list[str], separator: str, local_tools: Sequence[str]
                        ) -> str | None:
    """A ``tools`` entry is a server key, a local tool's name, or a (glob of) generated names
    whose server part, when written out, is a server key."""
    from runner.manifest import did_you_mean

    server = entry.split(separator, 1)[0] if separator in entry else entry
    if any(mark in server for mark in "*?[") or entry in local_tools:
        return None  # a glob over servers: it may match none today, and tools come and go
    if server not in server_keys:
        choices = [*server_keys, *local_tools]
        return f"unknown server or local tool '{server}'{did_you_mean(server, choices)}"
    return None


def _cycle_problems(agents: Mapping[str, Any], main_calls: list[str]) -> Problems:
    calls: dict[str, list[tuple[tuple[str | int, ...], str]]] = {
        name: [(where, target) for where, target in called_agents(spec)] for name, spec in agents.items()
    }
    calls[MAIN_AGENT] = [(("agents", index), target) for index, target in enumerate(main_calls)]
    problems: Problems = []
    reported: set[frozenset[str]] = set()
    state: dict[str, Literal["open", "done"]] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for where, target in calls.get(name, []):
            if target not in calls or target == MAIN_AGENT:
                continue  # reported as unknown, or as not callable
            if state.get(target) == "open":
                cycle = [*path[path.index(target):], target]
                if frozenset(cycle) not in reported:
                    reported.add(frozenset(cycle))
                    owner = ("agent",) if name == MAIN_AGENT else ("agents", name)
                    problems.append(((*owner, *where), "agents call each other in a cycle: "
                                                       + " -> ".join(cycle)))
            elif target not in state:
                visit(target, [*path, target])
        state[name] = "done"

    for name in [MAIN_AGENT, *sorted(agents)]:
        if name not in state:
            visit(name, [name])
    return problems
