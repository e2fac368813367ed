"""The manifest's ``policy`` on the served agent's tool calls: a denied call is refused with the
rule's reason (the tool never runs), an ``ask`` rule on arguments is relayed to the caller as the
approval elicitation, and a call its arguments keep out of every rule runs without asking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp_servers import gates as gates_server
from serving import call_message, stdio_agent, text_of, write_served_agent

LIMIT = 90
POLICY = [
    {"tool": "gates__note", "args": {"text": "secret*"}, "action": "deny", "reason": "no secrets in notes"},
    {"tool": "gates__note", "args": {"text": {"regex": "^ask"}}, "action": "ask", "reason": "asked for"},
]


async def test_the_served_agents_calls_are_decided_by_the_policy_on_their_arguments(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, policy=POLICY)
    asked: list[types.ElicitRequestParams] = []

    async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": True})

    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest, mode="legacy", elicitation_callback=accept) as client:
            secret = call_message("gates__note", text="secret plan")
            denied = await client.call_tool("ask", {"message": secret})
            plain = await client.call_tool("ask", {"message": call_message("gates__note", text="plain")})
            approved = await client.call_tool("ask", {"message": call_message("gates__note", text="ask me")})
    assert "denied by the manifest's policy (policy[0]): no secrets in notes" in text_of(denied)
    assert text_of(plain) == "gates__note returned: noted plain"
    assert text_of(approved) == "gates__note returned: noted ask me"
    assert [question.message for question in asked] == [
        'The agent wants to call the tool gates__note with {"text": "ask me"}. (policy[1]: asked for) '
        'Allow it?']
    assert log.log == ["note plain", "note ask me"]
