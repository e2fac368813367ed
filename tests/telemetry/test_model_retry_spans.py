"""Each retry of a model request is a span under its model step, sent to a real OTLP/HTTP
receiver on loopback (tests/otlp_receiver.py), for a turn against the local OpenAI-compatible
server (tests/provider_server.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from builders import write_manifest
from otlp_receiver import OtlpReceiver
from provider_server import Failure, ProviderServer, Reply

from runner.agent.host import Host
from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


async def test_a_retried_model_request_records_a_retry_span_under_its_model_step(
        tmp_path: Path, receiver: OtlpReceiver, provider_server: ProviderServer) -> None:
    provider_server.script(Failure(429, retry_after="0.05"), Failure(503), Reply("Hello."))
    path = write_manifest(tmp_path, {}, name="retrying", checkpointer="memory",
                          model=provider_server.model(retries={"initial_delay": "10ms"}))
    environ = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
               "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    with anyio.fail_after(60):
        async with load_agent(path, environ=environ, host=Host(answers_questions=False)) as runtime:
            events = [event async for event in stream_turn(runtime, "hi")]
    assert events[-1]["type"] == "final"
    spans = receiver.spans()
    retries = sorted((s for s in spans if s.name == "retry openai:gpt-stub"),
                     key=lambda s: s.attributes["mcp_run.retry.attempt"])
    assert [(s.attributes["mcp_run.retry.attempt"], s.attributes["mcp_run.retry.reason"],
             s.attributes["http.response.status_code"]) for s in retries] == [
        (2, "rate_limited", 429), (3, "server_error", 503)]
    assert retries[0].attributes["mcp_run.retry.delay"] == 0.05
    (step,) = [s for s in spans if s.name.startswith("chat ")]
    assert {s.parent_id for s in retries} == {step.span_id}
