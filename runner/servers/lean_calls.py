"""``tools/call`` as ``Client.call_tool`` makes it, at the cost of the work it has to do.

The SDK builds a ``CallToolRequest`` model only to dump it again, validates the answer against the
protocol version's surface and then serialises it (to throw the dump away), and checks structured
content against the output schema with ``best_match(iter_errors(...))`` even when it is valid.
:func:`call_tool` sends the request through the session's own stamp and dispatcher (request ids,
progress, timeouts, cancellation, the 2026 ``Mcp-*`` headers: all theirs), validates the answer
once as the SDK would accept or refuse it, and checks structured content cheaply first: by exact
JSON type when the output schema is a flat object of typed properties (:class:`_Shape`), else with
the compiled validator's ``is_valid``; only content they refuse goes through the SDK's own check,
for its message.
Everything rare goes the SDK's way: a tool the session has not listed (the SDK lists to find its
output schema), an answer that needs input first (``InputRequiredResult``), a claimed result, and a
2026 ``HEADER_MISMATCH`` (re-list, then call again).
"""

from __future__ import annotations

from typing import Any, cast

import anyio
import mcp_types as types
from mcp import Client, ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH
from mcp_types.methods import SERVER_RESULTS, validate_server_result
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError
from referencing.exceptions import Unresolvable

from runner import sdk

CALL_METHOD = "tools/call"
FALLBACK_VERSION = "2025-11-25"  # the SDK's own, before a handshake (ClientSession.send_request)

_surfaces: dict[tuple[str, str], TypeAdapter[Any] | None] = {}


async def call_tool(
    client: Client,
    name: str,
    arguments: dict[str, Any] | None,
    *,
    read_timeout_seconds: float | None,
    progress_callback: ProgressFnT | None = None,
    meta: dict[str, Any] | None = None,
) -> types.CallToolResult:
    """What ``client.call_tool(name, arguments, read_timeout_seconds=..., progress_callback=...,
    meta=...)`` returns or raises."""
    session = client.session

    async def again(responses: types.InputResponses | None, state: str | None) -> Any:
        try:
            return await _sdk_send(client, name, arguments, read_timeout_seconds, progress_callback, meta,
                                   responses, state)
        except MCPError as mismatch:
            if not await _relisted(client, name, read_timeout_seconds, mismatch):
                raise
            return await _sdk_send(client, name, arguments, read_timeout_seconds, progress_callback, meta,
                                   responses, state)

    try:
        first = await _send(session, name, arguments, read_timeout_seconds, progress_callback, meta)
    except MCPError as mismatch:
        if not await _relisted(client, name, read_timeout_seconds, mismatch):
            raise
        first = await _sdk_send(client, name, arguments, read_timeout_seconds, progress_callback, meta,
                                None, None)
    if isinstance(first, types.CallToolResult):
        if not first.is_error:
            await _check_output(session, name, first)
        return first
    return await _sdk_finish(client, name, read_timeout_seconds, first, again)


async def _send(
    session: ClientSession, name: str, arguments: dict[str, Any] | None, timeout: float | None,
    progress: ProgressFnT | None, meta: dict[str, Any] | None,
) -> types.CallToolResult | types.InputRequiredResult | types.Result:
    """One ``tools/call``, sent and validated as ``ClientSession.call_tool`` does it."""
    params: dict[str, Any] = {}
    if meta is not None:  # the request model's dump: the meta map without its None values
        params["_meta"] = {key: value for key, value in meta.items() if value is not None}
    params["name"] = name
    if arguments is not None:
        params["arguments"] = arguments
    raw = await sdk.send_raw(session, {"method": CALL_METHOD, "params": params}, timeout=timeout,
                             progress=progress)
    sdk.clamp_inbound_ttl(raw)
    version = session.protocol_version or FALLBACK_VERSION
    check_result(CALL_METHOD, version, raw)
    if not (foreign := sdk.later_revision_fields(CALL_METHOD, version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return sdk.call_tool_result_adapter(session).validate_python(raw, by_name=False)


def check_result(method: str, version: str, raw: dict[str, Any]) -> None:
    """``validate_server_result``, validated but not also serialised: the SDK throws that dump away,
    and it stops at pydantic's serialisation depth (a tool schema nested some 130 levels)."""
    surface = result_surface(method, version)
    if surface is None:  # an unknown version or method: the SDK says what it says
        try:
            validate_server_result(method, version, raw)
        except KeyError:
            pass
    else:
        surface.validate_python(raw, by_name=False)


def result_surface(method: str, version: str) -> TypeAdapter[Any] | None:
    """The version's result model of ``method``, as ``validate_server_result`` validates it (which
    also serialises what it validated, a third of its cost); None for an unknown version or method."""
    key = (method, version)
    if key not in _surfaces:
        known = version in KNOWN_PROTOCOL_VERSIONS and key in SERVER_RESULTS
        # A union (X | Y) is a type form at run time, but mypy's TypeForm does not take a UnionType value.
        _surfaces[key] = TypeAdapter(SERVER_RESULTS[key]) if known else None  # type: ignore[arg-type]
    return _surfaces[key]


async def _check_output(session: ClientSession, name: str, result: types.CallToolResult) -> None:
    """``ClientSession.validate_tool_result``, with the compiled validator's ``is_valid`` first."""
    schemas = sdk.tool_output_schemas(session)
    if name in schemas:
        schema = schemas[name]
        if schema is None:
            return
        if result.structured_content is not None or "structured_content" in result.model_fields_set:
            validator = sdk.tool_output_validators(session).get(name)  # the SDK's, compiled once
            if validator is None:  # its compiler imports on every call: asked only when needed
                validator = sdk.output_schema_validator(session, name, schema)  # raises as the SDK does
            shape = _shape_of(schema, validator)
            if shape is not None and shape.accepts(result.structured_content):
                return
            try:
                if validator.is_valid(result.structured_content):
                    return
            except Unresolvable:
                pass  # the SDK words it
    await session.validate_tool_result(name, result)  # lists an unknown tool; raises its message


_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly",
                          "writeOnly", "$comment"})
_JSON_TYPES: dict[str, frozenset[type]] = {
    "string": frozenset({str}), "integer": frozenset({int}), "number": frozenset({int, float}),
    "boolean": frozenset({bool}), "null": frozenset({type(None)}), "object": frozenset({dict}),
    "array": frozenset({list}),
}
_SHAPES_KEPT = 256


class _Shape:
    """An output schema that says no more than which properties an object has, which it requires
    and their JSON types: checked by exact Python type (``bool`` is no integer, an integral float
    is one, as in draft 6 and later). ``accepts`` True means the validator accepts too; False
    means nothing (the validator decides)."""

    __slots__ = ("required", "types", "integral", "closed")

    def __init__(self, required: tuple[str, ...], types: dict[str, frozenset[type] | None],
                 integral: frozenset[str], closed: bool) -> None:
        self.required, self.types, self.integral, self.closed = required, types, integral, closed

    def accepts(self, value: Any) -> bool:
        if type(value) is not dict:
            return False
        for name in self.required:
            if name not in value:
                return False
        types = self.types
        for name, item in value.items():
            if name not in types:
                if self.closed:
                    return False
                continue
            accepted = types[name]
            if accepted is not None and type(item) not in accepted:
                if not (type(item) is float and name in self.integral and item.is_integer()):
                    return False
        return True


_shapes: dict[int, tuple[Any, Any, _Shape | None]] = {}  # id(schema) -> (schema, validator, shape)


def _shape_of(schema: Any, validator: Any) -> _Shape | None:
    known = _shapes.get(id(schema))
    if known is not None and known[0] is schema and known[1] is validator:
        return known[2]
    shape = _read_shape(schema, validator)
    if len(_shapes) >= _SHAPES_KEPT:
        _shapes.clear()
    _shapes[id(schema)] = (schema, validator, shape)  # the schema is kept: its id stays its own
    return shape


def _read_shape(schema: Any, validator: Any) -> _Shape | None:
    """The shape of ``schema``, or None when it says more than a shape (any doubt: None)."""
    from jsonschema import Draft7Validator, Draft201909Validator, Draft202012Validator

    if type(validator) not in (Draft7Validator, Draft201909Validator, Draft202012Validator):
        return None
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    understood = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "$schema"}
    if not set(schema) <= understood:
        return None
    closed = schema.get("additionalProperties", True)
    properties, required = schema.get("properties", {}), schema.get("required", [])
    if (closed not in (True, False) or type(properties) is not dict or type(required) is not list
            or not all(type(name) is str for name in required)):
        return None
    types: dict[str, frozenset[type] | None] = {}
    integral = set()
    for name, field in properties.items():
        if field is True:
            types[name] = None
            continue
        if type(field) is not dict or not set(field) - _ANNOTATIONS <= {"type"}:
            return None
        declared = field.get("type")
        if declared is None:
            types[name] = None
            continue
        names = [declared] if type(declared) is str else declared
        if (type(names) is not list or not names
                or not all(type(n) is str and n in _JSON_TYPES for n in names)):
            return None
        types[name] = frozenset().union(*(_JSON_TYPES[n] for n in names))
        if "integer" in names:
            integral.add(name)
    return _Shape(tuple(required), types, frozenset(integral), closed is False)


async def _sdk_send(
    client: Client, name: str, arguments: dict[str, Any] | None, timeout: float | None,
    progress: ProgressFnT | None, meta: dict[str, Any] | None, responses: types.InputResponses | None,
    state: str | None,
) -> Any:
    """One round of ``Client.call_tool``, through the SDK's session."""
    return await client.session.call_tool(
        name, arguments, read_timeout_seconds=timeout, progress_callback=progress,
        input_responses=responses, request_state=state,
        meta=cast("types.RequestParamsMeta | None", meta),  # the SDK's type of the open map
        allow_input_required=True, allow_claimed=True,
    )


async def _relisted(client: Client, name: str, timeout: float | None, mismatch: MCPError) -> bool:
    """``Client.call_tool``'s answer to a 2026 ``HEADER_MISMATCH``: the tool's listed schema is
    missing or stale, so list it again (True: send once more); False for any other error."""
    if mismatch.code != HEADER_MISMATCH or client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    limit = timeout if timeout is not None else client.read_timeout_seconds
    try:
        with anyio.fail_after(limit):
            await sdk.relist_tool(client, name)
    except (MCPError, TimeoutError, ValidationError) as relist_error:
        raise mismatch from relist_error
    return True


async def _sdk_finish(
    client: Client, name: str, timeout: float | None, first: Any, again: Any
) -> types.CallToolResult:
    """An answer that needs input first, or a claimed one: ``Client.call_tool``'s own ending."""
    from mcp.client.extension import ClaimContext

    result = await sdk.drive_input_required(client, first, again)
    if isinstance(result, types.CallToolResult):
        return result
    claim = sdk.result_claim(client, result)
    final = await claim.resolve(
        result, ClaimContext(session=client.session, tool_name=name, read_timeout_seconds=timeout)
    )
    if not final.is_error:
        await client.session.validate_tool_result(name, final)
    return final
