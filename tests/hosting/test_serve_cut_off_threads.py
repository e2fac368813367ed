"""A request of ``serve``'s callers on a thread whose last turn was cut off (stopped in the middle
of a tool call) closes that turn before its own: the model is sent every call answered (as
stopped: it may have acted), and the caller is told: in ``ask``'s result (``note``), in the
OpenAI-compatible API's ``X-MCP-Run-Note`` header, in an A2A task's status messages. In process:
the served agent, a gates server whose held calls are the cut, MCP over memory, the HTTP APIs over
an ASGI transport."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import get_message_text, new_text_message
from a2a.types import Role, SendMessageRequest
from builders import write_manifest
from mcp import Client
from mcp_servers import gates as gates_server

from runner.agent.nodes import STOPPED_TEXT
from runner.agent.resume import CONTINUE, close_cut_off_turn, cut_off_turn
from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn
from runner.hosting.a2a_api import a2a_app
from runner.hosting.chat_completions.app import ChatCompletions, served_agents
from runner.hosting.mcp.handlers import AgentService
from runner.manifest import MAIN_AGENT

pytestmark = pytest.mark.anyio
LIMIT = 60
CUT = "the thread's last turn was cut off at step gates__hold: closed"


def hold(key: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "gates__hold", "args": {"key": key}}]}


async def cut_off(runtime: Runtime, gates: gates_server.Gates, thread: str, key: str, *,
                  agent: str = MAIN_AGENT) -> None:
    """A turn of ``agent`` on ``thread`` stopped while a call of gates__hold ``key`` runs (as
    Ctrl-C or a kill leaves it: steps to run, a call without a result)."""
    async def turn() -> None:
        async for _ in stream_turn(runtime, "go", thread_id=thread, agent=agent):
            pass

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as group:
            group.start_soon(turn)
            await anyio.to_thread.run_sync(gates.wait_for, f"enter {key}")
            group.cancel_scope.cancel()
    assert await cut_off_turn(runtime, thread, agent=agent) is not None


def sent_results(runtime: Runtime) -> list[Any]:
    """The tool results the model was sent in its last call."""
    return [m for m in runtime.model.primary.received[-1] if m.type == "tool"]  # type: ignore[attr-defined]


def streamed_text(body: str) -> str:
    """The text of a streamed answer: its chunks' deltas, in order."""
    chunks = [json.loads(line.removeprefix("data: ")) for line in body.splitlines()
              if line.startswith("data: {")]
    return "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks if chunk["choices"])


@pytest.fixture
def served(tmp_path: Path, gates: tuple[gates_server.Gates, str]) -> Path:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([hold("a"), hold("b"), hold("c"), hold("d"),
                                                             "Answer one.", "Answer two.", "Answer three.",
                                                             "Answer four.", "Answer five."]))
    return write_manifest(tmp_path, {"gates": {"url": gates[1]}}, name="served",
                          model={"id": "scripted", "script": "script.yaml"},
                          checkpointer="sqlite:///state.sqlite")


async def test_ask_the_openai_api_and_a2a_on_a_cut_off_thread_close_its_turn_and_say_so(
    served: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    async with load_agent(served) as runtime:
        await cut_off(runtime, gates[0], "over-mcp", "a")
        await cut_off(runtime, gates[0], "over-api", "b")
        await cut_off(runtime, gates[0], "over-a2a", "c")
        await cut_off(runtime, gates[0], "streamed", "d")
        service = AgentService(runtime)
        with anyio.fail_after(LIMIT):
            async with Client(service.server) as client:
                asked = await client.call_tool("ask", {"message": "again", "thread": "over-mcp"})
        assert not asked.is_error, asked
        assert asked.structured_content is not None
        assert asked.structured_content["answer"] == "Answer one."
        assert asked.structured_content["note"].startswith(CUT)
        [result] = sent_results(runtime)
        assert result.content == STOPPED_TEXT  # not "did not run": the call had started
        assert await cut_off_turn(runtime, "over-mcp") is None

        agents: Callable[[], Any] = lambda: served_agents(runtime)  # noqa: E731
        api = ChatCompletions(agents, service.scheduler)
        with anyio.fail_after(LIMIT):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api),
                                         base_url="http://served") as http:
                response = await http.post("/v1/chat/completions", headers={"X-MCP-Run-Thread": "over-api"},
                                           json={"model": "served",
                                                 "messages": [{"role": "user", "content": "again"}]})
                sent = sent_results(runtime)
                again = await http.post("/v1/chat/completions", headers={"X-MCP-Run-Thread": "over-api"},
                                        json={"model": "served",
                                              "messages": [{"role": "user", "content": "and now?"}]})
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "Answer two."
        assert response.headers["X-MCP-Run-Note"].startswith(CUT)
        assert [result.content for result in sent] == [STOPPED_TEXT]
        assert again.status_code == 200, again.text

        with anyio.fail_after(LIMIT):  # streamed: the note comes with the headers, before the text
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api),
                                         base_url="http://served") as http:
                streamed = await http.post("/v1/chat/completions", headers={"X-MCP-Run-Thread": "streamed"},
                                           json={"model": "served", "stream": True,
                                                 "messages": [{"role": "user", "content": "again"}]})
        assert streamed.status_code == 200, streamed.text
        assert streamed_text(streamed.text) == "Answer four."
        assert streamed.headers["X-MCP-Run-Note"].startswith(CUT)
        assert "X-MCP-Run-Note" not in again.headers  # closed once: nothing was cut off since

        app, turns = a2a_app(runtime, service.scheduler, "http://served/a2a")
        with anyio.fail_after(LIMIT):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://served"
                                         ) as http:
                a2a = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url("http://served/a2a")
                message = new_text_message("again", context_id="over-a2a", role=Role.ROLE_USER)
                try:
                    responses = [r async for r in a2a.send_message(SendMessageRequest(message=message))]
                finally:
                    await a2a.close()
                    await turns.stop()
        said = [get_message_text(r.status_update.status.message) for r in responses
                if r.HasField("status_update") and r.status_update.status.HasField("message")]
        assert any(text.startswith(CUT) for text in said), said
        assert said[-1] == "Answer five."
        assert [result.content for result in sent_results(runtime)] == [STOPPED_TEXT]


async def test_a_cut_off_call_whose_id_an_earlier_turn_answered_is_the_one_found_and_closed(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([
        {"tool_calls": [{"name": "gates__note", "args": {"text": "first"}, "id": "same"}]}, "Noted.",
        {"tool_calls": [{"name": "gates__hold", "args": {"key": "again"}, "id": "same"}]}, "Answer."]))
    path = write_manifest(tmp_path, {"gates": {"url": gates[1]}}, name="served",
                          model={"id": "scripted", "script": "script.yaml"}, checkpointer="sqlite:///state.sqlite")
    async with load_agent(path) as runtime:
        with anyio.fail_after(LIMIT):
            [final] = [e async for e in stream_turn(runtime, "note it", thread_id="reused")
                       if e["type"] == "final"]
        assert final["text"] == "Noted."
        await cut_off(runtime, gates[0], "reused", "again")
        turn = await cut_off_turn(runtime, "reused")
        assert turn is not None
        assert (turn.step, turn.calls) == ("gates__hold", ("same",))
        await close_cut_off_turn(runtime, turn)
        with anyio.fail_after(LIMIT):
            [final] = [e async for e in stream_turn(runtime, "and now?", thread_id="reused")
                       if e["type"] == "final"]
    assert final["text"] == "Answer."
    assert [m.content for m in sent_results(runtime)] == ["noted first", STOPPED_TEXT]


@pytest.mark.parametrize(("workflow", "served", "step"), [
    ({"parallel": ["one", "two"], "template": "{{ answers }}"}, None, "pipeline › one › gates__hold"),
    ({"parallel": ["one", "two"], "template": "{{ answers }}"}, "pipeline", "pipeline › one › gates__hold"),
    ({"chain": ["two", "one"]}, "pipeline", "pipeline › 1-one › gates__hold"),
])
async def test_a_workflow_cut_off_in_a_members_tool_call_names_the_workflow_the_member_and_the_tool(
    tmp_path: Path, gates: tuple[gates_server.Gates, str], workflow: dict[str, Any], served: str | None,
    step: str,
) -> None:
    key = f"{served}-{next(iter(workflow))}"
    main = [{"tool_calls": [{"name": "pipeline", "args": {"task": "go"}}]}, "Main: done."]
    for name, script in {"main": main, "one": [hold(key), "One: done."], "two": ["Two: done."]}.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(script))
    agents: dict[str, Any] = {name: {"description": name, "tools": ["gates"],
                                     "model": {"id": "scripted", "script": f"{name}.yaml"}}
                              for name in ("one", "two")}
    agents["pipeline"] = {"description": "The workflow.", **workflow}
    path = write_manifest(tmp_path, {"gates": {"url": gates[1]}}, name="served",
                          model={"id": "scripted", "script": "main.yaml"}, checkpointer="sqlite:///state.sqlite",
                          agent={"agents": ["pipeline"]}, agents=agents)
    async with load_agent(path) as runtime:
        await cut_off(runtime, gates[0], "cut", key, agent=served or MAIN_AGENT)
        cut = await cut_off_turn(runtime, "cut", agent=served or MAIN_AGENT)
        assert cut is not None
        assert cut.step == step
        if served is None:  # /resume: each call run again is told as it starts, before its result
            gates[0].open(key)
            with anyio.fail_after(LIMIT):
                told = [(e["type"], e.get("agent"), e["id"]) async for e in stream_turn(runtime, CONTINUE,
                                                                                         thread_id="cut")
                        if e["type"] in ("tool_call", "tool_result")]
            assert told == [("tool_call", None, "call_main_0_0"), ("tool_call", "one", "call_one_0_0"),
                            ("tool_result", "one", "call_one_0_0"), ("tool_result", None, "call_main_0_0")]
