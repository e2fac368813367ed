"""The running agent: its servers, and the current generation (tools, prompts, model and graph)
built from a manifest over them (:mod:`runner.agent.generation`).

    async with load_agent("agent.yaml") as runtime:
        result = await runtime.graph.ainvoke({"messages": [("user", "hi")]}, runtime.config())

Before anything starts, the manifest is checked as ``mcp-run validate`` checks it
(:func:`runner.agent.checks.check_agent`).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence, Set
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from runner import telemetry
from runner.agent.checks import CheckedAgent, checked_agent, model_id_path
from runner.agent.generation import Generation, render_agent_prompt, render_system_prompt
from runner.agent.host import AgentHost, Host
from runner.agent.reconcile import (
    ReloadReport,
    agent_changes,
    launch_spec,
    rebuilt_parts,
    reconcile_servers,
    start_failures,
)
from runner.agent.turn_stream import current_agent
from runner.agent.watching import resolved
from runner.auth import login_files
from runner.errors import AuthError, BuildError, ManifestError, ModelError, RunnerError
from runner.events import EventSink
from runner.manifest import MAIN_AGENT, Manifest, ModelAgentSpec, ModelSpec
from runner.manifest.loading import LoadedManifest
from runner.prompts import (
    PromptCatalog,
    build_prompt_catalog,
    fetch_prompt_messages,
    parse_command_line,
)
from runner.servers import CatalogueChange, ServerFleet, open_fleet
from runner.servers.inbound_requests import SAMPLING_REFUSED, Completion, Question, Reply, SamplingPolicy
from runner.store.state_folder import state_folder
from runner.task_groups import background_tasks
from runner.tools.caller import ToolCaller
from runner.tools.catalog import ToolCatalog
from runner.tools.policy import PolicyDecision
from runner.tools.provider_schemas import provider_for_model
from runner.tools.search import ToolSearch

if TYPE_CHECKING:  # the model, the graph and LangGraph are imported when a model is used: the
    # commands that only list or call (tools, call, prompts) start without them
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
    from langgraph.graph.state import CompiledStateGraph

    from runner.agent.team import Team
    from runner.models import ModelChain

logger = logging.getLogger(__name__)
UnusableModels = tuple[tuple[ModelSpec, str], ...]  # agents' models that cannot be made, and why

MANIFEST_KEY = "mcp_run_manifest"  # a checkpoint's metadata: the file name of the manifest that wrote it
SETTLE_LIMIT = 2.0  # seconds a model step waits at most for announced tool-list changes
WITHOUT_MODEL = "the agent was started without its model (load_agent(..., model=False)): it has no graph"

ChangeListener = Callable[[CatalogueChange], Any]
# open_fleet's signature: an empty fleet the runtime starts the manifest's servers in.
ServersOpener = Callable[..., AbstractAsyncContextManager[ServerFleet]]


@dataclass
class Runtime:
    """A running agent: the servers, the current generation, and the checkpointer they share.

    :meth:`apply` is the one place that brings the servers and the generation to a checked
    manifest, at start-up (from an empty fleet) and at every reload. The graph reads the tools,
    the approval rule and the system prompt from here at each step, so a new generation or a
    server's new tool list is seen at the next step.

    ``host`` (:class:`runner.agent.host.AgentHost`) is asked what the agent cannot decide: the
    runtime is the host of its tool calls (:class:`runner.tools.caller.CallHost`), answering a
    server's question through it, and completing sampling requests with the agent's model.
    """

    fleet: ServerFleet
    checkpointer: Any
    thread_id: str  # the conversation ``config()`` names when given none
    with_model: bool = True  # False: no model and no graph (listing and calling tools and prompts)
    host: AgentHost = field(default_factory=Host)
    listeners: list[ChangeListener] = field(default_factory=list)
    _generation: Generation | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._changes = self.fleet.subscribe()  # read by follow_changes and settle
        # One caller for the runtime's life: it calls the current catalog's tools, and counts
        # the calls in flight across reloads (a restart waits for them).
        self.caller = ToolCaller(lambda: self.catalog, host=self,
                                 hook=telemetry.tool_hook(self.current_catalog, self.host.call_tool))

    # -- what the tool calls ask of their host -------------------------------------------------

    @property
    def answers_questions(self) -> bool:
        return self.host.answers_questions

    def progress_sink(self) -> EventSink | None:
        return self.host.progress_sink()

    def current_catalog(self) -> ToolCatalog:
        return self.catalog

    @property
    def generation(self) -> Generation:
        if self._generation is None:
            raise RunnerError("the agent has not been started: no manifest applied yet")
        return self._generation

    @property
    def loaded(self) -> LoadedManifest:
        return self.generation.loaded

    @property
    def manifest(self) -> Manifest:
        return self.generation.loaded.manifest

    @property
    def files(self) -> frozenset[Path]:
        """The manifest, every file the current generation was built from, and the token files of
        its http/sse servers that log in (watch mode follows them all)."""
        return self.generation.checked.files | frozenset(self.generation.logins.values())

    def waits_for_login(self, key: str) -> bool:
        """Whether server ``key`` is not running because its authorization failed."""
        connection = self.fleet.connections.get(key)
        return connection is not None and isinstance(connection.error, AuthError)

    def only_token_refreshes(self, changed: Set[Path]) -> bool:
        """Whether ``changed`` holds only token files of running servers: their own refreshes,
        which change nothing the agent is built from."""
        running = {path for key, path in self.generation.logins.items() if not self.waits_for_login(key)}
        return bool(changed) and {resolved(path) for path in changed} <= running

    @property
    def catalog(self) -> ToolCatalog:
        return self.generation.catalog

    @property
    def model(self) -> ModelChain:
        if self.generation.model is None:
            raise RunnerError(WITHOUT_MODEL)
        return self.generation.model

    @property
    def prompt_catalog(self) -> PromptCatalog:
        return self.generation.prompt_catalog

    @property
    def graph(self) -> CompiledStateGraph:
        if self.generation.graph is None:
            raise RunnerError(WITHOUT_MODEL)
        return self.generation.graph

    @property
    def agents(self) -> Mapping[str, CompiledStateGraph]:
        """Every agent's graph to serve on its own, by name: ``main`` (:attr:`graph`) first, then
        those of ``agents:`` (:func:`runner.agent.team.hosted_graph`), as the generation built them."""
        team = self.generation.team
        return {MAIN_AGENT: self.graph, **(team.hosted if team is not None else {})}

    async def apply(self, checked: CheckedAgent, *, changed_files: Set[Path] = frozenset()) -> ReloadReport:
        """Bring the servers and the generation to ``checked``; report what changed.

        The model is built first, so a model that cannot be created changes nothing. Servers no
        longer named stop, new ones start, those whose ``RESTARTS`` fields changed restart once
        their in-flight calls end, the others take their new settings live. At start-up (nothing
        applied yet) a required server that cannot start raises ServerStartError; later it is
        reported in ``failed`` and the rest goes on; an optional one is reported there too, never
        as started. A failed server (its restarts ran out, or it never started) is started again.
        ``changed_files`` (templates, local modules) count as changes of what they feed; a changed
        token file restarts its server if that one waits for a login (``mcp-run auth login`` ran
        meanwhile).
        """
        began = time.perf_counter()
        checked = self.host.agent(checked)
        previous = self._generation
        manifest = checked.loaded.manifest
        model = self._model_for(checked, previous)
        agent_models, unusable = self._agent_models_for(checked, previous, model)
        specs = {key: launch_spec(spec) for key, spec in manifest.servers.items()}
        running = set(self.fleet.connections)
        started, stopped = sorted(set(specs) - running), sorted(running - set(specs))
        kept = sorted(running & set(specs))
        logins = {key: path.resolve() for key, path in login_files(manifest.servers).items()}
        changed = {resolved(path) for path in changed_files}
        logged_in = {key for key in kept if logins.get(key) in changed and self.waits_for_login(key)}
        # A failed server (its restarts ran out, or an optional one that never started) is tried again.
        retried = logged_in | {key for key in kept if self.fleet.connections[key].status == "failed"}
        restarting = retried | {key for key in kept if self.fleet.needs_restart(key, specs[key])}
        not_running = {key for key in stopped if self.fleet.connections[key].status == "failed"}
        restarted: list[str] = []
        failed: dict[str, str] = {}
        if previous is None:
            await self.fleet.start_all({key: specs[key] for key in started})
            failed = start_failures(self.fleet, started)
        else:
            await self.caller.drained(set(stopped) | restarting)
            restarted, failed = await reconcile_servers(self.fleet, specs, kept, retried,
                                                        started=started, stopped=stopped)
        started = [key for key in started if key not in failed]
        stopped = [key for key in stopped if key not in not_running]  # a failed server: nothing stopped
        rebuilt = rebuilt_parts(previous, checked, set(changed_files), with_model=model is not None)
        renamed = previous is not None and previous.loaded.manifest.name != manifest.name
        self._install(checked, model, previous, logins, agent_models, unusable)
        report = ReloadReport(seconds=time.perf_counter() - began, started=started, stopped=stopped,
                              restarted=restarted, rebuilt=rebuilt, failed=failed,
                              renamed=manifest.name if renamed else "",
                              agents=agent_changes(previous, checked, set(changed_files)))
        telemetry.reloaded(report, initial=previous is None)
        return report

    def _model_for(self, checked: CheckedAgent, previous: Generation | None) -> ModelChain | None:
        if not self.with_model:
            return None
        spec = checked.loaded.manifest.model
        if previous is not None and previous.model is not None and previous.loaded.manifest.model == spec:
            return previous.model  # keep the client (and its connection pool)
        try:
            return self.host.model(spec, checked.loaded.base_dir)
        except ModelError as exc:
            if previous is None:
                raise
            # An edit named a model this machine cannot make: said where, as other bad edits are.
            where = model_id_path(checked.loaded)
            raise ManifestError([checked.loaded.source.problem(where, str(exc))]) from exc

    def _agent_models_for(self, checked: CheckedAgent, previous: Generation | None, model: ModelChain | None
                          ) -> tuple[tuple[tuple[ModelSpec, ModelChain], ...], UnusableModels]:
        """The models of the agents that name their own; unchanged ones are kept. A model that
        cannot be made here (its key variable unset, its package missing), at start-up as on a
        reload, is warned about (once, not again while it stays so) and returned apart with the
        reason: only a call of its agent fails, the others and the edit go on."""
        if model is None:
            return (), ()
        from runner.agent.checks import model_specs

        kept = list(previous.agent_models) if previous is not None else []
        known = [spec for spec, _ in previous.unusable_models] if previous is not None else []
        made: list[tuple[ModelSpec, ModelChain]] = []
        unusable: list[tuple[ModelSpec, str]] = []
        for where, spec in model_specs(checked.loaded.manifest)[1:]:
            if spec == checked.loaded.manifest.model or any(spec == other for other, _ in [*made, *unusable]):
                continue
            chain = next((chain for other, chain in kept if other == spec), None)
            if chain is None:
                try:
                    chain = self.host.model(spec, checked.loaded.base_dir)
                except ModelError as exc:
                    if not any(spec == other for other in known):
                        logger.warning("%s: %s; calls of this agent fail until it can be used",
                                       ".".join(where), exc)
                    unusable.append((spec, str(exc)))
                    continue
            made.append((spec, chain))
        return tuple(made), tuple(unusable)

    def _install(
        self,
        checked: CheckedAgent,
        model: ModelChain | None,
        previous: Generation | None,
        logins: Mapping[str, Path],
        agent_models: tuple[tuple[ModelSpec, ModelChain], ...] = (),
        unusable: UnusableModels = (),
    ) -> None:
        """Build a generation from ``checked`` over the servers as they are, and make it current."""
        manifest = checked.loaded.manifest
        same_provider = previous is not None and previous.loaded.manifest.model.id == manifest.model.id
        schema_cache = previous.catalog.schema_cache if same_provider and previous else {}
        catalog = ToolCatalog(manifest, self.fleet.connections, checked.loaded.base_dir,
                              call=self.caller.model_call,
                              schema_cache=schema_cache,
                              warned=previous.catalog.warnings if previous is not None else (),
                              source=checked.loaded.source)
        graph = context = None
        team = None
        tool_search = ToolSearch(lambda: self.catalog, manifest.agent.tool_search)
        if model is not None:
            from runner.agent.context import context_window
            from runner.agent.graph import build_graph
            from runner.agent.included import main_direct_call, main_tools
            from runner.agent.spending import Spending
            from runner.agent.structured import structured_output
            from runner.models.pricing import Pricer

            base_dir = checked.loaded.base_dir
            context = context_window(manifest.context, model,
                                     lambda model_id: self.host.model(ModelSpec(id=model_id), base_dir))

            team = self._team(checked, catalog, model, agent_models, unusable)
            offered = team.tools_of(manifest.agent.agents) if team is not None else []
            handoffs = None
            if team is not None and team.answering:  # the conversation can go to another agent
                from runner.agent.handoffs import main_handoffs

                handoffs = main_handoffs(manifest, team.answering)
                offered = [*offered, *handoffs.tools]
            hidden = checked.hidden_servers  # servers only agents from other files use
            tool_search = ToolSearch(lambda: self.catalog, manifest.agent.tool_search, beside=offered,
                                     hidden_servers=hidden)
            graph = build_graph(
                model,
                tools_provider=lambda: [*main_tools(catalog, hidden), *offered],
                system_prompt_provider=self.settled_system_prompt,
                max_steps=manifest.agent.max_steps,
                arguments_fit=lambda name, arguments: not self.caller.argument_problems(name, arguments),
                policy=self.caller.decide,
                checkpointer=self.checkpointer,
                tool_search=tool_search,
                direct_call=main_direct_call(self.caller.run_tool_call, catalog, hidden),
                output=structured_output(checked.output, manifest.model),
                spending=Spending(Pricer(manifest.model), model.primary, manifest.limits),
                context=context,
                handoffs=handoffs,
                durability=_turn_durability(self.checkpointer, several_agents=bool(manifest.agents)),
            )
        self._generation = Generation(checked, catalog, model, self._prompt_catalog(manifest), logins,
                                      graph=graph, tool_search=tool_search, agent_models=agent_models,
                                      unusable_models=unusable,
                                      context=context, team=team)

    def _team(self, checked: CheckedAgent, catalog: ToolCatalog, model: ModelChain,
              agent_models: tuple[tuple[ModelSpec, ModelChain], ...],
              unusable: UnusableModels = ()) -> Team | None:
        """The agents of ``agents:`` (None: there are none), built over the same catalog and
        caller as the main agent: one fleet for every agent."""
        manifest = checked.loaded.manifest
        if not manifest.agents:
            return None
        from runner.agent.spending import Spending
        from runner.agent.team import TeamParts, build_team
        from runner.models.pricing import Pricer

        def model_for(spec: ModelSpec) -> ModelChain:
            chain = _chain_for(spec, manifest.model, model, agent_models)
            assert chain is not None  # build_team asks only for the models model_problem accepts
            return chain

        def system_prompt_for(name: str, tools: Callable[[], Sequence[BaseTool]]) -> Callable[[], Any]:
            async def prompt() -> str:
                await self.settle()
                return render_agent_prompt(self.generation, name, self.fleet.connections, tools())
            return prompt

        def server_of(name: str) -> str | None:
            entry = catalog.entries.get(name)
            return entry.origin.server if entry is not None else None

        return build_team(TeamParts(
            manifest=manifest, base_dir=checked.loaded.base_dir,
            catalog_tools=lambda: catalog.tools, server_of=server_of,
            direct_call=self.caller.run_tool_call,
            policy=self.caller.decide,
            arguments_fit=lambda name, arguments: not self.caller.argument_problems(name, arguments),
            model_for=model_for, system_prompt_for=system_prompt_for, checkpointer=self.checkpointer,
            model_problem=lambda spec: next((reason for s, reason in unusable if s == spec), None),
            spending_for=lambda name, spec: Spending(Pricer(spec), model_for(spec).primary, manifest.limits,
                                                     agent=name),
        ))

    async def answer(self, server: str, request: Question) -> Reply:
        """A server's question during a tool call, answered by the host (sampling: the host
        approves, the model of the agent making the call completes). Called in the call's task."""
        if isinstance(request, types.CreateMessageRequestParams):
            if not self.host.approve_sampling(server, request):
                return types.ErrorData(code=SAMPLING_REFUSED, message="the user refused the sampling request")
            return await self.sample(server, request, current_agent())
        return self.host.ask(server, request)

    async def sample(
        self, server: str, request: types.CreateMessageRequestParams, agent: str | None
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools:
        """A completion for server ``server`` from the model of ``agent``, the agent of ``agents:``
        whose tool call the server serves (None: the main agent; see :meth:`model_of`)."""
        from runner.agent.sampling import complete

        def policy(tool: str, arguments: dict[str, Any]) -> tuple[str, PolicyDecision | None]:
            return self.caller.decide_offered(server, tool, arguments)

        spec, model = self.model_of(agent)
        return await complete(model, request, provider=provider_for_model(spec.id), policy=policy)

    def model_of(self, agent: str | None) -> tuple[ModelSpec, ModelChain]:
        """The model ``agent`` runs on, and its spec: the ``model`` of its own (a ``file:`` agent's
        is its file's), else the manifest's: the main agent's (None), a workflow's, and that of an
        agent a reload removed while its call ran. ModelError when its own cannot be made here."""
        manifest = self.manifest
        spec = manifest.agents.get(agent) if agent is not None else None
        own = spec.model if isinstance(spec, ModelAgentSpec) else None
        if own is None:
            return manifest.model, self.model
        chain = _chain_for(own, manifest.model, self.model, self.generation.agent_models)
        if chain is None:
            reason = next((why for unusable, why in self.generation.unusable_models if unusable == own),
                          "its model is not made")
            raise ModelError(f"agents.{agent}.model: {reason}")
        return own, chain

    def use_thread(self, thread_id: str) -> None:
        """Make ``thread_id`` the conversation ``config()`` names when given none (the chat's
        ``/thread``, a resumed ``--thread``)."""
        self.thread_id = thread_id

    def config(self, thread_id: str | None = None, *, agent: str = MAIN_AGENT) -> RunnableConfig:
        """The config of thread ``thread_id`` of ``agent``: an agent of ``agents:`` served on its
        own keeps its threads apart from the main agent's (:func:`runner.agent.team.agent_thread`).
        Its :data:`MANIFEST_KEY` names the manifest's file in every checkpoint the thread writes, so
        two manifests sharing a store each list only their own threads (:func:`own_thread`)."""
        from runner.agent.team import agent_thread

        return {"configurable": {"thread_id": agent_thread(agent, thread_id or self.thread_id),
                                 MANIFEST_KEY: self.loaded.path.name}}

    def own_thread(self, metadata: Mapping[str, Any] | None) -> bool:
        """Whether a checkpoint of this ``metadata`` was written by this manifest (or by a version
        that named none: it cannot be told apart)."""
        written_by = (metadata or {}).get(MANIFEST_KEY)
        return written_by is None or written_by == self.loaded.path.name

    async def follow_changes(self) -> None:
        """Apply the fleet's catalogue changes as they arrive, until cancelled."""
        async with self._changes:
            async for change in self._changes:
                self.apply_change(change)

    async def settle(self, limit: float = SETTLE_LIMIT) -> None:
        """Apply every tool-list change the servers have announced so far.

        Called before each model call, so a tool a server adds during a turn (say, as the effect
        of a tool call) is offered at the very next step. Bounded: a server slow to answer its
        re-list is not waited for beyond ``limit``.
        """
        unsettled = [connection for connection in self.fleet.connections.values()
                     if connection.status == "ready" and not connection.changes.is_settled]
        if unsettled:  # the common step has none: no timer, no wait
            with anyio.move_on_after(limit):
                for connection in unsettled:
                    await connection.changes.settled()
        while True:
            try:
                change = self._changes.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return
            self.apply_change(change)

    async def settled_system_prompt(self) -> str:
        await self.settle()
        return self.system_prompt()

    def system_prompt(self) -> str:
        """The system prompt as of now: templates see the servers and tools currently live."""
        return render_system_prompt(self.generation, self.fleet.connections)

    def _prompt_catalog(self, manifest: Manifest) -> PromptCatalog:
        listings = {
            key: connection.prompts
            for key, connection in self.fleet.connections.items()
            if connection.status != "failed" and key in manifest.servers
        }
        return build_prompt_catalog(manifest, listings)

    async def prompt_messages(self, line: str) -> list[BaseMessage]:
        """The messages of a chat slash command such as ``/review language=python``."""
        name, arguments = parse_command_line(line)
        request = self.prompt_catalog.resolve(name, arguments)
        connection = self.fleet.connections[request.server]
        return await fetch_prompt_messages(connection, request.name, request.arguments, request.prompt)

    def apply_change(self, change: CatalogueChange) -> None:
        """A server's lists changed: rebuild what depends on them, then tell the listeners."""
        try:
            if change.kind in ("tools", "resources"):
                self.catalog.rebuild()
            elif change.kind == "prompts":
                prompts = self._prompt_catalog(self.manifest)
                self._generation = replace(self.generation, prompt_catalog=prompts)
        except BuildError as exc:
            # The previous tools stay in place: a server that starts colliding is reported, not fatal.
            logger.error("after a change on %s: %s", change.server, exc)
        for listener in self.listeners:
            listener(change)


@asynccontextmanager
async def load_agent(
    path: str | Path,
    *,
    thread_id: str | None = None,
    environ: Mapping[str, str] | None = None,
    model: bool = True,
    host: AgentHost | None = None,
    open_servers: ServersOpener = open_fleet,
) -> AsyncIterator[Runtime]:
    """Start the agent of manifest ``path``; everything stops when the block ends.

    ``host`` (:class:`runner.agent.host.AgentHost`, default :class:`runner.agent.host.Host`) is
    what the agent asks of whoever runs it. ``Host(answers_questions=False)`` (one-shot runs): a
    server's request for input during a tool call is declined at once, and the tool result tells
    the model so. Otherwise the request interrupts the graph (an ``elicitation`` event) until it
    is resumed with the answer. Its ``sampling`` is what a server whose entry sets no
    ``sampling`` gets; ``ask`` declares the capability (servers may list tools for it), and each
    request is asked, or declined at once when no one answers questions.

    Server logs and the default conversation store go to the state folder
    (:func:`runner.store.state_folder.state_folder`: ``.mcp-run`` beside the manifest, else a per-user one).

    ``model=False`` starts the servers, tools and prompts only: the chat model is never built (nor
    its credentials needed) and ``runtime.graph`` raises RunnerError.

    The host also changes every generation (the agent, its model, its tool calls: the evals
    record and replay through it); ``open_servers`` stands in for :func:`runner.servers.open_fleet`
    (the evals' replay serves recorded listings).
    """
    # Reading files and making folders happen in a worker thread: a server hosting the agent
    # (LangGraph's) refuses blocking calls on its event loop.
    host = host if host is not None else Host()
    checked = await anyio.to_thread.run_sync(partial(checked_agent, path, environ=environ, turns=model))
    loaded = host.agent(checked).loaded  # its checkpointer
    state_dir = await anyio.to_thread.run_sync(partial(state_folder, loaded, environ=environ))
    async with AsyncExitStack() as stack:
        stack.enter_context(
            telemetry.session(loaded, os.environ if environ is None else environ, required=model))
        runtime: Runtime | None = None  # made once the servers are open; sampling waits for it

        async def sample(server: str, request: types.CreateMessageRequestParams, agent: str | None
                         ) -> Completion:
            assert runtime is not None  # servers start after the runtime is made
            return await runtime.sample(server, request, agent)

        sampling = SamplingPolicy(host.sampling, sample if model else None)
        fleet = await stack.enter_async_context(
            open_servers({}, base_dir=loaded.base_dir, state_dir=state_dir, sampling=sampling,
                         extensions=host.client_extensions)
        )
        checkpointer = None
        if model:
            from runner.store.checkpointers import open_checkpointer

            checkpointer = await stack.enter_async_context(
                open_checkpointer(loaded.manifest.checkpointer, state_dir=state_dir, base_dir=loaded.base_dir)
            )
        runtime = Runtime(fleet, checkpointer, thread_id or uuid.uuid4().hex[:12], with_model=model,
                          host=host)
        await runtime.apply(checked)

        async with background_tasks() as task_group:  # the caller's exceptions arrive unwrapped
            task_group.start_soon(runtime.follow_changes)
            yield runtime


def _chain_for(spec: ModelSpec, main_spec: ModelSpec, main: ModelChain,
               agent_models: Sequence[tuple[ModelSpec, ModelChain]]) -> ModelChain | None:
    """The chain of model ``spec``: the main one (``main_spec``), or an agent's (None: not made)."""
    return main if spec == main_spec else next((chain for made, chain in agent_models if made == spec), None)


def _turn_durability(checkpointer: Any, *, several_agents: bool) -> Any:
    # Imported here: `tools`, `call` and `prompts` build no graph and should not pay for LangGraph.
    from runner.store.checkpointers import turn_durability

    return turn_durability(checkpointer, several_agents=several_agents)
