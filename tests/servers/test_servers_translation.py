"""The one table that turns MCP SDK, anyio, httpx and pydantic errors into runner errors."""

from __future__ import annotations

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from runner.errors import (
    AuthError,
    ErrorKind,
    RunnerError,
    ServerClosedError,
    ServerRequestError,
    ServerStartError,
    ServerTimeoutError,
)
from runner.servers.translation import Boundary, translate, translated

BOUNDARY = Boundary("demo", "tools/call 'echo'", 2.0, "servers.demo.timeout")


def mcp_error(code: int, message: str = "nope") -> MCPError:
    return MCPError(code, message)


def validation_error() -> ValidationError:
    class Answer(BaseModel):
        value: int

    try:
        Answer.model_validate({"value": "x"})
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


@pytest.mark.parametrize(("foreign", "expected", "words"), [
    (mcp_error(types.METHOD_NOT_FOUND), ServerRequestError, "nope (code -32601)"),
    (mcp_error(types.REQUEST_TIMEOUT), ServerTimeoutError, "timed out after 2s (set servers.demo.timeout"),
    (mcp_error(types.CONNECTION_CLOSED, "Connection closed"), ServerClosedError, "the connection closed"),
    (mcp_error(types.CONNECTION_CLOSED, "SSE stream failed: too big"), ServerClosedError,
     "the connection closed (SSE stream failed: too big)"),
    (TimeoutError(), ServerTimeoutError, "timed out after 2s"),
    (anyio.ClosedResourceError(), ServerClosedError, "the connection closed"),
    (anyio.BrokenResourceError(), ServerClosedError, "the connection closed"),
    (anyio.EndOfStream(), ServerClosedError, "the connection closed"),
    (validation_error(), ServerRequestError, "not valid MCP"),
    (httpx2.ConnectError("refused"), ServerClosedError, "cannot reach the server"),
    (httpx2.RemoteProtocolError("bad answer from http://ann:CANARYpw@h/mcp?token=CANARYtok"),
     ServerClosedError, "RemoteProtocolError: bad answer from http://ann:***@h/mcp?token=***"),
    (ConnectionResetError("reset"), ServerClosedError, "ConnectionResetError: reset"),
    (RuntimeError("not connected"), ServerRequestError, "not connected"),
])
def test_each_foreign_error_has_one_runner_error(
    foreign: Exception, expected: type[RunnerError], words: str
) -> None:
    error = translate(BOUNDARY, foreign)
    assert type(error) is expected
    assert error.server == "demo" and words in str(error)


def test_the_most_telling_leaf_of_an_exception_group_is_translated() -> None:
    group = ExceptionGroup("sdk", [ValueError("noise"), ExceptionGroup("inner", [TimeoutError()])])
    assert isinstance(translate(BOUNDARY, group), ServerTimeoutError)


def test_a_request_on_an_ended_session_is_closed_whatever_the_sdk_said() -> None:
    gone = Boundary("demo", "prompts/get 'x'", session_gone=lambda: True)
    assert isinstance(translate(gone, mcp_error(types.INTERNAL_ERROR)), ServerClosedError)
    assert isinstance(translate(gone, RuntimeError("not connected")), ServerClosedError)


def test_json_rpc_codes_keep_their_fallback_kind() -> None:
    assert translate(BOUNDARY, mcp_error(types.INVALID_PARAMS)).kind is ErrorKind.PERMANENT
    assert translate(BOUNDARY, mcp_error(-32000)).kind is ErrorKind.TRANSIENT


def test_translated_chains_the_foreign_error_and_lets_others_through() -> None:
    with pytest.raises(ServerClosedError) as raised, translated(BOUNDARY):
        raise anyio.EndOfStream
    assert isinstance(raised.value.__cause__, anyio.EndOfStream)
    with pytest.raises(KeyError), translated(BOUNDARY):
        raise KeyError("not foreign to the servers")
    start = ServerStartError("demo", "no")
    with pytest.raises(ServerStartError) as passed, translated(BOUNDARY):
        raise start
    assert passed.value is start


def test_an_authorization_failure_leaves_a_group_as_itself_before_any_connection_error() -> None:
    refused = AuthError("demo", "authorization failed: invalid_client")
    group = ExceptionGroup("transport", [httpx2.ConnectError("reset"), refused])
    assert translate(BOUNDARY, group) is refused
