"""The local OpenAI-compatible server the provider tests use answers as scripted, as the official
client reads it: usage details, tool calls, structured answers, streams with usage last, error
statuses with Retry-After, broken bodies and dropped connections; and it records each request."""

from __future__ import annotations

import json

import openai
import pytest
from provider_server import API_KEY, Cut, Failure, Malformed, ProviderServer, Reply, Usage

MESSAGES = [{"role": "user", "content": "hi"}]


def client(server: ProviderServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)


def test_an_answer_carries_its_usage_details_and_the_request_is_recorded(
        provider_server: ProviderServer) -> None:
    provider_server.script(Reply("Hello there.", usage=Usage(20, 7, cached_tokens=8, reasoning_tokens=3)))
    completion = client(provider_server).chat.completions.create(model="m", messages=MESSAGES)
    assert completion.choices[0].message.content == "Hello there."
    usage = completion.usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (20, 7)
    assert usage.prompt_tokens_details and usage.prompt_tokens_details.cached_tokens == 8
    assert usage.completion_tokens_details and usage.completion_tokens_details.reasoning_tokens == 3
    (request,) = provider_server.completions()
    assert request.body["messages"] == MESSAGES
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.size == int(request.headers["content-length"]) > 0


def test_tool_calls_and_structured_answers_come_as_scripted(provider_server: ProviderServer) -> None:
    provider_server.script(Reply(tool_calls=[("get_weather", {"city": "Paris"})]), Reply(json={"answer": 42}))
    called = client(provider_server).chat.completions.create(model="m", messages=MESSAGES)
    (call,) = called.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    assert called.choices[0].finish_reason == "tool_calls"
    schema = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
    answered = client(provider_server).chat.completions.create(
        model="m", messages=MESSAGES, response_format=schema)  # type: ignore[arg-type]
    assert json.loads(answered.choices[0].message.content or "") == {"answer": 42}
    assert provider_server.completions()[1].body["response_format"] == schema


def test_a_stream_sends_the_text_in_pieces_and_its_usage_in_the_last_chunk(
        provider_server: ProviderServer) -> None:
    provider_server.script(Reply("one two three", usage=Usage(3, 4)))
    chunks = list(client(provider_server).chat.completions.create(
        model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two three"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 3
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 4


def test_an_error_status_says_when_to_come_back(provider_server: ProviderServer) -> None:
    provider_server.script(Failure(429, retry_after="7"), Failure(503))
    with pytest.raises(openai.RateLimitError) as limited:
        client(provider_server).chat.completions.create(model="m", messages=MESSAGES)
    assert limited.value.response.headers["retry-after"] == "7"
    with pytest.raises(openai.InternalServerError) as failed:
        client(provider_server).chat.completions.create(model="m", messages=MESSAGES)
    assert failed.value.status_code == 503


def test_a_broken_body_and_dropped_connections_fail_the_client(provider_server: ProviderServer) -> None:
    provider_server.script(Malformed(), Cut(), Cut(Reply("a b c d"), after=3))
    with pytest.raises(json.JSONDecodeError):
        client(provider_server).chat.completions.create(model="m", messages=MESSAGES)
    with pytest.raises(openai.APIConnectionError):
        client(provider_server).chat.completions.create(model="m", messages=MESSAGES)
    pieces = []
    stream = client(provider_server).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIConnectionError):
        for chunk in stream:
            pieces.append(chunk.choices[0].delta.content)
    assert pieces == ["", "a ", "b "]  # three chunks (the role, two words), then the drop


def test_a_request_with_nothing_scripted_left_fails_visibly(provider_server: ProviderServer) -> None:
    with pytest.raises(openai.InternalServerError, match="no scripted answer left"):
        client(provider_server).chat.completions.create(model="m", messages=MESSAGES)
    assert len(provider_server.wait_for_requests(1)) == 1
