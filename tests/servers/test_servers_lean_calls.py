"""``tools/call`` as mcp-run sends it answers and fails exactly as the SDK's ``Client.call_tool``
does, over stdio and HTTP, in both protocol eras, and puts the same request on the wire; the usual
call skips the SDK's request model and its error search for valid structured content."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import exceptions as jsonschema_exceptions
from mcp import Client, ClientSession, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_servers import answers, command, specs
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runner.servers import lean_calls as calls
from runner.servers import open_fleet

WAIT = 20.0
TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])
ERAS = pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])
CASES: list[tuple[str, dict[str, Any]]] = [
    ("text", {"text": "hello"}),
    ("scored", {"score": 7}),  # structured content the output schema accepts
    ("scored", {"score": "seven"}),  # ... and refuses
    ("scored", {"omit": True}),  # none, though the tool has an output schema
    ("unlisted", {"score": "seven"}),  # not listed yet: the SDK lists it to find its schema
    ("failing", {}),  # an isError result
    ("refused", {}),  # a JSON-RPC error answer
    ("tagged", {"region": "eu-west"}),
]


async def outcome(call: Awaitable[Any]) -> tuple[Any, ...]:
    try:
        with anyio.fail_after(WAIT):
            result = await call
    except (MCPError, RuntimeError, ValueError) as exc:
        return ("raised", type(exc), str(exc), getattr(exc, "code", None))
    return ("answered", result.model_dump())


@asynccontextmanager
async def two_clients(transport: str, legacy: bool, serve_http: Any) -> AsyncIterator[tuple[Client, Client]]:
    """Two SDK clients, each on its own answers server, both having listed its tools once."""
    async with AsyncExitStack() as stack:
        opened = []
        for _ in range(2):
            if transport == "stdio":
                program, argv = command("answers", *(["--legacy"] if legacy else []))
                target: Any = StdioServerParameters(command=program, args=argv)
            else:
                target = serve_http(answers.build(), legacy=legacy)
            client = await stack.enter_async_context(Client(target, cache=None))
            with anyio.fail_after(WAIT):
                await client.list_tools()
            opened.append(client)
        assert opened[0].protocol_version == ("2025-11-25" if legacy else "2026-07-28")
        yield opened[0], opened[1]


@TRANSPORTS
@ERAS
async def test_every_kind_of_answer_comes_back_or_fails_as_the_sdk_call_gives_it(
    transport: str, legacy: bool, serve_http: Any
) -> None:
    async with two_clients(transport, legacy, serve_http) as (theirs, ours):
        for name, arguments in CASES:
            expected = await outcome(theirs.call_tool(name, arguments))
            got = await outcome(calls.call_tool(ours, name, arguments, read_timeout_seconds=WAIT))
            assert got == expected, name


@ERAS
async def test_progress_reaches_the_callback_as_it_does_through_the_sdk(
    legacy: bool, serve_http: Any
) -> None:
    async with two_clients("http", legacy, serve_http) as (theirs, ours):
        seen: dict[str, list[tuple[Any, ...]]] = {"theirs": [], "ours": []}

        def recorder(who: str) -> Callable[[float, float | None, str | None], Awaitable[None]]:
            async def record(done: float, total: float | None, message: str | None) -> None:
                seen[who].append((done, total, message))
            return record

        expected = await outcome(
            theirs.call_tool("progress", {"steps": 3}, progress_callback=recorder("theirs"))
        )
        got = await outcome(calls.call_tool(ours, "progress", {"steps": 3}, read_timeout_seconds=WAIT,
                                            progress_callback=recorder("ours")))
    assert got == expected
    assert seen["ours"] == seen["theirs"] == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@ERAS
async def test_a_call_that_outlives_its_timeout_fails_as_the_sdk_call_fails(
    legacy: bool, serve_http: Any
) -> None:
    async with two_clients("stdio", legacy, serve_http) as (theirs, ours):
        expected = await outcome(theirs.call_tool("slow", {"seconds": 30}, read_timeout_seconds=0.2))
        got = await outcome(calls.call_tool(ours, "slow", {"seconds": 30}, read_timeout_seconds=0.2))
    assert got == expected
    assert expected[:2] == ("raised", MCPError)


async def test_a_result_that_is_no_tools_call_result_fails_as_the_sdk_call_fails() -> None:
    program, argv = command("wire")
    async with AsyncExitStack() as stack:
        theirs, ours = [
            await stack.enter_async_context(
                Client(StdioServerParameters(command=program, args=argv), cache=None)
            )
            for _ in range(2)
        ]
        raised = []
        for call in (theirs.call_tool("junk", {"kind": "bad_result"}),
                     calls.call_tool(ours, "junk", {"kind": "bad_result"}, read_timeout_seconds=WAIT)):
            with anyio.fail_after(WAIT), pytest.raises(Exception) as caught:
                await call
            raised.append((type(caught.value), str(caught.value)))
    assert raised[0] == raised[1]
    assert raised[0][0].__name__ == "ValidationError"


def recording(requests: list[tuple[dict[str, str], dict[str, Any]]]) -> Callable[[ASGIApp], ASGIApp]:
    """Wraps an app so that each ``tools/call`` POST's headers and body are kept."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope["method"] != "POST":
                await app(scope, receive, send)
                return
            chunks: list[Message] = []
            body = b""
            while True:
                message = await receive()
                chunks.append(message)
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            parsed = json.loads(body) if body else None
            if isinstance(parsed, dict) and parsed.get("method") == "tools/call":
                headers = {key.decode(): value.decode() for key, value in scope["headers"]}
                requests.append((headers, parsed))
            replay = iter(chunks)

            async def receive_again() -> Message:
                message = next(replay, None)
                return message if message is not None else await receive()  # then: the disconnect

            await app(scope, receive_again, send)

        return recorded

    return wrap


@ERAS
async def test_the_request_on_the_wire_is_the_one_the_sdk_sends(legacy: bool, serve_http: Any) -> None:
    sent: dict[str, list[tuple[dict[str, str], dict[str, Any]]]] = {"theirs": [], "ours": []}
    meta = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    async with AsyncExitStack() as stack:
        clients = {}
        for who in ("theirs", "ours"):
            url = serve_http(answers.build(), legacy=legacy, wrap=recording(sent[who]))
            clients[who] = await stack.enter_async_context(Client(url, cache=None))
            with anyio.fail_after(WAIT):
                await clients[who].list_tools()
        with anyio.fail_after(WAIT):
            await clients["theirs"].call_tool("tagged", {"region": "eu-west"}, meta=meta)
            await calls.call_tool(clients["ours"], "tagged", {"region": "eu-west"}, read_timeout_seconds=WAIT,
                                  meta=meta)
    ignored = {"content-length", "host", "mcp-session-id"}
    (their_headers, their_body), (our_headers, our_body) = sent["theirs"][0], sent["ours"][0]
    assert {k: v for k, v in our_headers.items() if k not in ignored} == {
        k: v for k, v in their_headers.items() if k not in ignored
    }
    assert {**our_body, "id": None} == {**their_body, "id": None}
    if not legacy:
        assert our_headers["mcp-param-region"] == "eu-west"
        assert our_headers["mcp-name"] == "tagged"


async def test_a_call_skips_the_sdk_request_model_and_the_error_search_for_valid_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    used: list[str] = []
    real_send, real_best_match = ClientSession.send_request, jsonschema_exceptions.best_match

    async def send_request(self: ClientSession, request: Any, *args: Any, **kwargs: Any) -> Any:
        used.append(request.method)
        return await real_send(self, request, *args, **kwargs)

    def best_match(*args: Any, **kwargs: Any) -> Any:
        used.append("best_match")
        return real_best_match(*args, **kwargs)

    monkeypatch.setattr(ClientSession, "send_request", send_request)
    monkeypatch.setattr(jsonschema_exceptions, "best_match", best_match)
    spec = specs.stdio("answers")
    async with open_fleet({"a": spec}, base_dir=tmp_path, state_dir=tmp_path / "state") as fleet:
        connection = fleet.connections["a"]
        with anyio.fail_after(WAIT):
            await connection.wait_for_status("ready")
            used.clear()
            result = await connection.call_tool("scored", {"score": 7})
            assert result.structured_content == {"score": 7}
            assert used == []
            with pytest.raises(Exception, match="Invalid structured content returned by tool scored"):
                await connection.call_tool("scored", {"score": "seven"})
    assert used == ["best_match"]  # the message is the SDK's own


SHAPES = [
    {"type": "object", "properties": {"result": {"type": "string", "title": "Result"}},
     "required": ["result"]},
    {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": ["number", "null"]}}},
    {"type": "object",
     "properties": {"b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"}},
     "additionalProperties": False, "required": ["b"]},
    {"type": "object", "properties": {"any": True, "also": {"description": "anything"}}, "required": ["any"]},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
     "properties": {"n": {"type": "integer"}}},
]
VALUES = [True, 1, 1.0, 1.5, "s", None, {}, [], {"k": 1}]


@pytest.mark.parametrize("schema", SHAPES)
def test_the_quick_output_check_accepts_only_what_the_sdk_validator_accepts(schema: dict[str, Any]) -> None:
    from jsonschema.validators import validator_for

    validator = validator_for(schema)(schema)
    shape = calls._shape_of(schema, validator)
    assert shape is not None
    keys = ["result", "n", "x", "b", "o", "a", "any", "also", "other"]
    contents: list[Any] = [None, [], "text", {}]
    contents += [{key: value} for key in keys for value in VALUES]
    contents += [{"b": value, "o": {}, "a": []} for value in VALUES] + [{"any": 1, "extra": 2}]
    accepted = 0
    for content in contents:
        if shape.accepts(content):
            accepted += 1
            assert validator.is_valid(content), content
        elif validator.is_valid(content):  # what the shape leaves to the validator: only dicts it refuses
            raise AssertionError(f"the shape refused what the validator accepts: {content!r}")
    assert accepted


def test_a_schema_the_quick_check_cannot_read_goes_to_the_validator() -> None:
    from jsonschema.validators import validator_for

    for schema in ({"type": "object", "properties": {"s": {"type": "string", "minLength": 2}}},
                   {"type": "object", "properties": {"s": {"$ref": "#/$defs/s"}},
                    "$defs": {"s": {"type": "string"}}},
                   {"type": "object", "additionalProperties": {"type": "string"}},
                   {"properties": {"s": {"type": "string"}}}):
        assert calls._shape_of(schema, validator_for(schema)(schema)) is None


def test_a_new_validator_for_the_same_schema_object_is_read_again() -> None:
    from jsonschema import Draft4Validator, Draft202012Validator

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert calls._shape_of(schema, Draft202012Validator(schema)) is not None
    assert calls._shape_of(schema, Draft4Validator(schema)) is None  # draft 4: 1.0 is no integer


async def test_a_2026_call_refused_for_a_header_the_tool_was_not_listed_with_lists_and_is_made_again(
    serve_http: Any,
) -> None:
    outcomes = []
    for make in (lambda client: client.call_tool("tagged", {"region": "eu-west"}),
                 lambda client: calls.call_tool(
                     client, "tagged", {"region": "eu-west"}, read_timeout_seconds=WAIT
                 )):
        sent: list[tuple[dict[str, str], dict[str, Any]]] = []
        url = serve_http(answers.build(), wrap=recording(sent))
        async with Client(url, cache=None) as client:  # nothing listed: no Mcp-Param-Region header
            outcomes.append(await outcome(make(client)))
        outcomes.append([headers.get("mcp-param-region") for headers, _ in sent])
    assert outcomes[0] == outcomes[2]
    assert outcomes[0][0] == "answered"
    assert outcomes[1] == outcomes[3] == [None, "eu-west"]  # refused, listed, then sent with the header
