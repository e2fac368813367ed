"""A served turn whose model request is retried tells its caller as progress, in the chat's words,
and still answers (`mcp-run serve --http` against the local OpenAI-compatible server)."""

from __future__ import annotations

from pathlib import Path

import anyio
from builders import write_manifest
from provider_server import Failure, ProviderServer, Reply
from serving import Progress, http_agent, http_client, text_of

LIMIT = 90


async def test_a_served_turn_reports_each_model_retry_as_progress_and_answers(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(429, retry_after="1"), Reply("Hello."))
    manifest = write_manifest(tmp_path, {}, name="served", model=provider_server.model(),
                              checkpointer="memory")
    with http_agent(manifest) as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:
                progress = Progress()
                result = await client.call_tool("ask", {"message": "hi"}, progress_callback=progress)
    assert text_of(result) == "Hello.", text_of(result)
    assert progress.messages[0] == "rate limited, retrying in 1 s (attempt 2 of 3)"
    assert len(provider_server.completions()) == 2
