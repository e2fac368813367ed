"""`mcp-run serve`: the `ask` result carries what the turn and the thread spent in its `_meta`,
and a turn a budget ends is an error result naming the limit."""

from __future__ import annotations

from pathlib import Path

import anyio
from builders import scripted_model, server, write_manifest
from serving import stdio_agent, text_of

LIMIT = 90


async def test_ask_results_carry_the_turns_and_threads_usage_and_a_limit_ends_the_turn(
    tmp_path: Path,
) -> None:
    script = [{"text": "one", "usage": {"input_tokens": 600, "output_tokens": 100},
               "model": "openai:gpt-4.1-mini"},
              {"tool_calls": [{"name": "demo__add", "args": {"a": 1, "b": 2}}],
               "usage": {"input_tokens": 600, "output_tokens": 100}, "model": "openai:gpt-4.1-mini"}]
    manifest = write_manifest(tmp_path, {"demo": server("demo")}, name="served",
                              model=scripted_model(tmp_path, script), checkpointer="memory",
                              limits={"per_thread": {"max_tokens": 1000}})
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest) as client:
            first = await client.call_tool("ask", {"message": "hello"})
            assert not first.is_error, text_of(first)
            spent = first.meta["mcp-run/usage"]
            assert spent["turn"]["total_tokens"] == 700 and spent["thread"]["total_tokens"] == 700
            assert spent["turn"]["cost"] == round((600 * 0.4 + 100 * 1.6) / 1e6, 8)
            assert "limit" not in spent
            thread = first.structured_content["thread"]

            second = await client.call_tool("ask", {"message": "add", "thread": thread})
            assert second.is_error
            assert "limits.per_thread.max_tokens" in text_of(second)
            stopped = second.meta["mcp-run/usage"]
            assert stopped["limit"] == {"scope": "thread", "limit": "max_tokens", "max": 1000, "spent": 1400}
            assert stopped["thread"]["total_tokens"] == 1400 and stopped["turn"]["total_tokens"] == 700
