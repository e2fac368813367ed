"""`mcp-run serve`: a new message on a thread whose last turn was cut off (its process killed)
closes that turn, so the model and the provider see every call answered."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from builders import ROOT
from crash_runs import done, killed_while_held, manifest
from mcp import Client, StdioServerParameters
from provider_server import ProviderServer, Reply
from serving import text_of

from runner.agent.nodes import STOPPED_TEXT

LIMIT = 90


async def test_asking_on_a_thread_cut_off_by_a_kill_closes_its_turn_and_answers(
    tmp_path: Path, provider_server: ProviderServer,
) -> None:
    provider_server.script(Reply(tool_calls=[("steps__work", {"step": "z", "hold": True})]),
                           Reply("Next answer."))
    manifest(tmp_path, model=provider_server.model())
    with killed_while_held(tmp_path, "z.held", "-p", "go", "--thread", "served"):
        pass
    # The provider's key variable and this checkout's runner reach the served process.
    params = StdioServerParameters(command=sys.executable, args=["-m", "runner", "serve", "agent.yaml"],
                                   cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": str(ROOT)})
    with anyio.fail_after(LIMIT):
        async with Client(params) as client:
            result = await client.call_tool("ask", {"message": "again", "thread": "served"})
    assert not result.is_error, text_of(result)
    assert text_of(result) == "Next answer."
    sent = provider_server.completions()[-1].body["messages"]
    assert [m["role"] for m in sent[-3:]] == ["assistant", "tool", "user"]
    assert sent[-2]["content"] == STOPPED_TEXT  # not "did not run": the killed call had started
    assert done(tmp_path) == []
