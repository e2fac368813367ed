"""Structured output (``output:``) in the graph: the final answer is an object valid against the
schema, by the provider's own structured output or a final_answer tool; an answer that does not
validate goes back to the model with its errors up to ``output.retries``, then the turn fails; the
object is kept with the answer in the checkpoint; the offline model answers with a valid object."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
import yaml
from builders import scripted_model, server, write_manifest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from runner.agent.reload import reload_runtime
from runner.agent.runtime import load_agent
from runner.agent.structured import OUTPUT_KEY
from runner.agent.turns import stream_turn
from runner.errors import OutputError

pytestmark = pytest.mark.anyio
LIMIT = 60

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}},
    "required": ["city", "temperature"],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # LangGraph runs on asyncio only


def write_agent(folder: Path, script: list[Any], *, servers: dict[str, Any] | None = None,
                checkpointer: str = "memory", **output: Any) -> Path:
    return write_manifest(folder, servers or {}, name="structured", checkpointer=checkpointer,
                          model=scripted_model(folder, script), output={"schema": WEATHER, **output})


async def turn(runtime: Any, text: str) -> list[dict[str, Any]]:
    with anyio.fail_after(LIMIT):
        return [event async for event in stream_turn(runtime, text)]


async def test_an_answer_that_does_not_validate_goes_back_with_its_errors_until_one_does(
        tmp_path: Path) -> None:
    script = ["It is sunny.", {"output": {"city": 3, "temperature": 21}},
              {"output": {"city": "Paris", "temperature": 21.5}}]
    async with load_agent(write_agent(tmp_path, script)) as runtime:
        events = await turn(runtime, "weather in Paris?")
        model = runtime.generation.model.primary  # the scripted model: what each call received
        state = await runtime.graph.aget_state(runtime.config())
    final = events[-1]
    assert final["type"] == "final" and final["output"] == {"city": "Paris", "temperature": 21.5}
    assert not [event for event in events if event["type"] == "token"]  # the object is shown whole
    second, third = model.received[1][-1], model.received[2][-1]
    assert isinstance(second, HumanMessage) and "the answer is not JSON" in second.text
    assert isinstance(third, HumanMessage)
    assert "at city: 3 is not of type 'string'" in third.text
    # Only the accepted answer enters the thread: no rejected attempt, no error sent back.
    messages = state.values["messages"]
    assert [type(message) for message in messages] == [HumanMessage, AIMessage]
    assert messages[-1].response_metadata[OUTPUT_KEY] == {"city": "Paris", "temperature": 21.5}


async def test_the_turn_fails_with_the_validation_errors_once_the_retries_are_spent(tmp_path: Path) -> None:
    script = [{"output": {"city": "Paris"}}, {"output": {"temperature": "warm"}}, "unused"]
    async with load_agent(write_agent(tmp_path, script, retries=1)) as runtime:
        with pytest.raises(OutputError) as failed:
            await turn(runtime, "weather?")
        assert len(runtime.generation.model.primary.received) == 2  # one answer, one retry
    assert failed.value.problems == ["at the root: 'city' is a required property",
                                     "at temperature: 'warm' is not of type 'number'"]
    assert "after 2 answers (output.retries: 1)" in str(failed.value)


async def test_with_the_tool_method_the_model_uses_tools_then_answers_by_calling_final_answer(
        tmp_path: Path) -> None:
    script = [{"tool_calls": [{"name": "demo__echo", "args": {"text": "Paris"}}]},
              {"output": {"city": "Paris", "temperature": "hot"}},
              {"output": {"city": "Paris", "temperature": 30}}]
    path = write_agent(tmp_path, script, servers={"demo": server("demo")}, method="tool")
    async with load_agent(path) as runtime:
        events = await turn(runtime, "weather?")
        model = runtime.generation.model.primary
        state = await runtime.graph.aget_state(runtime.config())
    assert "final_answer" in model.calls[0] and "demo__echo" in model.calls[0]
    assert [e["type"] for e in events if e["type"] != "usage"] == ["tool_call", "tool_result", "final"]
    assert events[-1]["output"] == {"city": "Paris", "temperature": 30}
    assert events[-1]["reason"] == "stop"
    rejected = model.received[2][-1]  # the final_answer call's own result carries the errors
    assert isinstance(rejected, ToolMessage) and rejected.status == "error"
    assert "at temperature: 'hot' is not of type 'number'" in rejected.text
    # No final_answer call is left in the thread without a result (providers refuse those).
    messages = state.values["messages"]
    assert [type(message) for message in messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert not messages[-1].tool_calls and messages[-1].response_metadata[OUTPUT_KEY]["temperature"] == 30


async def test_the_answer_object_is_kept_in_the_checkpoint_across_restarts(tmp_path: Path) -> None:
    script = [{"output": {"city": "Oslo", "temperature": -3}}]
    path = write_agent(tmp_path, script, checkpointer="sqlite:///state.sqlite")
    async with load_agent(path, thread_id="kept") as runtime:
        await turn(runtime, "weather?")
    async with load_agent(path, thread_id="kept") as runtime:
        state = await runtime.graph.aget_state(runtime.config())
    assert state.values["messages"][-1].response_metadata[OUTPUT_KEY] == {"city": "Oslo", "temperature": -3}


RICH = {
    "type": "object",
    "$defs": {"place": {"type": "object", "properties": {"name": {"type": "string", "minLength": 3}},
                        "required": ["name"]}},
    "properties": {
        "summary": {"type": "string"},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "count": {"type": "integer", "minimum": 2},
        "places": {"type": "array", "items": {"$ref": "#/$defs/place"}, "minItems": 1},
        "ok": {"type": "boolean"},
    },
    "required": ["summary", "unit", "count", "places", "ok"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("method", ["native", "tool"])
async def test_the_offline_model_answers_with_an_object_that_validates(tmp_path: Path, method: str) -> None:
    path = write_manifest(tmp_path, {"demo": server("demo")}, name="offline", checkpointer="memory",
                          model="offline", output={"schema": RICH, "method": method})
    async with load_agent(path) as runtime:
        events = await turn(runtime, 'demo__echo {"text": "hi"}')
    final = events[-1]
    jsonschema.validate(final["output"], RICH)
    assert final["output"]["summary"] == "demo__echo returned: hi"  # its answer, in the text field
    assert [e["type"] for e in events if e["type"] != "usage"] == ["tool_call", "tool_result", "final"]


# --------------------------------------------------------------------------- the provider path
# A small OpenAI-compatible stub of its own (tests/provider_server.py was not on main yet): the
# real langchain-openai client, streaming as the chat does, against loopback.


class _Completions(BaseHTTPRequestHandler):
    """Answers each POST /v1/chat/completions with the next scripted reply; records the bodies."""

    replies: list[dict[str, Any]]
    bodies: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.bodies.append(body)
        reply = self.replies.pop(0) if self.replies else {"content": "nothing scripted"}
        message = {"role": "assistant", "content": reply.get("content")}
        if "tool" in reply:
            name, args = reply["tool"]
            message["tool_calls"] = [{"id": f"call_{len(self.bodies)}", "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(args)}}]
        finish = "tool_calls" if "tool" in reply else "stop"
        if not body.get("stream"):
            self._send("application/json", json.dumps({
                "id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}]}))
            return
        delta = {**message, "tool_calls": [{"index": 0, **call} for call in message.get("tool_calls", [])]}
        chunks = [{"index": 0, "delta": delta, "finish_reason": None},
                  {"index": 0, "delta": {}, "finish_reason": finish}]
        self._send("text/event-stream", "".join(
            "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0,
                                   "model": body["model"], "choices": [choice]}) + "\n\n"
            for choice in chunks) + "data: [DONE]\n\n")

    def _send(self, kind: str, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def openai_stub(replies: list[dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    bodies: list[dict[str, Any]] = []
    handler = type("Handler", (_Completions,), {"replies": list(replies), "bodies": bodies})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", bodies
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def provider_agent(folder: Path, url: str, **output: Any) -> Path:
    model = {"id": "openai:gpt-4.1-mini", "base_url": url, "api_key_env": "STUB_OPENAI_KEY"}
    return write_manifest(folder, {"demo": server("demo")}, name="provider", checkpointer="memory",
                          model=model, output={"schema": WEATHER, **output})


@pytest.fixture
def stub_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_OPENAI_KEY", "sk-stub")


async def test_an_openai_compatible_model_is_asked_with_response_format_and_its_answer_checked(
        tmp_path: Path, stub_key: None) -> None:
    replies = [{"content": '{"city": "Paris"}'}, {"content": '{"city": "Paris", "temperature": 20}'}]
    with openai_stub(replies) as (url, bodies):
        async with load_agent(provider_agent(tmp_path, url)) as runtime:
            events = await turn(runtime, "weather?")
    assert events[-1]["output"] == {"city": "Paris", "temperature": 20}
    assert [body["response_format"]["type"] for body in bodies] == ["json_schema", "json_schema"]
    assert bodies[0]["response_format"]["json_schema"]["schema"] == WEATHER
    assert "'temperature' is a required property" in bodies[1]["messages"][-1]["content"]


async def test_with_the_tool_method_an_openai_model_is_offered_final_answer_beside_the_mcp_tools(
        tmp_path: Path, stub_key: None) -> None:
    replies = [{"tool": ("demo__echo", {"text": "x"})},
               {"tool": ("final_answer", {"city": "Rome", "temperature": 25})}]
    with openai_stub(replies) as (url, bodies):
        path = provider_agent(tmp_path, url, method="tool")
        async with load_agent(path) as runtime:
            events = await turn(runtime, "weather?")
    assert [e["type"] for e in events if e["type"] != "usage"] == ["tool_call", "tool_result", "final"]
    assert events[-1]["output"] == {"city": "Rome", "temperature": 25}
    offered = {tool["function"]["name"]: tool["function"] for tool in bodies[0]["tools"]}
    assert "demo__echo" in offered
    assert offered["final_answer"]["parameters"]["required"] == ["city", "temperature"]
    assert all("response_format" not in body for body in bodies)


async def test_a_schema_file_is_watched_and_a_reload_checks_answers_against_its_edit(
        tmp_path: Path) -> None:
    schema_file = tmp_path / "answer.yaml"
    schema_file.write_text(yaml.safe_dump(WEATHER))
    script = [{"output": {"city": "Paris"}}, {"output": {"city": "Paris"}}]
    path = write_manifest(tmp_path, {}, name="structured", checkpointer="memory",
                          model=scripted_model(tmp_path, script),
                          output={"schema": "answer.yaml", "retries": 0})
    async with load_agent(path) as runtime:
        assert schema_file.resolve() in runtime.files  # watch mode follows it
        with pytest.raises(OutputError):
            await turn(runtime, "weather?")  # temperature is required
        schema_file.write_text(yaml.safe_dump({**WEATHER, "required": ["city"]}))
        await reload_runtime(runtime, changed_files={schema_file.resolve()})
        events = await turn(runtime, "again?")
    assert events[-1]["output"] == {"city": "Paris"}
