"""The tool listing filter: unusable tools are dropped from every tools/list answer, re-lists included."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from mcp.shared.message import SessionMessage
from mcp_types import PROTOCOL_VERSION_META_KEY, JSONRPCRequest, JSONRPCResponse

from runner.servers import listings as filtering
from runner.servers.listings import ToolListingFilter

VERSION = "2025-11-25"


def tool(name: str, **changes: Any) -> dict[str, Any]:
    return {
        "name": name, "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}, **changes
    }


def listed(listings: ToolListingFilter, request_id: int, tools: list[Any]) -> list[str]:
    """Send a tools/list request through the filter and its answer back; the names that pass."""
    meta = {"_meta": {PROTOCOL_VERSION_META_KEY: VERSION}}
    listings.outbound(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/list",
                                                    params=meta)))
    answer = listings.inbound(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=request_id,
                                                             result={"tools": tools})))
    assert isinstance(answer, SessionMessage)
    return [entry["name"] for entry in answer.message.result["tools"]]


def test_a_tool_that_turns_unusable_in_a_relist_is_dropped_though_it_passed_before() -> None:
    listings = ToolListingFilter("s")
    assert listed(listings, 1, [tool("a"), tool("b")]) == ["a", "b"]
    assert listed(listings, 2, [tool("a"), tool("b", inputSchema="not a schema")]) == ["a"]
    assert listed(listings, 3, [tool("a"), tool("b", description=5)]) == ["a"]
    assert listed(listings, 4, [tool("a"), tool("b")]) == ["a", "b"]


def test_a_listing_that_passed_is_not_kept_by_the_filter() -> None:
    listings = ToolListingFilter("s")
    definition = tool("a")
    held_before = sys.getrefcount(definition)
    assert listed(listings, 1, [definition]) == ["a"]
    assert sys.getrefcount(definition) == held_before


def test_a_tool_whose_name_is_not_a_string_is_dropped_and_the_rest_is_kept() -> None:
    listings = ToolListingFilter("s")
    assert listed(listings, 1, [tool("a"), tool(["b"]), tool("c")]) == ["a", "c"]


def test_a_relist_identical_to_an_answer_that_passed_is_not_validated_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listings = ToolListingFilter("s")
    assert listed(listings, 1, [tool("a"), tool("b")]) == ["a", "b"]
    checks: list[Any] = []
    monkeypatch.setattr(filtering, "_problem", lambda result, version: checks.append(result))
    assert listed(listings, 2, [tool("a"), tool("b")]) == ["a", "b"]
    assert checks == []
    listed(listings, 3, [tool("a"), tool("b", description="changed")])
    assert [entry["name"] for entry in checks[0]["tools"]] == ["b"]  # only the changed tool
