"""`mcp-run serve --http` answers the OpenAI Chat Completions API beside MCP: the official `openai`
client and curl hold conversations (threads named by a header or `user`), stream with usage, get
errors in the shape the client reads, and a caller that disconnects cancels its turn."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import openai
import pytest
import yaml
from builders import scripted_model, write_manifest
from mcp_servers import gates as gates_server
from serving import call_message, http_agent, http_client, openai_api, write_served_agent

LIMIT = 90
THREAD = "X-MCP-Run-Thread"


CURL_STATUS = ["-sS", "-w", "\n%{http_code}"]  # the body, then the status on a line of its own


def curl(url: str, *args: str) -> str:
    done = subprocess.run(["curl", *CURL_STATUS, *args, url], capture_output=True, text=True, timeout=60,
                          check=False)
    return done.stdout


async def async_curl(url: str, *args: str) -> str:
    with anyio.fail_after(LIMIT):
        done = await anyio.run_process(["curl", *CURL_STATUS, *args, url], check=False)
    return done.stdout.decode()


def scripted_agent(folder: Path, script: list[Any], gates_url: str | None = None) -> Path:
    servers = {"gates": {"url": gates_url}} if gates_url else {}
    return write_manifest(folder, servers, name="scripted-helper", model=scripted_model(folder, script),
                          checkpointer="memory")


@pytest.mark.usefixtures("closed_openai_clients")
async def test_the_openai_client_holds_a_conversation_on_a_thread_streamed_with_usage(tmp_path: Path) -> None:
    script = [{"text": "Hello Ann.", "usage": {"input_tokens": 11, "output_tokens": 3}},
              {"text": "You are Ann.", "usage": {"input_tokens": 20, "output_tokens": 4}}]
    with http_agent(scripted_agent(tmp_path, script)) as served:
        with anyio.fail_after(LIMIT):
            client = openai_api(served.url)
            models = await client.models.list()
            assert [model.id for model in models.data] == ["scripted-helper"]
            first = await client.chat.completions.create(
                model="scripted-helper", messages=[{"role": "user", "content": "I am Ann."}],
                extra_headers={THREAD: "ann-1"})
            assert first.choices[0].message.content == "Hello Ann."
            assert first.choices[0].finish_reason == "stop"
            assert first.usage is not None
            usage = first.usage
            assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (11, 3, 14)

            stream = await client.chat.completions.create(
                model="scripted-helper", stream=True, stream_options={"include_usage": True},
                messages=[{"role": "user", "content": "I am Ann."},
                          {"role": "assistant", "content": "Hello Ann."},
                          {"role": "user", "content": "Who am I?"}],
                extra_headers={THREAD: "ann-1"})
            chunks = [chunk async for chunk in stream]
            assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "You are Ann."
            assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
            assert chunks[-1].choices == [] and chunks[-1].usage is not None
            assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (20, 4)
            assert all(c.usage is None for c in chunks[:-1])

            async with http_client(served.url) as mcp:  # the same thread, read over MCP
                read = await mcp.read_resource("mcp-run://threads/ann-1")
    history = json.loads(read.contents[0].text)["messages"]
    assert [(m["role"], m["text"]) for m in history] == [
        ("user", "I am Ann."), ("assistant", "Hello Ann."),
        ("user", "Who am I?"), ("assistant", "You are Ann.")]


@pytest.mark.usefixtures("closed_openai_clients")
async def test_without_a_thread_the_request_starts_one_that_the_answer_names_and_that_continues(
    tmp_path: Path
) -> None:
    with http_agent(scripted_agent(tmp_path, ["Noted.", "Still noted.", "Streamed."])) as served:
        with anyio.fail_after(LIMIT):
            client = openai_api(served.url)
            raw = await client.chat.completions.with_raw_response.create(model="scripted-helper", messages=[
                {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Remember 7."},
                {"role": "assistant", "content": "OK."}, {"role": "user", "content": "And 8."}])
            reply = raw.parse()
            assert reply.choices[0].message.content == "Noted."
            assert reply.usage is not None and reply.usage.total_tokens == 0  # the script reports none
            thread = raw.headers[THREAD]
            assert thread.startswith("chat-") and len(thread) > 30  # unguessable
            again = await client.chat.completions.create(model="scripted-helper", messages=[
                {"role": "user", "content": "And 9."}], extra_headers={THREAD: thread})
            assert again.choices[0].message.content == "Still noted."
            streamed = await client.chat.completions.with_raw_response.create(
                model="scripted-helper", stream=True, messages=[{"role": "user", "content": "Hi."}])
            other = streamed.headers[THREAD]
            assert other.startswith("chat-") and other != thread
            async for _ in streamed.parse():
                pass
            async with http_client(served.url) as mcp:
                read = await mcp.read_resource(f"mcp-run://threads/{thread}")
    history = json.loads(read.contents[0].text)["messages"]
    assert [m["text"] for m in history] == [
        "Be brief.", "Remember 7.", "OK.", "And 8.", "Noted.", "And 9.", "Still noted."]


@pytest.mark.usefixtures("closed_openai_clients")
async def test_the_user_field_names_the_thread_too(tmp_path: Path) -> None:
    with http_agent(scripted_agent(tmp_path, ["One.", "Two."])) as served:
        with anyio.fail_after(LIMIT):
            client = openai_api(served.url)
            for text in ("first", "second"):
                await client.chat.completions.create(model="scripted-helper", user="bob-chat",
                                                     messages=[{"role": "user", "content": text}])
            async with http_client(served.url) as mcp:
                read = await mcp.read_resource("mcp-run://threads/bob-chat")
    messages = json.loads(read.contents[0].text)["messages"]
    assert [m["text"] for m in messages] == ["first", "One.", "second", "Two."]


@pytest.mark.usefixtures("closed_openai_clients")
async def test_tool_calls_stay_inside_the_agent_and_an_approval_is_denied_with_a_reason(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"])
    with http_agent(manifest) as served:
        with anyio.fail_after(LIMIT):
            client = openai_api(served.url)
            refused = await client.chat.completions.create(model="served", messages=[
                {"role": "user", "content": call_message("gates__note", text="secret")}])
    answer = refused.choices[0].message.content or ""
    assert answer.startswith("gates__note failed:") and "not approved" in answer
    assert "OpenAI-compatible API" in answer
    assert log.log == []


def test_curl_streams_server_sent_events_ending_with_done(tmp_path: Path) -> None:
    with http_agent(scripted_agent(tmp_path, ["Hi there."])) as served:
        base = served.url.removesuffix("/mcp")
        done = curl(f"{base}/v1/chat/completions", "-N", "-H", "Content-Type: application/json", "-d",
                    json.dumps({"model": "scripted-helper", "stream": True,
                                "messages": [{"role": "user", "content": "hi"}]}))
    body, _, status = done.rpartition("\n")
    assert status == "200", done
    events = [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks) == "Hi there."


@pytest.mark.usefixtures("closed_openai_clients")
async def test_errors_come_in_the_shape_the_openai_client_reads(tmp_path: Path) -> None:
    manifest = scripted_agent(tmp_path, ["never"])
    with http_agent(manifest, "--token-env", "SERVE_TOKEN", env={"SERVE_TOKEN": "right-token"}) as served:
        with anyio.fail_after(LIMIT):
            with pytest.raises(openai.AuthenticationError) as unauthorized:
                await openai_api(served.url, "wrong-token").models.list()
            assert unauthorized.value.status_code == 401 and unauthorized.value.code == "invalid_api_key"
            client = openai_api(served.url, "right-token")
            with pytest.raises(openai.NotFoundError) as unknown:
                await client.chat.completions.create(model="gpt-4",
                                                     messages=[{"role": "user", "content": "x"}])
            assert unknown.value.code == "model_not_found" and unknown.value.param == "model"
            assert "scripted-helper" in unknown.value.message
            with pytest.raises(openai.BadRequestError) as bad_role:
                await client.chat.completions.create(model="scripted-helper", messages=[
                    {"role": "user", "content": "x"}, {"role": "robot", "content": "y"}])  # type: ignore[misc,list-item]
            assert bad_role.value.param == "messages[1].role"
            with pytest.raises(openai.BadRequestError) as last_not_user:
                await client.chat.completions.create(model="scripted-helper", messages=[
                    {"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}])
            assert last_not_user.value.param == "messages[1].role"
            with pytest.raises(openai.BadRequestError) as bad_thread:
                await client.chat.completions.create(model="scripted-helper", messages=[
                    {"role": "user", "content": "x"}], extra_headers={THREAD: "no spaces please"})
            assert bad_thread.value.param == "x-mcp-run-thread"
        base = served.url.removesuffix("/mcp")
        auth = ["-H", "Authorization: Bearer right-token", "-H", "Content-Type: application/json"]
        completions = f"{base}/v1/chat/completions"
        malformed = await async_curl(completions, *auth, "-d", '{"model": "scripted-helper", ')
        missing = await async_curl(completions, *auth, "-d", '{"model": "scripted-helper"}')
        no_token = await async_curl(f"{base}/v1/models")
    expected = ((malformed, "400", None), (missing, "400", "messages"), (no_token, "401", None))
    for done, status, param in expected:
        body, _, code = done.rpartition("\n")
        assert code == status, done
        error = json.loads(body)["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["param"] == param
    assert "not JSON" in json.loads(malformed.rpartition("\n")[0])["error"]["message"]


@pytest.mark.usefixtures("closed_openai_clients")
async def test_a_turn_past_the_bounds_gets_429_and_a_disconnect_cancels_the_turn(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url)
    with http_agent(manifest, "--max-turns", "1", "--max-queued", "0") as served:
        base = served.url.removesuffix("/mcp")
        hold = call_message("gates__hold", key="k")
        request = json.dumps({"model": "served", "stream": True,
                              "messages": [{"role": "user", "content": hold}]})
        streaming = await anyio.open_process(["curl", "-sS", "-N", "-H", f"{THREAD}: busy", "-d", request,
                                              f"{base}/v1/chat/completions"])
        try:
            await anyio.to_thread.run_sync(log.wait_for, "enter k")
            with anyio.fail_after(LIMIT):
                client = openai_api(served.url)
                with pytest.raises(openai.RateLimitError) as busy:
                    await client.chat.completions.create(model="served", extra_headers={THREAD: "busy"},
                                                         messages=[{"role": "user", "content": "hello"}])
                assert busy.value.code == "rate_limit_exceeded"
                assert "one turn at a time" in busy.value.message
                with pytest.raises(openai.RateLimitError) as full:  # another conversation: no slot left
                    await client.chat.completions.create(model="served", extra_headers={THREAD: "other"},
                                                         messages=[{"role": "user", "content": "hello"}])
                assert "the agent is busy" in full.value.message and "--max-turns 1" in full.value.message
        finally:
            streaming.kill()  # the caller goes away mid-stream
            with anyio.fail_after(LIMIT):
                await streaming.aclose()
        await anyio.to_thread.run_sync(log.wait_for, "cancelled k")  # its tool call was cancelled
        with anyio.fail_after(LIMIT):  # and the conversation is free for the next turn
            again = await openai_api(served.url).chat.completions.create(
                model="served", extra_headers={THREAD: "busy"},
                messages=[{"role": "user", "content": call_message("gates__note", text="after")}])
    assert again.choices[0].message.content == "gates__note returned: noted after"
    assert "leave k" not in log.log


@pytest.mark.usefixtures("closed_openai_clients")
async def test_a_streamed_turn_running_when_the_agent_stops_hears_why_and_the_stream_ends(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url)
    with http_agent(manifest) as served:
        with anyio.fail_after(LIMIT):
            stream = await openai_api(served.url).chat.completions.create(
                model="served", stream=True,
                messages=[{"role": "user", "content": call_message("gates__hold", key="s")}])
            await anyio.to_thread.run_sync(log.wait_for, "enter s")
            served.process.send_signal(signal.SIGTERM)
            with pytest.raises(openai.APIError) as stopped:
                async for _ in stream:
                    pass
            assert "the agent is stopping" in stopped.value.message
            assert await anyio.to_thread.run_sync(served.process.wait) == 128 + signal.SIGTERM
    assert "cancelled s" in log.log


@pytest.mark.usefixtures("closed_openai_clients")
async def test_each_agent_of_agents_is_a_model_and_a_request_runs_the_one_it_names(tmp_path: Path) -> None:
    (tmp_path / "helper.yaml").write_text(yaml.safe_dump(["Helper here.", "Helper streams."]))
    manifest = write_manifest(tmp_path, {}, name="desk", model=scripted_model(tmp_path, ["Main here."]),
                              checkpointer="memory",
                              agents={"helper": {"description": "Helps.",
                                                 "model": {"id": "scripted", "script": "helper.yaml"}}})
    with http_agent(manifest) as served:
        with anyio.fail_after(LIMIT):
            client = openai_api(served.url)
            assert [model.id for model in (await client.models.list()).data] == ["desk", "helper"]
            assert (await client.models.retrieve("helper")).id == "helper"
            reply = await client.chat.completions.create(
                model="helper", messages=[{"role": "user", "content": "Help."}], extra_headers={THREAD: "t"})
            assert (reply.model, reply.choices[0].message.content) == ("helper", "Helper here.")
            stream = await client.chat.completions.create(
                model="helper", stream=True, extra_headers={THREAD: "t"},
                messages=[{"role": "user", "content": "Help."},
                          {"role": "assistant", "content": "Helper here."},
                          {"role": "user", "content": "Again."}])
            chunks = [chunk async for chunk in stream]
            assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Helper streams."
            # The main agent's thread of that id is its own: the helper's turns are not in it.
            main = await client.chat.completions.create(
                model="desk", messages=[{"role": "user", "content": "Hi."}], extra_headers={THREAD: "t"})
            assert main.choices[0].message.content == "Main here."
