"""What the served agent answers to a message that is not one well-formed JSON-RPC message.

The SDK drops such a line on stdio without a word, and over HTTP (2025-11-25) answers with
pydantic's dump of every union member it tried (a kilobyte, code -32602) after opening a session
for it. Both transports check each message here first: JSON that does not parse gets ``-32700``
with the parser's position, anything else ``-32600`` naming the first thing wrong, with the
message's id when it has a usable one; a 2025-11-25 request whose params do not fit its method
``-32602`` naming the fields. A well-formed message goes on to the SDK untouched.
"""

from __future__ import annotations

import codecs
import json
import re
from itertools import accumulate
from typing import Any

import mcp_types as types
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    PROTOCOL_VERSION_META_KEY,
    jsonrpc_message_adapter,
)
from mcp_types.methods import validate_client_request
from pydantic import ValidationError
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_ERRORS_NAMED = 3
BOM_WORDS = "a byte order mark (BOM) before the message"
LEGACY_VERSION = "2025-11-25"  # every earlier version's requests have the same models
MAX_NESTING = 64  # arrays and objects within each other; the parsers recurse and stop near 1,000
# A string, to its end if it is never closed (its brackets are text), and what is not a bracket.
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def refusal(raw: str | bytes) -> types.JSONRPCError | None:
    """None when ``raw`` is one well-formed JSON-RPC message; else the error to answer it with."""
    if too_deep(raw):  # before any parser, which would recurse once per level
        return _error(None, INVALID_REQUEST, f"Invalid Request: {NESTING_WORDS}")
    try:
        message = jsonrpc_message_adapter.validate_json(raw, by_name=False)
    except ValidationError:
        pass  # worded below, from the parsed value: pydantic's words name every union member
    else:
        if isinstance(message, types.JSONRPCRequest):
            return _params_refusal(message)
        if not isinstance(message, types.JSONRPCNotification):
            return None
        # The union takes a request whose id is neither a string nor an integer for a notification
        # (the id dropped): the caller would wait for an answer that never comes.
        value = json.loads(raw)
        if "id" not in value:
            return None
        return _error(None, INVALID_REQUEST, f"Invalid Request: {_bad_id(value['id'])}")
    if isinstance(raw, bytes) and raw.startswith(codecs.BOM_UTF8):  # json.loads would skip it
        return _error(None, PARSE_ERROR, f"Parse error: not JSON ({BOM_WORDS})")
    try:
        # Decoded here, strictly: json.loads would take a UTF-16 or UTF-32 byte order mark.
        value = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        return _error(None, PARSE_ERROR, f"Parse error: not JSON ({_parser_words(exc)})")
    return _error(usable_id(value), INVALID_REQUEST, f"Invalid Request: {_what_is_wrong(value)}")


NESTING_WORDS = f"arrays and objects nested more than {MAX_NESTING} deep are not accepted"


def too_deep(raw: str | bytes, bound: int = MAX_NESTING) -> bool:
    """Whether JSON text nests arrays and objects more than ``bound`` deep, by one linear scan that
    counts brackets outside strings (no parsing, so no recursion)."""
    text = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if text.count(b"[") + text.count(b"{") <= bound:  # nearly every message: no scan needed
        return False
    brackets = _STRINGS.sub(b"", text).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > bound


def _params_refusal(request: types.JSONRPCRequest) -> types.JSONRPCError | None:
    """A 2025-11-25 request whose params its method's model refuses: ``-32602`` naming each field
    (the SDK says "Invalid request parameters" and no more). 2026-07-28 requests (their ``_meta``
    carries the protocol version) and methods the model does not know are left to the SDK, whose
    words for them are clear."""
    params = request.params
    if isinstance(params, dict) and PROTOCOL_VERSION_META_KEY in (params.get("_meta") or {}):
        return None
    try:
        validate_client_request(request.method, LEGACY_VERSION, params)
    except KeyError:  # a method this era does not have: the SDK answers "Method not found"
        return None
    except ValidationError as exc:
        return _error(request.id, INVALID_PARAMS, f"Invalid params: {_located(exc)}")
    return None


def _located(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    named = [f"{'.'.join(map(str, error['loc'])) or 'the message'}: {error['msg']}"
             for error in errors[:MAX_ERRORS_NAMED]]
    more = len(errors) - len(named)
    return "; ".join(named) + (f" (and {more} more)" if more else "")


def _parser_words(exc: ValueError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8: byte {exc.start + 1} is 0x{exc.object[exc.start]:02x}"
    if isinstance(exc, json.JSONDecodeError):
        if exc.msg.startswith("Unexpected UTF-8 BOM"):
            return BOM_WORDS
        words, place = f"{exc.msg[0].lower()}{exc.msg[1:]}", f"line {exc.lineno}, column {exc.colno}"
        return f"{words} {place}" if words.endswith(" at") else f"{words} at {place}"
    return str(exc)


def _bad_id(found: Any) -> str:
    return f'"id" must be a string or an integer, not {_json_kind(found)}'


def _error(message_id: Any, code: int, text: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=message_id, error=types.ErrorData(code=code, message=text))


def usable_id(value: Any) -> str | int | None:
    found = value.get("id") if isinstance(value, dict) else None
    usable = isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool))
    return found if usable else None


def _what_is_wrong(value: Any) -> str:
    if isinstance(value, list):
        return "a batch (JSON array) is not accepted: send one JSON-RPC message at a time"
    if not isinstance(value, dict):
        return f"a JSON-RPC message is a JSON object, not {_json_kind(value)}"
    if value.get("jsonrpc") != "2.0":
        return '"jsonrpc" must be "2.0"'
    if "id" in value and usable_id(value) is None and not ("error" in value and value["id"] is None):
        return _bad_id(value["id"])
    if "method" in value:
        if not isinstance(value["method"], str):
            return f'"method" must be a string, not {_json_kind(value["method"])}'
        if "params" in value and not isinstance(value["params"], dict):
            return f'"params" must be an object, not {_json_kind(value["params"])}'
    elif "result" not in value and "error" not in value:
        return 'no "method" (a request or notification), "result" or "error" (a response)'
    elif "id" not in value:
        return 'a response needs the "id" of the request it answers'
    return _pydantic_words(value)


def _pydantic_words(value: dict[str, Any]) -> str:
    """The first errors of the one union member the message's keys point to, each at its place."""
    model = (types.JSONRPCRequest if "id" in value else types.JSONRPCNotification) if "method" in value \
        else (types.JSONRPCError if "error" in value else types.JSONRPCResponse)
    try:
        model.model_validate(value, by_name=False)
    except ValidationError as exc:
        return _located(exc)
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "a string holds a lone surrogate (\\ud800-\\udfff), which is not Unicode text"
    return "not a request, notification or response"  # valid alone, refused by the union (rare)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction or exponent"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def refuse_malformed(app: ASGIApp, path: str) -> ASGIApp:
    """``app`` behind the check, for POSTs to ``path``: a body that is not JSON by its content type
    gets 415, one that is not one well-formed JSON-RPC message 400, each with a JSON-RPC error,
    before the SDK sees it (so no session is opened for it). Other requests are the SDK's to
    answer. The SDK's own body limit goes first, so no more than it would read is held."""

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != path:
            await app(scope, receive, send)
            return
        content_type = _content_type(scope)
        if content_type != "application/json":
            given = f"not {content_type!r}" if content_type else "and there is none"
            untyped = _error(None, INVALID_REQUEST, f"Invalid Request: the Content-Type must be "
                                                    f"application/json, {given}")
            await _answer(untyped, 415, scope, receive, send)
            return
        body, replay = await buffered(receive)
        refused = refusal(body)
        if refused is None:
            await app(scope, replay, send)
            return
        await _answer(refused, 400, scope, receive, send)

    return RequestBodyLimitMiddleware(checked, DEFAULT_MAX_REQUEST_BODY_SIZE)


async def _answer(problem: types.JSONRPCError, status: int, scope: Scope, receive: Receive,
                  send: Send) -> None:
    answer = Response(problem.model_dump_json(by_alias=True, exclude_unset=True), status_code=status,
                      media_type="application/json")
    await answer(scope, receive, send)


def _content_type(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.decode("latin-1").split(";", 1)[0].strip().lower()
    return ""


async def buffered(receive: Receive) -> tuple[bytes, Receive]:
    """The whole request body, and a ``receive`` that gives it to the app again (then the rest of
    the connection's events: a disconnect)."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the caller went away mid-body
            return b"".join(parts), _replaying(message, receive)
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts), _replaying({"type": "http.request", "body": b"".join(parts)}, receive)


def _replaying(first: Message, receive: Receive) -> Receive:
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
