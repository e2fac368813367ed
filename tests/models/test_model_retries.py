"""Model requests that survive providers, through the agent's graph against the local
OpenAI-compatible server (tests/provider_server.py) and the real langchain-openai client: each
failure worth another try is retried (and told as a ``model_retry`` event), Retry-After is the
wait asked for, ``model.timeout`` bounds an attempt, the fallbacks answer once the retries are
spent, and what cannot be retried fails once with a clear ModelError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import write_manifest
from langchain_core.messages import HumanMessage
from provider_server import Cut, Failure, Malformed, ProviderServer, Reply

from runner.agent.host import Host
from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn
from runner.errors import ModelError

pytestmark = pytest.mark.anyio
TURN_LIMIT = 60.0
QUICK = {"initial_delay": "10ms", "max_delay": "1s"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def agent(folder: Path, server: ProviderServer, **model: Any) -> Path:
    return write_manifest(folder, {}, model=server.model(**model), checkpointer="memory")


async def turn(path: Path, text: str = "hi") -> list[dict[str, Any]]:
    with anyio.fail_after(TURN_LIMIT):
        async with load_agent(path, host=Host(answers_questions=False)) as runtime:
            return [dict(event) async for event in stream_turn(runtime, text)]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


async def test_a_rate_limited_request_waits_what_retry_after_asks_and_then_answers(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(429, retry_after="1"), Reply("Hello."))
    events = await turn(agent(tmp_path, provider_server))
    (retry,) = of_type(events, "model_retry")
    assert retry == {"type": "model_retry", "model": "openai:gpt-stub", "attempt": 2, "max_attempts": 3,
                     "delay": 1.0, "reason": "rate_limited", "status": 429, "message": "rate limited"}
    assert of_type(events, "final")[0]["text"] == "Hello."
    assert len(provider_server.completions()) == 2


async def test_server_errors_are_retried_after_a_growing_jittered_delay(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(500), Failure(503), Reply("Hello."))
    events = await turn(agent(tmp_path, provider_server, retries={**QUICK, "max_attempts": 3}))
    first, second = of_type(events, "model_retry")
    assert (first["status"], second["status"]) == (500, 503)
    assert {first["reason"], second["reason"]} == {"server_error"}
    assert 0.005 <= first["delay"] <= 0.01 and 0.01 <= second["delay"] <= 0.02  # 10 ms, then 20 ms, jittered
    assert of_type(events, "final")[0]["text"] == "Hello."


async def test_an_answer_slower_than_model_timeout_is_given_up_and_asked_again(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Reply("Too late.", delay=60), Reply("Hello."))
    events = await turn(agent(tmp_path, provider_server, timeout="300ms", retries=QUICK))
    (retry,) = of_type(events, "model_retry")
    assert (retry["reason"], retry["message"]) == ("timeout", "no answer in 0.3 s")
    assert of_type(events, "final")[0]["text"] == "Hello."


async def test_a_streamed_answer_that_keeps_coming_is_not_timed_out_however_long_it_takes(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    words = "one two three four five six seven eight"
    provider_server.script(Reply(words, chunk_delay=0.4))  # 12 chunks: about 4 s in all
    events = await turn(agent(tmp_path, provider_server, timeout="1500ms", retries=QUICK))
    assert of_type(events, "model_retry") == []
    assert of_type(events, "final")[0]["text"] == words


async def test_a_stream_cut_mid_answer_is_asked_again_and_the_final_answer_is_whole(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Cut(Reply("This will be cut off."), after=3), Reply("Hello there."))
    events = await turn(agent(tmp_path, provider_server, retries=QUICK))
    (retry,) = of_type(events, "model_retry")
    assert retry["reason"] == "cut_off"
    assert of_type(events, "final")[0]["text"] == "Hello there."
    assert [request.streamed for request in provider_server.completions()] == [True, True]


async def test_a_stream_whose_connection_closes_cleanly_mid_answer_is_asked_again_as_cut_off(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Cut(Reply("partial answer here"), after=2, closed=True), Reply("Hello there."))
    events = await turn(agent(tmp_path, provider_server, retries=QUICK))
    (retry,) = of_type(events, "model_retry")
    assert (retry["reason"], retry["attempt"]) == ("cut_off", 2)
    assert of_type(events, "final")[0]["text"] == "Hello there."
    assert [request.streamed for request in provider_server.completions()] == [True, True]


async def test_an_answer_cut_without_streaming_is_asked_again(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Cut(), Reply("Hello."))
    path = agent(tmp_path, provider_server, retries=QUICK)
    with anyio.fail_after(TURN_LIMIT):
        async with load_agent(path, host=Host(answers_questions=False)) as runtime:
            state = await runtime.graph.ainvoke({"messages": [HumanMessage("hi")]}, runtime.config())
    assert state["messages"][-1].content == "Hello."
    assert [request.streamed for request in provider_server.completions()] == [False, False]


async def test_the_provider_clients_own_retries_are_off_so_ours_are_the_only_ones(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(500), Failure(500), Failure(500))
    with pytest.raises(ModelError):
        await turn(agent(tmp_path, provider_server, retries={"max_attempts": 1}))
    (request,) = provider_server.completions()
    assert request.headers["x-stainless-retry-count"] == "0"


async def test_once_the_retries_are_spent_the_fallback_answers(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(500), Failure(502))
    events = await turn(agent(tmp_path, provider_server, fallbacks=["offline"],
                              retries={**QUICK, "max_attempts": 2}), "hello")
    assert [event["type"] for event in events if event["type"].startswith("model_")] == [
        "model_retry", "model_fallback"]
    (fallback,) = of_type(events, "model_fallback")
    assert fallback == {"type": "model_fallback", "model": "openai:gpt-stub", "fallback": "offline",
                        "reason": "the provider failed (HTTP 502) after 2 attempts"}
    assert "offline model" in of_type(events, "final")[0]["text"]
    assert len(provider_server.completions()) == 2


async def test_a_wait_longer_than_max_delay_is_not_waited_for_the_fallback_answers_at_once(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(429, retry_after="3600"))
    events = await turn(agent(tmp_path, provider_server, fallbacks=["offline"], retries=QUICK), "hello")
    assert of_type(events, "model_retry") == []
    (fallback,) = of_type(events, "model_fallback")
    assert fallback["reason"] == "rate limited, and asked to wait 3600 s, longer than model.retries.max_delay"
    assert len(provider_server.completions()) == 1


async def test_failures_no_retry_absorbs_end_in_one_model_error_saying_what_happened(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(*[Failure(500, message="sk-secret-in-provider-body")] * 3)
    with pytest.raises(ModelError) as spent:
        await turn(agent(tmp_path, provider_server, retries=QUICK))
    assert str(spent.value) == ("the model call failed: openai:gpt-stub: the provider failed (HTTP 500) "
                                "after 3 attempts")
    assert len(provider_server.completions()) == 3


async def test_an_answer_that_is_not_json_is_not_retried_and_the_error_says_so(
        tmp_path: Path, provider_server: ProviderServer) -> None:
    provider_server.script(Malformed(), Malformed(), Reply("never asked for"))
    with pytest.raises(ModelError, match=r"openai:gpt-stub: its streamed answer held no event it could read"):
        await turn(agent(tmp_path, provider_server, retries=QUICK))
    path = agent(tmp_path, provider_server, retries=QUICK)
    with anyio.fail_after(TURN_LIMIT):
        async with load_agent(path, host=Host(answers_questions=False)) as runtime:
            with pytest.raises(ModelError, match=r"gpt-stub: its answer is not valid JSON \(Unterminated"):
                await runtime.graph.ainvoke({"messages": [HumanMessage("hi")]}, runtime.config())
    assert len(provider_server.completions()) == 2
