"""Callers kept apart: several bearer tokens, each naming a caller (a tokens file, or
MCP_RUN_TOKEN_<CALLER> variables); a caller lists and reads only its own threads, over MCP and
over the OpenAI-compatible API alike, and another caller's thread is refused as an unknown one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from builders import ROOT, scripted_model, write_manifest
from mcp.shared.exceptions import MCPError
from serving import http_agent, http_client, openai_api

LIMIT = 90
ALICE, BOB = "alice-token-0123456789", "bob-token-9876543210"


def tokens_file(folder: Path, text: str, mode: int = 0o600) -> Path:
    path = folder / "tokens.yaml"
    path.write_text(text)
    path.chmod(mode)
    return path


async def unknown_thread_error(url: str, token: str, thread: str) -> tuple[int, str]:
    """The error a caller gets reading ``thread``, the thread id written as THREAD."""
    async with http_client(url, token=token) as client:
        with pytest.raises(MCPError) as refused:
            await client.read_resource(f"mcp-run://threads/{thread}")
    return refused.value.code, refused.value.message.replace(thread, "THREAD")


@pytest.mark.usefixtures("closed_openai_clients")
async def test_two_callers_with_their_own_tokens_cannot_see_each_others_threads(tmp_path: Path) -> None:
    script = ["For Alice.", "Alice again.", "For Bob."]
    manifest = write_manifest(tmp_path, {}, name="keeper", model=scripted_model(tmp_path, script),
                              checkpointer="memory")
    tokens = tokens_file(tmp_path, f"# who may call\nalice: {ALICE}\n")
    with http_agent(manifest, "--tokens-file", str(tokens), env={"MCP_RUN_TOKEN_bob": BOB}) as served:
        with anyio.fail_after(LIMIT):
            await openai_api(served.url, ALICE).chat.completions.create(
                model="keeper", messages=[{"role": "user", "content": "secret plans"}],
                extra_headers={"X-MCP-Run-Thread": "plans"})
            async with http_client(served.url, token=ALICE) as alice:
                asked = await alice.call_tool("ask", {"message": "more plans"})
                alices = asked.structured_content["thread"]
                listed = {str(resource.uri) for resource in (await alice.list_resources()).resources}
                assert listed == {"mcp-run://threads/plans", f"mcp-run://threads/{alices}"}

            async with http_client(served.url, token=BOB) as bob:
                assert (await bob.list_resources()).resources == []
            for thread in ("plans", alices):
                refused = await unknown_thread_error(served.url, BOB, thread)
                assert refused == await unknown_thread_error(served.url, BOB, "never-was-" + thread)
            async with http_client(served.url, token=BOB) as bob:
                on_alices = await bob.call_tool("ask", {"message": "hello", "thread": alices})
                assert on_alices.structured_content["new"] is True  # a thread of its own, by that id
            async with http_client(served.url, token=ALICE) as alice:
                read = await alice.read_resource("mcp-run://threads/plans")
    messages = json.loads(read.contents[0].text)["messages"]
    assert [m["text"] for m in messages] == ["secret plans", "For Alice."]


def serve_refused(manifest: Path, *args: str, env: dict[str, str] | None = None
                  ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runner", "serve", str(manifest), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=LIMIT, check=False,
                          env={**os.environ, **(env or {})})


def test_a_tokens_file_others_can_read_is_refused_before_serving(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {}, model="offline")
    tokens = tokens_file(tmp_path, f"alice: {ALICE}\n", mode=0o644)
    done = serve_refused(manifest, "--http", "127.0.0.1:0", "--tokens-file", str(tokens))
    assert done.returncode == 2, done.stderr
    assert f"chmod 600 {tokens}" in done.stderr and ALICE not in done.stderr


@pytest.mark.parametrize("where", [("127.0.0.1:0",), ("0.0.0.0:0", "--allow-remote")])
def test_a_tokens_file_that_names_no_caller_is_refused_before_serving(
    tmp_path: Path, where: tuple[str, ...]
) -> None:
    # Served with no caller, no token would be asked of anyone: the file is refused instead.
    manifest = write_manifest(tmp_path, {}, model="offline")
    tokens = tokens_file(tmp_path, "")
    done = serve_refused(manifest, "--http", *where, "--tokens-file", str(tokens))
    assert done.returncode == 2, done.stderr
    assert f"{tokens}: the tokens file names no caller" in " ".join(done.stderr.split())


def test_one_token_and_callers_tokens_together_are_refused(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {}, model="offline")
    tokens = tokens_file(tmp_path, f"alice: {ALICE}\n")
    done = serve_refused(manifest, "--http", "127.0.0.1:0", "--tokens-file", str(tokens),
                         "--token-env", "ONE", env={"ONE": BOB})
    assert done.returncode == 2 and "use one or the other" in done.stderr
    over_stdio = serve_refused(manifest, "--tokens-file", str(tokens))
    assert over_stdio.returncode == 2 and "apply to --http only" in over_stdio.stderr
