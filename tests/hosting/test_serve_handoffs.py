"""`mcp-run serve`: a conversation handed to another agent stays with it across ``ask`` calls on
the same thread; another thread starts with the main agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import yaml
from serving import stdio_agent, text_of

LIMIT = 90


def answer(result: Any) -> tuple[str, str]:
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content["answer"], result.structured_content["thread"]


async def test_a_served_threads_handoff_holds_across_ask_calls_on_that_thread(tmp_path: Path) -> None:
    (tmp_path / "main.yaml").write_text(yaml.safe_dump([
        {"tool_calls": [{"name": "handoff_to_billing", "args": {}, "id": "m1"}]}, "Main: hello."]))
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump(["Billing: refunded.", "Billing: anything else?"]))
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(yaml.safe_dump({
        "version": 1, "name": "desk", "model": {"id": "scripted", "script": "main.yaml"},
        "checkpointer": "memory", "agent": {"handoffs": ["billing"]},
        "agents": {"billing": {"description": "Refunds.",
                               "model": {"id": "scripted", "script": "billing.yaml"}}}}))
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest) as client:
            first, thread = answer(await client.call_tool("ask", {"message": "I was charged twice"}))
            assert first == "Billing: refunded."
            again, same = answer(await client.call_tool("ask", {"message": "Thanks", "thread": thread}))
            assert (again, same) == ("Billing: anything else?", thread)
            other, elsewhere = answer(await client.call_tool("ask", {"message": "Hi"}))
            assert other == "Main: hello." and elsewhere != thread
