"""Every private member of a third-party package the runner touches, and nowhere else.

The MCP SDK, LangGraph, LangChain and anyio each have a name or two the runner needs and that they
do not make public. Each is reached here through a small named function (or, for the SDK's OAuth
provider, a mixin), with a comment saying why the public API does not do. No other module of
``runner`` names a private member of theirs (``tests/test_sdk_contract.py`` holds that), and the
same test checks that each member used here still exists with the shape relied on, so an upgrade
that moves one fails there, by name, not somewhere in a call. While the MCP SDK's privates are used,
pyproject.toml pins its minor version.

Light on purpose (any layer may import it): the packages are imported inside the functions.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import anyio.abc
    import httpx2
    import mcp_types as types
    from mcp import Client, ClientSession

    # The SDK's stream types; ``mcp.client`` makes public only the ``Transport`` protocol built on
    # them. Types only: nothing of ``mcp.client._transport`` is imported at run time.
    from mcp.client._transport import ReadStream as ReadStream
    from mcp.client._transport import TransportStreams as TransportStreams
    from mcp.client._transport import WriteStream as WriteStream
    from mcp.client.extension import ResultClaim
    from mcp.server.connection import Connection
    from mcp.server.lowlevel import Server
    from mcp.server.session import ServerSession
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from mcp.shared.dispatcher import CallOptions, ProgressFnT
    from pydantic import TypeAdapter

# --- MCP client session --------------------------------------------------------------------------
# ``ClientSession.send_request`` takes a request model, dumps it, and validates the answer whole
# against its method's result: a fast tools/call, a tolerant tools/list and a task-augmented
# tools/call (answered with a CreateTaskResult the tools/call surface refuses) need the raw answer.


async def send_raw(
    session: ClientSession, data: dict[str, Any], *, timeout: float | None,
    progress: ProgressFnT | None = None,
) -> dict[str, Any]:
    """Send request ``data`` (method and params) as ``ClientSession.send_request`` sends it (the
    session's stamp: protocol-version header and 2026 ``_meta``; the session's read timeout unless
    ``timeout``), and return the answer unvalidated. Private: ``_stamp``, ``_dispatcher``,
    ``_session_read_timeout_seconds``; the SDK has no public raw send."""
    options: CallOptions = {}
    session._stamp(data, options)
    options.setdefault("headers", {})  # these requests have no name_param: the stamp names them (2026)
    if timeout is None:
        timeout = session._session_read_timeout_seconds
    if timeout is not None:
        options["timeout"] = timeout
    if progress is not None:
        options["on_progress"] = progress
    return await session._dispatcher.send_raw_request(data["method"], data.get("params"), options)


@functools.cache
def _client_session_module() -> Any:
    # Imported on first use (``validate`` loads no SDK), once: a tool call imports nothing.
    import mcp.client.session

    return mcp.client.session


def clamp_inbound_ttl(raw: dict[str, Any]) -> None:
    """What ``send_request`` does to a raw answer's cache ``ttl`` first (private module function)."""
    _client_session_module()._clamp_inbound_ttl(raw)


def later_revision_fields(method: str, version: str) -> frozenset[str]:
    """The result fields of ``method`` that only a later protocol revision than ``version`` has,
    which ``send_request`` drops before parsing (private module function)."""
    return cast(frozenset[str], _client_session_module()._later_revision_fields(method, version))


def call_tool_result_adapter(session: ClientSession) -> TypeAdapter[Any]:
    """The session's parser of a tools/call answer (it knows the claimed result shapes of the
    session's extensions); private ``_call_tool_adapter``, rebuilt by the SDK at the handshake."""
    return session._call_tool_adapter


def tool_output_schemas(session: ClientSession) -> dict[str, dict[str, Any] | None]:
    """The output schema of each tool the session has listed (private ``_tool_output_schemas``)."""
    return session._tool_output_schemas


def tool_output_validators(session: ClientSession) -> dict[str, Any]:
    """The session's compiled output-schema validators (private ``_tool_output_validators``)."""
    return session._tool_output_validators


def output_schema_validator(session: ClientSession, name: str, schema: dict[str, Any]) -> Any:
    """The session's validator of tool ``name``'s output schema, compiled and kept as the SDK does
    (private ``_output_schema_validator``; raises as ``validate_tool_result`` would)."""
    return session._output_schema_validator(name, schema)


def header_maps(session: ClientSession) -> dict[str, dict[tuple[str, ...], str]]:
    """The 2026 ``x-mcp-header`` maps of the listed tools (private ``_x_mcp_header_maps``)."""
    return session._x_mcp_header_maps


def absorb_tool_listing(session: ClientSession, result: types.ListToolsResult, *, complete: bool) -> None:
    """Take ``result``'s tools into the session's per-tool state as ``list_tools`` does (private
    ``_absorb_tool_listing``: the public ``list_tools`` would send the request itself)."""
    session._absorb_tool_listing(result, complete=complete)


# --- MCP client ----------------------------------------------------------------------------------
# ``Client.call_tool``'s own rare endings, reused by the fast tools/call so that it ends the same way.


async def relist_tool(client: Client, name: str) -> None:
    """``Client.call_tool``'s re-listing after a 2026 ``HEADER_MISMATCH`` (private ``_relist_tool``)."""
    await client._relist_tool(name)


async def drive_input_required(client: Client, first: Any, again: Any) -> Any:
    """``Client.call_tool``'s loop over ``InputRequiredResult`` answers (private
    ``_drive_input_required``: ``again(responses, state)`` sends the next round)."""
    return await client._drive_input_required(first, again)


def result_claim(client: Client, result: Any) -> ResultClaim[Any]:
    """The extension claim that owns ``result``'s shape (private ``_folded_extensions``)."""
    return client._folded_extensions.by_model[type(result)]


# --- MCP server ----------------------------------------------------------------------------------


def session_connection(session: ServerSession) -> Connection:
    """The connection behind a request's session. A low-level handler gets only the per-request
    ``ServerSession``; its ``Connection`` (whose ``exit_stack`` the SDK unwinds when the caller's
    session ends) is the private ``ServerSession._connection``."""
    return session._connection


def http_session_transports(server: Server[Any]) -> list[StreamableHTTPServerTransport]:
    """The transports of the open streamable-HTTP sessions of ``server``. The SDK has no public way
    to list its sessions: its session manager's private ``_server_instances``."""
    return list(server.session_manager._server_instances.values())


# --- MCP client OAuth provider -------------------------------------------------------------------


class OAuthProviderSteps:
    """Public names for the private steps of the SDK's ``OAuthClientProvider`` (and
    ``ClientCredentialsOAuthProvider``), which offer no public hooks to adjust them: a mixin placed
    right before the SDK's provider class, ``class P(Mine, OAuthProviderSteps, OAuthClientProvider)``.

    The SDK calls its steps by their private names; each is handed here to a public-named hook
    whose default is the SDK's own step, so a subclass overrides the hook and calls ``super()``.
    """

    def _sdk(self) -> Any:
        return super()  # the SDK's provider: next after this mixin in the method order

    # The SDK's private steps, handed to the hooks.
    async def _initialize(self) -> None:
        await self.load_state()

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await self.take_token_response(response)

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        return await self.take_refresh_response(response)

    async def _refresh_token(self) -> httpx2.Request:
        return await self.refresh_request()

    def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        return self.authorizing_flow(request)

    async def _exchange_token_authorization_code(self, auth_code: str, code_verifier: str) -> httpx2.Request:
        return await self.code_exchange_request(auth_code, code_verifier)

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        return await self.authorization_code_grant()

    async def _exchange_token_client_credentials(self) -> httpx2.Request:
        return await self.client_credentials_request()

    # The hooks: the SDK's steps unless overridden.
    async def load_state(self) -> None:
        """Load tokens and client information from the storage (``_initialize``)."""
        await self._sdk()._initialize()

    async def take_token_response(self, response: httpx2.Response) -> None:
        """Take a token endpoint's answer to a code or credentials grant (``_handle_token_response``)."""
        await self._sdk()._handle_token_response(response)

    async def take_refresh_response(self, response: httpx2.Response) -> bool:
        """Take the answer to a refresh; False when it failed (``_handle_refresh_response``)."""
        return await self._sdk()._handle_refresh_response(response)

    async def refresh_request(self) -> httpx2.Request:
        """The refresh request to send (``_refresh_token``)."""
        return await self._sdk()._refresh_token()

    def sdk_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's whole flow for one request (``_auth_flow``): token, refresh, discovery, login."""
        return self._sdk()._auth_flow(request)

    def authorizing_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The flow ``async_auth_flow`` drives for one request; the SDK's by default."""
        return self.sdk_flow(request)

    async def code_exchange_request(self, auth_code: str, code_verifier: str) -> httpx2.Request:
        """The authorization code's token request (``_exchange_token_authorization_code``)."""
        return await self._sdk()._exchange_token_authorization_code(auth_code, code_verifier)

    async def authorization_code_grant(self) -> tuple[str, str]:
        """Send the person to authorize; (code, verifier) (``_perform_authorization_code_grant``)."""
        return await self._sdk()._perform_authorization_code_grant()

    async def client_credentials_request(self) -> httpx2.Request:
        """The client credentials grant's token request (``_exchange_token_client_credentials``)."""
        return await self._sdk()._exchange_token_client_credentials()

    @property
    def state_loaded(self) -> bool:
        """Whether the tokens were loaded (private ``_initialized``; a failed refresh resets it)."""
        return bool(cast(Any, self)._initialized)

    def add_auth_header(self, request: httpx2.Request) -> None:
        """Put the current access token on ``request`` (``_add_auth_header``)."""
        cast(Any, self)._add_auth_header(request)


# --- LangGraph -----------------------------------------------------------------------------------


@functools.cache
def _langgraph_constants() -> Any:
    # Imported on first use, once: the tool node reads NS_SEP for every call.
    from langgraph._internal import _constants

    return _constants


def durability_config(durability: str) -> dict[str, Any]:
    """A ``configurable`` that makes ``durability`` a compiled graph's default. ``durability=`` is
    public only per call (``invoke``/``stream``); ``with_config`` takes it under LangGraph's
    private ``CONFIG_KEY_DURABILITY``, and a caller's own ``durability=`` still wins."""
    return {_langgraph_constants().CONFIG_KEY_DURABILITY: durability}


def parent_namespace(namespace: str) -> str:
    """A task's checkpoint namespace without its own last part: its graph's namespace. The
    separator is LangGraph's private ``NS_SEP``."""
    return namespace.rpartition(_langgraph_constants().NS_SEP)[0]


def resuming(config: Mapping[str, Any]) -> bool:
    """Whether the node running with ``config`` continues a run that an interrupt (a question)
    stopped, rather than starting one: LangGraph's private ``CONFIG_KEY_RESUMING``, which it sets
    for the first step of a resumed run and hands down to the subgraphs run inside it."""
    return bool((config.get("configurable") or {}).get(_langgraph_constants().CONFIG_KEY_RESUMING))


def namespace_node(namespace: str) -> str:
    """The node of a checkpoint namespace's last part (``NODE:TASK_ID``, parts joined by the
    private ``NS_SEP`` and ``NS_END``)."""
    constants = _langgraph_constants()
    return namespace.rpartition(constants.NS_SEP)[2].partition(constants.NS_END)[0]


def null_task_id() -> str:
    """The task id of writes that belong to a checkpoint rather than to one of its tasks (private
    ``NULL_TASK_ID``, what LangGraph itself writes them under)."""
    return cast(str, _langgraph_constants().NULL_TASK_ID)


async def add_null_writes(saver: Any, config: Mapping[str, Any], writes: Sequence[tuple[str, Any]]) -> None:
    """Save ``writes`` as writes of no task (:func:`null_task_id`) on the checkpoint ``config``
    names, which the thread's next run applies whatever its input, after those it has already.

    Savers keep one write per task and index, the first one: a second writer's writes would take
    the indexes of the first's and be dropped. Each writer's go after the ones saved, behind as
    many writes of LangGraph's private ``NO_WRITES`` channel (which applying a write skips)."""
    constants = _langgraph_constants()
    saved = await saver.aget_tuple(config)
    pending = (saved.pending_writes or []) if saved is not None else []
    taken = sum(1 for write in pending if write[0] == constants.NULL_TASK_ID)
    padding = [(constants.NO_WRITES, None)] * taken
    await saver.aput_writes(config, [*padding, *writes], constants.NULL_TASK_ID)


# --- LangChain -----------------------------------------------------------------------------------


def chat_model_trace_params(model: Any) -> dict[str, Any]:
    """The ``ls_provider`` / ``ls_model_name`` a chat model reports to tracers (private
    ``_get_ls_params``: LangChain has no public accessor); {} for a model without it."""
    method = getattr(model, "_get_ls_params", None)
    return dict(method()) if method is not None else {}


def chat_model_type(model: Any) -> str | None:
    """A chat model's own type name (the private, abstract ``_llm_type`` every model defines)."""
    value = getattr(model, "_llm_type", None)
    return str(value) if value is not None else None


BUILTIN_PROVIDERS_NAME = "_BUILTIN_PROVIDERS"  # in langchain.chat_models.base


def chat_model_providers() -> dict[str, str]:
    """``init_chat_model``'s providers: name -> the module of its chat model class. LangChain keeps
    them in the private ``langchain.chat_models.base._BUILTIN_PROVIDERS``; read from that module's
    source rather than imported (importing it takes most of a second, which every listing of a real
    model's manifest would pay). Where the source no longer has that shape, it is imported."""
    import ast
    import contextlib
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("langchain")
    if spec is not None and spec.origin is not None:
        source = Path(spec.origin).parent / "chat_models" / "base.py"
        with contextlib.suppress(OSError, SyntaxError, ValueError):
            found = _providers_in(ast.parse(source.read_text(encoding="utf-8")))
            if found:
                return found
    from langchain.chat_models import base  # pragma: no cover - only if LangChain's source moved

    return {name: entry[0] for name, entry in base._BUILTIN_PROVIDERS.items()}


def _providers_in(tree: Any) -> dict[str, str]:
    import ast

    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        named = isinstance(target, ast.Name) and target.id == BUILTIN_PROVIDERS_NAME
        if named and isinstance(value, ast.Dict):
            return {ast.literal_eval(key): ast.literal_eval(entry.elts[0])
                    for key, entry in zip(value.keys, value.values, strict=True)
                    if key is not None and isinstance(entry, ast.Tuple)}
    return {}


def partner_model_profile(package: str, model_name: str) -> dict[str, Any] | None:
    """LangChain's profile of ``model_name`` (what ``model.profile`` of the created model starts
    from), read without creating the model (which would need its API key): the private
    ``<package>.data._profiles._PROFILES`` table of the partner package (``langchain_openai``).
    None where the package ships no such table or it has no entry for the model."""
    import importlib

    try:
        module = importlib.import_module(f"{package}.data._profiles")
    except ImportError:
        return None
    profiles = getattr(module, "_PROFILES", None)
    found = profiles.get(model_name) if isinstance(profiles, dict) else None
    return found if isinstance(found, dict) else None


def inferred_provider(model_id: str) -> str:
    """The provider ``init_chat_model`` reads from ``model_id`` (a prefix, or inferred from the model
    name); ValueError when none. Private ``_parse_model``: the public ``init_chat_model`` would create
    the model too."""
    from langchain.chat_models import base

    return str(base._parse_model(model_id, None)[1])


def saver_cursor(saver: Any, *, pipeline: bool = False) -> Any:
    """An ``async with`` cursor of a LangGraph PostgreSQL saver, on its own connection or pool, as
    its methods take one (private ``AsyncPostgresSaver._cursor``): pruning runs beside them."""
    return saver._cursor(pipeline=pipeline)


# --- Jinja ---------------------------------------------------------------------------------------


class TemplateParseSteps:
    """A Jinja environment whose parsed templates pass through :meth:`parsed_template` before they
    are compiled (private ``jinja2.Environment._parse``, which every compile path calls)."""

    def _parse(self, source: str, name: str | None, filename: str | None) -> Any:
        return self.parsed_template(super()._parse(source, name, filename))  # type: ignore[misc]

    def parsed_template(self, tree: Any) -> Any:
        """The template's tree as it is to be compiled; unchanged by default."""
        return tree


# --- httpx2 --------------------------------------------------------------------------------------


def environment_proxies() -> dict[str, str | None]:
    """The proxies of the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``)
    as mount patterns, read as ``httpx2.AsyncClient(trust_env=True)`` reads them: a client given a
    transport of its own stops reading them, and no public function returns them (private
    ``httpx2._utils.get_environment_proxies``)."""
    from httpx2._utils import get_environment_proxies

    return get_environment_proxies()


# --- anyio ---------------------------------------------------------------------------------------


async def open_process(command: Sequence[str], **options: Any) -> anyio.abc.Process:
    """``anyio.open_process`` with any ``subprocess.Popen`` option (``preexec_fn``): the public
    function takes a fixed list of them; its backend's ``open_process`` (private
    ``anyio._core._eventloop.get_async_backend``) passes the rest through."""
    from anyio._core._eventloop import get_async_backend

    return await get_async_backend().open_process(command, **options)
