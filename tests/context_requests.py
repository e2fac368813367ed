"""What every model request must be, whatever was left out of it: each tool call with its results."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage


def assert_calls_have_their_results(request: list[BaseMessage]) -> None:
    """Every tool call of a request is answered right after it, and every result has its call."""
    for index, message in enumerate(request):
        if isinstance(message, AIMessage) and message.tool_calls:
            following = request[index + 1:index + 1 + len(message.tool_calls)]
            assert [m.tool_call_id for m in following if isinstance(m, ToolMessage)] == [
                call["id"] for call in message.tool_calls], f"call split from its result at {index}"
        if isinstance(message, ToolMessage):
            asked = [m for m in request[:index] if isinstance(m, AIMessage)
                     and any(call["id"] == message.tool_call_id for call in m.tool_calls)]
            assert asked, f"a result without its call at {index}"
