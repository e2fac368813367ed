"""`mcp-run serve --http ADDRESS --a2a`: the agent over A2A, talked to with the a2a-sdk's own client.
Its card comes from the manifest (and follows --watch), a context is a conversation thread,
updates stream, and an approval makes the task input-required until the caller answers it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_message_text, new_text_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from builders import ROOT, scripted_model, write_manifest
from mcp_servers import gates as gates_server
from serving import SERVE, ServedProcess, call_message, http_agent, http_client, write_served_agent
from test_serve_caller_leaves import HANG, hanging_agent, received

from runner.hosting.a2a_api import STOPPING

LIMIT = 90


def a2a_url(mcp_url: str) -> str:
    return mcp_url.removesuffix("/mcp") + "/a2a"


@asynccontextmanager
async def a2a_client(url: str) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=60) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(url)
        try:
            yield client
        finally:
            await client.close()


@asynccontextmanager
async def served_over_a2a(folder: Path, gates_url: str, **agent: Any
                          ) -> AsyncIterator[tuple[ServedProcess, Client]]:
    """The served agent (``write_served_agent(folder, gates_url, **agent)``) with --a2a, and an
    a2a-sdk client of it; the block is bounded by LIMIT."""
    with http_agent(write_served_agent(folder, gates_url, **agent), "--a2a") as served:
        with anyio.fail_after(LIMIT):
            async with a2a_client(a2a_url(served.url)) as client:
                yield served, client


async def send(client: Client, text: str, *, context: str = "", task: str = ""
               ) -> tuple[Task, list[StreamResponse]]:
    """Send ``text`` (streamed); the task as it ended, and every response the stream carried."""
    message = new_text_message(text, context_id=context or None, task_id=task or None, role=Role.ROLE_USER)
    responses = [response async for response in client.send_message(SendMessageRequest(message=message))]
    ids = {response.status_update.task_id for response in responses if response.HasField("status_update")}
    [task_id] = ids
    return await client.get_task(GetTaskRequest(id=task_id)), responses


def answer_of(task: Task) -> str:
    [artifact] = [artifact for artifact in task.artifacts if artifact.artifact_id == "answer"]
    return get_artifact_text(artifact)


async def test_a_caller_holds_a_streamed_multi_turn_conversation_on_one_context(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    async with served_over_a2a(tmp_path, url) as (served, client):
        first, streamed = await send(client, call_message("gates__note", text="one"))
        second, _ = await send(client, call_message("gates__note", text="two"), context=first.context_id)
        async with http_client(served.url) as mcp:  # the same conversation, read as a thread
            read = await mcp.read_resource(f"mcp-run://threads/{first.context_id}")
    assert first.status.state == second.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_of(first) == "gates__note returned: noted one"
    assert get_message_text(second.status.message) == answer_of(second) == "gates__note returned: noted two"
    assert second.context_id == first.context_id and second.id != first.id
    kinds = [response.WhichOneof("payload") for response in streamed]
    assert kinds[0] == "task" and kinds.count("artifact_update") > 1  # the answer came in chunks
    said = [get_message_text(response.status_update.status.message) for response in streamed
            if response.HasField("status_update") and response.status_update.status.HasField("message")]
    assert 'tool call gates__note {"text": "one"}' in said
    users = [m["text"] for m in json.loads(read.contents[0].text)["messages"] if m["role"] == "user"]
    assert users == [call_message("gates__note", text="one"), call_message("gates__note", text="two")]
    assert log.log == ["note one", "note two"]


@pytest.mark.parametrize(("reply", "runs"), [("yes", True), ("no: not today", False)])
async def test_an_approval_makes_the_task_input_required_and_the_callers_reply_resumes_it(
    tmp_path: Path, gates: tuple[gates_server.Gates, str], reply: str, runs: bool
) -> None:
    log, url = gates
    async with served_over_a2a(tmp_path, url, approve=["note"]) as (_, client):
        asked, _ = await send(client, call_message("gates__note", text="maybe"))
        before = list(log.log)
        done, _ = await send(client, reply, context=asked.context_id, task=asked.id)
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    question = get_message_text(asked.status.message)
    assert question.startswith('The agent wants to call the tool gates__note with {"text": "maybe"}')
    assert before == []  # nothing ran while the task waited
    assert done.id == asked.id and done.status.state == TaskState.TASK_STATE_COMPLETED
    if runs:
        assert answer_of(done) == "gates__note returned: noted maybe"
        assert log.log == ["note maybe"]
    else:
        assert "not today" in answer_of(done)
        assert log.log == []


async def test_the_agent_card_comes_from_the_manifest_and_follows_an_edit_under_watch(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url, description="Takes notes.")
    with http_agent(manifest, "--a2a", "--watch") as served:
        with anyio.fail_after(LIMIT):
            async with httpx.AsyncClient(timeout=60) as http:
                resolver = A2ACardResolver(http, a2a_url(served.url))
                card = await resolver.get_agent_card()
                document = yaml.safe_load(manifest.read_text())
                document["description"] = "Takes notes, briefly."
                manifest.write_text(yaml.safe_dump(document, sort_keys=False))
                await anyio.to_thread.run_sync(served.wait_for_line, "reloaded in")
                edited = await resolver.get_agent_card()
    assert (card.name, card.description) == ("served", "Takes notes.")
    assert [(skill.id, skill.description) for skill in card.skills] == [("served", "Takes notes.")]
    assert [interface.url for interface in card.supported_interfaces] == [a2a_url(served.url)]
    assert card.capabilities.streaming
    assert edited.description == edited.skills[0].description == "Takes notes, briefly."


async def test_serve_prints_the_address_of_the_agent_card_as_it_starts(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    with http_agent(write_served_agent(tmp_path, url), "--a2a") as served:
        line = served.lines.get(timeout=LIMIT)  # right after the MCP and OpenAI-compatible API lines
        card_url = a2a_url(served.url) + "/.well-known/agent-card.json"
        assert line == f"  and A2A, its agent card at {card_url}"
        with anyio.fail_after(LIMIT):
            async with httpx.AsyncClient(timeout=60) as http:
                card = (await http.get(card_url)).json()
    assert card["name"] == "served"


def test_a2a_needs_http_and_names_the_extra_when_its_package_is_missing(tmp_path: Path) -> None:
    manifest = write_served_agent(tmp_path, "http://127.0.0.1:9/mcp")
    without_http = subprocess.run([*SERVE, str(manifest), "--a2a"], capture_output=True, text=True,
                                  timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)
    hidden = tmp_path / "no_a2a"  # a2a-sdk not installed: its import fails
    (hidden / "a2a").mkdir(parents=True)
    (hidden / "a2a" / "__init__.py").write_text("raise ImportError('No module named a2a')\n")
    path = os.pathsep.join([str(hidden), os.environ.get("PYTHONPATH", "")])
    missing = subprocess.run([*SERVE, str(manifest), "--http", "127.0.0.1:0", "--a2a"], capture_output=True,
                             text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL,
                             env={**os.environ, "PYTHONPATH": path})
    assert without_http.returncode == 2
    assert "--a2a apply to --http only" in " ".join(without_http.stderr.split())
    assert missing.returncode == 1, missing.stderr
    assert "pip install 'mcp-run[a2a]'" in missing.stderr


async def test_a_servers_question_makes_the_task_input_required_with_its_form_and_the_reply_fills_it(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    async with served_over_a2a(tmp_path, url) as (_, client):
        asked, _ = await send(client, call_message("gates__ask_user"))
        done, _ = await send(client, "teal", context=asked.context_id, task=asked.id)
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    [text, form] = asked.status.message.parts
    assert text.text == "[gates] Which colour?"
    assert form.data.struct_value["required"] == ["colour"]
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_of(done) == "gates__ask_user returned: colour: accept teal"
    assert log.log == ["answer accept {'colour': 'teal'}"]


async def test_a2a_is_behind_the_same_bearer_token_as_mcp(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url)
    token = "a2a-s3cret-for-tests"
    with http_agent(manifest, "--a2a", "--token-env", "MCP_RUN_SERVE_TOKEN",
                    env={"MCP_RUN_SERVE_TOKEN": token}) as served:
        card_url = a2a_url(served.url) + "/.well-known/agent-card.json"
        with anyio.fail_after(LIMIT):
            async with httpx.AsyncClient(timeout=60) as http:
                refused = await http.get(card_url)
                sent = await http.post(a2a_url(served.url), json={"jsonrpc": "2.0", "id": 1,
                                                                  "method": "SendMessage", "params": {}})
                card = await http.get(card_url, headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == sent.status_code == 401
    assert token not in refused.text
    assert card.status_code == 200 and card.json()["name"] == "served"


async def test_a_cancelled_task_cancels_its_turn_and_the_tool_call_at_its_server(tmp_path: Path) -> None:
    manifest, record = hanging_agent(tmp_path)
    with http_agent(manifest, "--a2a") as served:
        with anyio.fail_after(LIMIT):
            async with a2a_client(a2a_url(served.url)) as client, anyio.create_task_group() as sending:
                started: list[Task] = []

                async def hang() -> None:
                    message = new_text_message(HANG, role=Role.ROLE_USER)
                    async for response in client.send_message(SendMessageRequest(message=message)):
                        if response.HasField("task"):
                            started.append(response.task)

                sending.start_soon(hang)
                call = await received(record, "tools/call")
                cancelled_task = await client.cancel_task(CancelTaskRequest(id=started[0].id))
                cancelled_call = await received(record, "notifications/cancelled")
                sending.cancel_scope.cancel()
    assert cancelled_call == call
    assert cancelled_task.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_task_running_when_serve_stops_fails_saying_the_agent_is_stopping(tmp_path: Path) -> None:
    manifest, record = hanging_agent(tmp_path)
    with http_agent(manifest, "--a2a") as served:
        with anyio.fail_after(LIMIT):
            async with a2a_client(a2a_url(served.url)) as client:
                states: list[tuple[int, str]] = []

                async def hang() -> None:
                    message = new_text_message(HANG, role=Role.ROLE_USER)
                    async for response in client.send_message(SendMessageRequest(message=message)):
                        if response.HasField("status_update"):
                            status = response.status_update.status
                            states.append((status.state, get_message_text(status.message)))

                async with anyio.create_task_group() as sending:
                    sending.start_soon(hang)
                    await received(record, "tools/call")
                    served.process.send_signal(signal.SIGTERM)
        code = served.process.wait(timeout=30)
    assert states[-1] == (TaskState.TASK_STATE_FAILED, STOPPING)
    assert code == 128 + signal.SIGTERM


async def test_a_long_streamed_answer_comes_in_few_artifact_chunks_the_last_one_the_whole_answer(
    tmp_path: Path
) -> None:
    words = 3000  # the scripted model streams each word as one token
    answer = " ".join(f"w{index}" for index in range(words))
    manifest = write_manifest(tmp_path, {}, name="talker", model=scripted_model(tmp_path, [answer]))
    with http_agent(manifest, "--a2a") as served:
        with anyio.fail_after(LIMIT):
            async with a2a_client(a2a_url(served.url)) as client:
                task, streamed = await send(client, "talk")
    chunks = [response.artifact_update for response in streamed if response.HasField("artifact_update")]
    assert 1 <= len(chunks) <= words // 4  # one per token would be `words` of them
    assert get_artifact_text(chunks[-1].artifact) == answer and chunks[-1].last_chunk
    assert answer_of(task) == answer


async def test_behind_a_token_the_card_declares_the_bearer_scheme_and_a_client_giving_it_is_answered(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    token = "a2a-s3cret-for-tests"
    with http_agent(write_served_agent(tmp_path, url), "--a2a", "--token-env", "MCP_RUN_SERVE_TOKEN",
                    env={"MCP_RUN_SERVE_TOKEN": token}) as served:
        with anyio.fail_after(LIMIT):
            async with httpx.AsyncClient(timeout=60, headers={"Authorization": f"Bearer {token}"}) as http:
                card = await A2ACardResolver(http, a2a_url(served.url)).get_agent_card()
                client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(
                    a2a_url(served.url))
                try:
                    done, _ = await send(client, call_message("gates__note", text="hi"))
                finally:
                    await client.close()
    [(name, scheme)] = card.security_schemes.items()
    assert scheme.http_auth_security_scheme.scheme == "Bearer"
    assert [list(requirement.schemes) for requirement in card.security_requirements] == [[name]]
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_of(done) == "gates__note returned: noted hi"


async def test_without_a_token_the_card_declares_no_security_scheme(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    with http_agent(write_served_agent(tmp_path, url), "--a2a") as served:
        with anyio.fail_after(LIMIT):
            async with httpx.AsyncClient(timeout=60) as http:
                card = await A2ACardResolver(http, a2a_url(served.url)).get_agent_card()
    assert not card.security_schemes and not card.security_requirements
