"""The agent as an MCP server (the SDK's low-level ``Server``): the ``ask`` tool, the agent's prompt
commands as prompts, and its conversation threads as resources.

Every handler reads the runtime's current generation when it is called, so after a reload
(``serve --watch``) new calls see the new prompts and tools while calls in flight go on. Callers
hear of such a change (:meth:`AgentService.announce_changes`): ``prompts/list_changed`` when the
prompt commands changed (their list, or a binding's server, prompt or fixed arguments),
``tools/list_changed`` when the ``ask`` tool did. 2026-07-28 callers hear it on the
``subscriptions/listen`` streams they opened; 2025-11-25 callers on their session
(:mod:`runner.hosting.mcp.change_notices`: over stdio, and over HTTP with sessions). Served ``stateless``, a
2025-11-25 caller has no session between requests: it is told nothing, and its ``initialize``
answer declares no ``listChanged``.
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from starlette.requests import Request

from runner.agent.runtime import Runtime
from runner.errors import PromptError, RunnerError, ServeError
from runner.hosting.callers import caller_of, thread_in_space, thread_seen_by
from runner.hosting.mcp.ask import (
    AGENT_INPUT_SCHEMA,
    ASK_INPUT_SCHEMA,
    DEFAULT_ANSWER_WITHIN,
    AskHandler,
    agent_tools,
    error_result,
    served_agent,
)
from runner.hosting.mcp.change_notices import AnnouncingServer, LegacySessions
from runner.hosting.mcp.conversations import (
    THREAD_SCHEME,
    TurnScheduler,
    conversation_store,
    listed_threads,
    thread_messages,
    thread_of,
    thread_resource,
    thread_template,
)
from runner.manifest import MAIN_AGENT

RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for an unknown resource


def _caller(ctx: ServerRequestContext[Any]) -> str | None:
    """The caller of a request (its token's; over stdio, the one caller)."""
    return caller_of(ctx.request.scope if isinstance(ctx.request, Request) else None)


def _package_version() -> str:
    try:
        return version("mcp-run")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0"


class AgentService:
    """One agent served to every caller: ``service.server`` is handed to a transport."""

    def __init__(self, runtime: Runtime, scheduler: TurnScheduler | None = None, *,
                 stateless: bool = False, answer_within: float = DEFAULT_ANSWER_WITHIN) -> None:
        self.runtime = runtime
        self.scheduler = scheduler or TurnScheduler()
        self.ask = AskHandler(runtime, self.scheduler, stateless=stateless, answer_within=answer_within)
        self._changes = InMemorySubscriptionBus()  # to the 2026-07-28 callers' listen streams
        self._listening = ListenHandler(self._changes)
        self.sessions = LegacySessions()  # the 2025-11-25 callers' sessions
        self._announced = self._lists()
        self._maybe_changed = anyio.Event()
        manifest = runtime.manifest
        self.server = AnnouncingServer(
            manifest.name,
            announces=not stateless,
            version=_package_version(),
            description=manifest.description,
            instructions=manifest.description,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_subscriptions_listen=self._listening,
            # What tools/list says of ask's input: looked up here, the HTTP transport checks a
            # call's Mcp-Param headers without running a whole tools/list for every call.
            get_tool_input_schema=self._input_schema,
        )
        if not stateless:  # stateless, a 2025-11-25 caller's connection ends with each request
            self.server.middleware.append(self.sessions)

    # ------------------------------------------------------------------ change notifications

    async def stop(self) -> None:
        """The server is stopping: cancel the running turns (each caller hears why), and end every
        caller's listen stream as the spec's graceful close."""
        self._listening.close()
        await self.ask.stop()

    def lists_may_have_changed(self) -> None:
        """The manifest was reloaded or a server's lists changed: :meth:`announce_changes` compares."""
        self._maybe_changed.set()

    async def announce_changes(self) -> None:
        """Until cancelled: tell callers when the prompt commands or the tool changed."""

        def server_lists_changed(change: Any) -> None:  # a server's prompts changed, for one
            self.lists_may_have_changed()

        self.runtime.listeners.append(server_lists_changed)
        try:
            while True:
                await self._maybe_changed.wait()
                self._maybe_changed = anyio.Event()
                lists = self._lists()
                prompts_changed, tools_changed = (
                    now != before for now, before in zip(lists, self._announced, strict=True)
                )
                self._announced = lists
                if prompts_changed:
                    await self._changes.publish(PromptsListChanged())
                if tools_changed:
                    await self._changes.publish(ToolsListChanged())
                await self.sessions.announce(prompts=prompts_changed, tools=tools_changed)
        finally:
            self.runtime.listeners.remove(server_lists_changed)

    def _lists(self) -> tuple[list[Any], list[Any]]:
        """What a change is measured on: the listed prompts with what stands behind each, and the tool."""
        prompts = [(prompt.model_dump(), command.server, command.prompt.name, dict(command.fixed_arguments))
                   for command, prompt in zip(self.runtime.prompt_catalog, self._prompts(), strict=True)]
        return prompts, [tool.model_dump() for tool in agent_tools(self.runtime, self._output_schema())]

    # ------------------------------------------------------------------ tools

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        agent = served_agent(self.runtime, name)
        if agent is None:
            return None
        return ASK_INPUT_SCHEMA if agent == MAIN_AGENT else AGENT_INPUT_SCHEMA

    async def _list_tools(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=agent_tools(self.runtime, self._output_schema()))

    def _output_schema(self) -> dict[str, Any] | None:
        """The answer object's schema (``output:``), or None."""
        contract = self.runtime.generation.checked.output
        return contract.schema if contract is not None else None

    async def _call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                         ) -> types.CallToolResult | types.InputRequiredResult:
        agent = served_agent(self.runtime, params.name)
        if agent is None:
            offered = [f"'{tool.name}'" for tool in agent_tools(self.runtime)]
            if len(offered) == 1:
                return error_result(f"unknown tool '{params.name}': this agent has one tool, {offered[0]}")
            return error_result(f"unknown tool '{params.name}': this agent's tools are {', '.join(offered)}")
        return await self.ask(ctx, params, agent)

    # ------------------------------------------------------------------ prompts

    async def _list_prompts(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=self._prompts())

    def _prompts(self) -> list[types.Prompt]:
        """The prompt commands as prompts, without the arguments the manifest fixes."""
        prompts = []
        for command in self.runtime.prompt_catalog:
            arguments = [argument for argument in command.prompt.arguments or []
                         if argument.name not in command.fixed_arguments]
            prompts.append(types.Prompt(name=command.name, title=command.prompt.title,
                                        description=command.description or None, arguments=arguments))
        return prompts

    async def _get_prompt(self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
                          ) -> types.GetPromptResult:
        """The prompt command's messages, as the server that offers it renders them."""
        try:
            request = self.runtime.prompt_catalog.resolve(params.name, params.arguments or {})
        except PromptError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from exc
        connection = self.runtime.fleet.connections[request.server]
        try:
            result = await connection.get_prompt(request.name, dict(request.arguments))
        except RunnerError as exc:  # the server that offers it failed or refused
            raise MCPError(INTERNAL_ERROR, f"prompt {params.name}: {exc}") from exc
        return types.GetPromptResult(description=result.description, messages=result.messages)

    # ------------------------------------------------------------------ resources

    async def _list_resources(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        try:
            with conversation_store():
                threads = await listed_threads(self.runtime)
        except RunnerError as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from exc
        caller = _caller(ctx)  # a caller lists its own threads only
        seen = [thread_seen_by(caller, thread) for thread in threads]
        return types.ListResourcesResult(resources=[thread_resource(thread) for thread in seen if thread])

    async def _list_resource_templates(self, ctx: ServerRequestContext[Any], params: Any
                                       ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[thread_template()])

    async def _read_resource(self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
                             ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            thread, agent = thread_of(uri, self.runtime.agents)
        except ServeError as exc:
            raise MCPError(RESOURCE_NOT_FOUND, str(exc)) from exc
        try:
            with conversation_store():
                messages = await thread_messages(self.runtime, thread_in_space(_caller(ctx), thread), agent)
        except RunnerError as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from exc
        if messages is None:
            tool = "an ask" if agent == MAIN_AGENT else f"a call of {agent}"
            raise MCPError(RESOURCE_NOT_FOUND, f"no thread {uri.removeprefix(THREAD_SCHEME)}: it has no "
                                               f"messages ({tool} with this thread id starts it, and says "
                                               "new: true)")
        about = {"thread": thread} if agent == MAIN_AGENT else {"thread": thread, "agent": agent}
        text = json.dumps({**about, "messages": messages}, default=str)
        return types.ReadResourceResult(contents=[
            types.TextResourceContents(uri=uri, mime_type="application/json", text=text)])
