"""One generation of the agent: servers, tools, prompts, model and graph, built from a manifest.

    async with load_agent("agent.yaml") as runtime:
        result = await runtime.graph.ainvoke({"messages": [("user", "hi")]}, runtime.config())

Before anything starts, the manifest is checked as ``mcp-run validate`` checks it
(:func:`runner.checks.check_agent`).
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from runner.checks import CheckedAgent, checked_agent
from runner.errors import BuildError
from runner.graph import build_graph, open_checkpointer
from runner.loading import LoadedManifest
from runner.manifest import Manifest, ServerSpec, StdioServerSpec
from runner.models import ModelChain, build_model_chain
from runner.prompts import (
    PromptCatalog,
    ServerSummary,
    SystemTemplate,
    ToolSummary,
    build_prompt_catalog,
    fetch_prompt_messages,
    parse_command_line,
)
from runner.servers import CatalogueChange, ServerFleet, open_fleet
from runner.tools.catalog import ToolCallHook, ToolCatalog

logger = logging.getLogger(__name__)

PYTHON_COMMANDS = ("python", "python3")
SETTLE_LIMIT = 2.0  # seconds a model step waits at most for announced tool-list changes
DEFAULT_SYSTEM_PROMPT = "You are {name}, an assistant that uses tools to help the user.{description}"

ChangeListener = Callable[[CatalogueChange], Any]
# open_fleet's signature: the servers of the manifest, started and stopped with the agent.
ServersOpener = Callable[..., AbstractAsyncContextManager[ServerFleet]]


def launch_spec(spec: ServerSpec) -> ServerSpec:
    """``python`` in a stdio command means the interpreter running mcp-run (and its packages)."""
    if isinstance(spec, StdioServerSpec) and spec.command in PYTHON_COMMANDS:
        return spec.model_copy(update={"command": sys.executable})
    return spec


@dataclass
class Generation:
    """What one version of the manifest builds on top of the running servers."""

    loaded: LoadedManifest
    catalog: ToolCatalog
    model: ModelChain
    system_template: SystemTemplate | None
    prompt_catalog: PromptCatalog
    graph: CompiledStateGraph | None = None


@dataclass
class Prepared:
    """The parts of a generation that need no server: checked before any server is touched."""

    loaded: LoadedManifest
    model: ModelChain
    system_template: SystemTemplate | None


def prepare(checked: CheckedAgent) -> Prepared:
    loaded = checked.loaded
    model = build_model_chain(loaded.manifest.model, base_dir=loaded.base_dir)
    return Prepared(loaded, model, checked.system_template)


@dataclass
class Runtime:
    """A running agent: the servers, the current generation, and the checkpointer they share.

    The graph reads the tools, the approval rule and the system prompt from here at each step,
    so a new generation (hot reload) or a server's new tool list is seen at the next step.
    """

    fleet: ServerFleet
    checkpointer: Any
    thread_id: str
    generation: Generation = field(init=False)
    listeners: list[ChangeListener] = field(default_factory=list)
    template_paths: set[Path] = field(default_factory=set)  # files watch mode follows
    tool_call_hook: ToolCallHook | None = None  # given to every generation's catalog
    _changes: Any = None  # the fleet's change stream, shared with the follower task

    @property
    def loaded(self) -> LoadedManifest:
        return self.generation.loaded

    @property
    def manifest(self) -> Manifest:
        return self.generation.loaded.manifest

    @property
    def catalog(self) -> ToolCatalog:
        return self.generation.catalog

    @property
    def model(self) -> ModelChain:
        return self.generation.model

    @property
    def prompt_catalog(self) -> PromptCatalog:
        return self.generation.prompt_catalog

    @property
    def graph(self) -> CompiledStateGraph:
        assert self.generation.graph is not None
        return self.generation.graph

    def install(self, prepared: Prepared) -> Generation:
        """Build a generation from ``prepared`` over the servers as they are, and make it current."""
        manifest = prepared.loaded.manifest
        previous = getattr(self, "generation", None)
        same_provider = previous is not None and previous.loaded.manifest.model.id == manifest.model.id
        catalog = ToolCatalog(manifest, self.fleet.connections, prepared.loaded.base_dir,
                              schema_cache=previous.catalog.schema_cache if same_provider else {},
                              call_hook=self.tool_call_hook)
        generation = Generation(prepared.loaded, catalog, prepared.model, prepared.system_template,
                                self._prompt_catalog(manifest))
        generation.graph = build_graph(
            prepared.model,
            tools_provider=lambda: self.catalog.tools,
            system_prompt_provider=self.settled_system_prompt,
            max_steps=manifest.agent.max_steps,
            needs_approval=lambda name: self.catalog.needs_approval(name),
            checkpointer=self.checkpointer,
        )
        self.generation = generation
        return generation

    def config(self, thread_id: str | None = None) -> RunnableConfig:
        return {"configurable": {"thread_id": thread_id or self.thread_id}}

    async def settle(self, limit: float = SETTLE_LIMIT) -> None:
        """Apply every tool-list change the servers have announced so far.

        Called before each model call, so a tool a server adds during a turn (say, as the effect
        of a tool call) is offered at the very next step. Bounded: a server slow to answer its
        re-list is not waited for beyond ``limit``.
        """
        with anyio.move_on_after(limit):
            for connection in list(self.fleet.connections.values()):
                if connection.status == "ready":
                    await connection.changes.settled()
        if self._changes is None:
            return
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
        template = self.generation.system_template
        if template is None:
            description = f" {self.manifest.description}" if self.manifest.description else ""
            return DEFAULT_SYSTEM_PROMPT.format(name=self.manifest.name, description=description)
        servers = [
            ServerSummary(key, connection.status, connection.instructions)
            for key, connection in self.fleet.connections.items()
        ]
        tools = [ToolSummary(entry.name, entry.description) for entry in self.catalog.entries.values()]
        return template.render(servers, tools)

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
                self.generation.prompt_catalog = self._prompt_catalog(self.manifest)
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
    prepare_with: Callable[[CheckedAgent], Prepared] = prepare,
    open_servers: ServersOpener = open_fleet,
    tool_call_hook: ToolCallHook | None = None,
) -> AsyncIterator[Runtime]:
    """Start the agent of manifest ``path``; everything stops when the block ends.

    ``prepare_with``, ``open_servers`` and ``tool_call_hook`` let a caller (the evals) choose the
    model, stand in for the servers, and see every tool call.
    """
    prepared = prepare_with(checked_agent(path, environ=environ))
    loaded = prepared.loaded
    specs = {key: launch_spec(spec) for key, spec in loaded.manifest.servers.items()}
    async with AsyncExitStack() as stack:
        fleet = await stack.enter_async_context(
            open_servers(specs, base_dir=loaded.base_dir, state_dir=loaded.state_dir)
        )
        checkpointer = await stack.enter_async_context(
            open_checkpointer(loaded.manifest.checkpointer, state_dir=loaded.state_dir,
                              base_dir=loaded.base_dir)
        )
        runtime = Runtime(fleet, checkpointer, thread_id or uuid.uuid4().hex[:12],
                          tool_call_hook=tool_call_hook)
        runtime.install(prepared)
        changes = runtime._changes = fleet.subscribe()
        stack.push_async_callback(changes.aclose)

        async def follow_changes() -> None:
            async for change in changes:
                runtime.apply_change(change)

        # The caller's exceptions are re-raised outside the task group, so they arrive unwrapped.
        error: BaseException | None = None
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(follow_changes)
            try:
                yield runtime
            except BaseException as exc:  # re-raised below, once the follower has stopped
                error = exc
            finally:
                task_group.cancel_scope.cancel()
        if error is not None:
            raise error


# --------------------------------------------------------------------------- turns as events


def turn_input(message: str | list[BaseMessage] | Command) -> Any:
    """Graph input for a user message, prompt messages, or an approval answer."""
    if isinstance(message, Command):
        return message
    if isinstance(message, str):
        return {"messages": [HumanMessage(message)]}
    return {"messages": message}


async def stream_turn(
    runtime: Runtime, message: str | list[BaseMessage] | Command, *, thread_id: str | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Run one turn (or resume one) and yield its events as JSON-ready dicts:

    ``token`` (text), ``tool_call`` (name, args, id), ``tool_result`` (name, id, status, text),
    ``approval`` (tool, args, id) — the turn then waits for ``Command(resume=...)`` —, and
    ``final`` (text, reason) when the model answered without tool calls.
    """
    config = runtime.config(thread_id)
    names: dict[str, str] = {}
    stream = runtime.graph.astream(turn_input(message), config, stream_mode=["messages", "updates"])
    async for mode, data in stream:
        if mode == "messages":
            chunk, metadata = data
            if metadata.get("langgraph_node") == "model" and isinstance(chunk, AIMessageChunk):
                if text := chunk.text:
                    yield {"type": "token", "text": text}
            continue
        for node, update in data.items():
            if node == "__interrupt__":
                for pending in update:
                    yield {**pending.value, "type": "approval"}
                continue
            for item in (update or {}).get("messages", []):
                if isinstance(item, AIMessage) and item.tool_calls and node == "model":
                    for call in item.tool_calls:
                        names[call["id"]] = call["name"]
                        yield {"type": "tool_call", "name": call["name"], "args": call["args"],
                               "id": call["id"]}
                elif isinstance(item, AIMessage) and node == "model":
                    reason = item.response_metadata.get("finish_reason")
                    yield {"type": "final", "text": item.text, "reason": reason}
                elif isinstance(item, ToolMessage):
                    yield {"type": "tool_result", "name": names.get(item.tool_call_id, item.name),
                           "id": item.tool_call_id, "status": item.status, "text": _message_text(item)}


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
