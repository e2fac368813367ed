"""OpenTelemetry export end to end: a real OTLP/HTTP receiver on loopback (tests/otlp_receiver.py)
receives what real turns over real servers record: the span tree, the metrics, the trace context
the servers got, and never a secret."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from builders import MCP_RUN, ROOT, copy_bundled_agent, server, write_manifest
from langgraph.types import Command
from mcp import Client, StdioServerParameters
from mcp_servers import traced
from otlp_receiver import OtlpReceiver, ReceivedSpan

from runner.agent.checks import checked_agent
from runner.agent.host import Host
from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn
from runner.errors import ManifestError
from runner.manifest.loading import parse_manifest

pytestmark = pytest.mark.anyio
FAST = {"timeout": "10s", "startup_timeout": "30s",
        "restart": {"max_attempts": 3, "backoff": "50ms", "max_backoff": "200ms"}}
ENV_CANARY = "canary-env-7f3a9c"
HEADER_CANARY = "canary-header-5d21e8"
SPAN_CLIENT = 3  # SpanKind.CLIENT in OTLP


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


def write_script(folder: Path, turns: list[Any]) -> str:
    (folder / "turns.yaml").write_text(yaml.safe_dump(turns))
    return "turns.yaml"


def otel_environ(receiver: OtlpReceiver, **more: str) -> dict[str, str]:
    keep = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    return {**keep, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, **more}


def by_name(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [span for span in spans if span.name == name]


def only(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = by_name(spans, name)
    assert len(found) == 1, (name, sorted(s.name for s in spans))
    return found[0]


async def run_turn(path: Path, environ: dict[str, str], text: str = "go",
                   before: Callable[[Any], Any] | None = None) -> list[dict[str, Any]]:
    with anyio.fail_after(90):
        async with load_agent(path, environ=environ, host=Host(answers_questions=False)) as runtime:
            if before is not None:
                await before(runtime)
            return [event async for event in stream_turn(runtime, text)]


async def test_a_turn_with_a_fallback_and_a_restart_exports_its_span_tree_metrics_and_no_secret(
    tmp_path: Path, receiver: OtlpReceiver, serve_http: Callable[..., str]
) -> None:
    url = serve_http(traced.build())
    servers = {
        "primary": server("demo", fallback="backup", env={"CANARY_TOKEN": ENV_CANARY},
                          tools={"timeouts": {"sleep": "200ms"}}),
        "backup": server("demo", expose=False),
        "local": server("traced"),
        "remote": {"url": url, "headers": {"Authorization": f"Bearer {HEADER_CANARY}"}},
    }
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "primary__sleep", "args": {"seconds": 0.5}}]},
        {"tool_calls": [{"name": "local__trace_context"}, {"name": "remote__trace_context"}]},
        "done",
    ])
    path = write_manifest(tmp_path, servers, name="watched", defaults=FAST, checkpointer="memory",
                          model={"id": "scripted", "script": script})

    async def restart_primary(runtime: Any) -> None:
        primary = runtime.fleet.connections["primary"]
        os.kill(primary.pid, signal.SIGKILL)
        await primary.wait_until(lambda c: c.sessions == 2 and c.status == "ready")

    events = await run_turn(path, otel_environ(receiver), before=restart_primary)

    spans = receiver.spans()
    turn = only(spans, "invoke_agent watched")
    assert turn.parent_id == ""
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.agent.name"] == "watched"
    assert turn.attributes["gen_ai.conversation.id"]
    assert turn.attributes["mcp_run.generation"] == 1
    assert turn.resource["service.name"] == "watched"
    steps = by_name(spans, "chat mcp-run-scripted")
    assert len(steps) == 3
    assert all(s.parent_id == turn.span_id and s.kind == SPAN_CLIENT for s in steps)
    assert all(s.attributes["gen_ai.operation.name"] == "chat" for s in steps)
    assert all(s.attributes["gen_ai.provider.name"] == "mcp_run" for s in steps)

    sleep = only(spans, "execute_tool primary__sleep")
    assert sleep.parent_id == turn.span_id and sleep.trace_id == turn.trace_id
    assert sleep.attributes["gen_ai.tool.name"] == "primary__sleep"
    assert sleep.attributes["mcp_run.tool.original_name"] == "sleep"
    assert sleep.attributes["mcp_run.server"] == "primary"
    assert sleep.attributes["mcp_run.server.transport"] == "stdio"
    assert sleep.attributes["mcp.protocol.version"]
    assert sleep.attributes["mcp_run.tool.arguments_size"] == len('{"seconds": 0.5}')
    assert sleep.attributes["mcp_run.tool.result_size"] > 0
    assert sleep.attributes["mcp_run.fallback.server"] == "backup"
    assert "fallback" in sleep.events and sleep.status_code != 2
    attempts = sorted(by_name(spans, "tools/call sleep"), key=lambda s: s.attributes["mcp_run.server"])
    assert [a.attributes["mcp_run.server"] for a in attempts] == ["backup", "primary"]
    assert all(a.parent_id == sleep.span_id and a.kind == SPAN_CLIENT for a in attempts)
    assert all(a.attributes["mcp.method.name"] == "tools/call" for a in attempts)
    assert all(a.attributes["gen_ai.tool.name"] == "primary__sleep" for a in attempts)
    assert all(a.attributes["mcp.tool.name"] == "sleep" for a in attempts)
    assert all(a.attributes["network.transport"] == "pipe" for a in attempts)
    assert attempts[1].attributes["error.type"] == "ServerTimeoutError" and attempts[1].status_code == 2
    assert attempts[0].status_code != 2

    remote = only(spans, "execute_tool remote__trace_context")
    remote_call = next(s for s in by_name(spans, "tools/call trace_context") if s.parent_id == remote.span_id)
    assert remote_call.attributes["network.transport"] == "tcp"
    assert remote_call.attributes["server.address"] == "127.0.0.1"

    restart = only(spans, "server restart primary")
    assert restart.trace_id != turn.trace_id and restart.parent_id == ""
    assert "SIGKILL" in restart.attributes["mcp_run.restart.reason"]
    assert {s.name for s in spans} >= {"server start primary", "server start backup",
                                       "server start local", "server start remote"}

    assert receiver.metric_total("mcp_run.tool.calls", {"mcp_run.status": "ok"}) == 3
    assert receiver.metric_total("mcp_run.tool.calls", {"gen_ai.tool.name": "primary__sleep"}) == 1
    assert receiver.metric_total("mcp_run.tool.duration") == 3
    assert receiver.metric_total("mcp.client.operation.duration") == 4
    assert receiver.metric_total("mcp.client.operation.duration", {"error.type": "ServerTimeoutError"}) == 1
    for metric in ("mcp_run.tool.calls", "mcp.client.operation.duration", "mcp_run.tool.fallbacks"):
        assert receiver.metric_total(metric, {"gen_ai.tool.name": "primary__sleep"}) >= 1, metric
    assert receiver.metric_total("mcp_run.tool.fallbacks", {"mcp.tool.name": "sleep"}) == 1
    assert receiver.metric_total("mcp_run.tool.fallbacks", {"mcp_run.fallback.server": "backup"}) == 1
    assert receiver.metric_total("mcp_run.server.restarts", {"mcp_run.server": "primary"}) == 1
    assert receiver.metric_total("mcp_run.server.downtime", {"mcp_run.server": "primary"}) == 1
    assert receiver.metric_total("gen_ai.client.operation.duration") == 3

    final = events[-1]
    assert final["type"] == "final" and final["trace_id"] == turn.trace_id and final["ms"] > 0
    results = [e for e in events if e["type"] == "tool_result"]
    assert len(results) == 3 and all(e["ms"] >= 0 for e in results)

    for body in [*receiver.bodies, json.dumps(events).encode()]:
        assert ENV_CANARY.encode() not in body and HEADER_CANARY.encode() not in body
    assert all(HEADER_CANARY not in " ".join(headers.values()) for headers in receiver.headers)


async def test_the_trace_context_reaches_a_stdio_server_in_meta_and_an_http_server_in_its_header(
    tmp_path: Path, receiver: OtlpReceiver, serve_http: Callable[..., str]
) -> None:
    servers = {"local": server("traced"), "remote": {"url": serve_http(traced.build())}}
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "local__trace_context"}, {"name": "remote__trace_context"}]}, "done"])
    path = write_manifest(tmp_path, servers, defaults=FAST, checkpointer="memory",
                          model={"id": "scripted", "script": script})
    events = await run_turn(path, otel_environ(receiver))

    seen = {e["id"]: json.loads(e["text"]) for e in events if e["type"] == "tool_result"}
    local, remote = seen["call_turns_0_0"], seen["call_turns_0_1"]
    spans = receiver.spans()
    calls = {s.span_id: s for s in by_name(spans, "tools/call trace_context")}
    turn = only(spans, "invoke_agent test")
    for received in (local, remote):
        version, trace_id, parent_id, flags = received["meta_traceparent"].split("-")
        assert trace_id == turn.trace_id and parent_id in calls and int(flags, 16) & 1  # sampled
    assert calls[local["meta_traceparent"].split("-")[2]].attributes["mcp_run.server"] == "local"
    assert local["header_traceparent"] is None
    assert remote["header_traceparent"] == remote["meta_traceparent"]


async def test_without_telemetry_events_carry_durations_and_no_trace_and_servers_get_no_context(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path, [{"tool_calls": [{"name": "local__trace_context"}]}, "done"])
    path = write_manifest(tmp_path, {"local": server("traced")}, defaults=FAST, checkpointer="memory",
                          model={"id": "scripted", "script": script})
    environ = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    events = await run_turn(path, environ)
    (result,) = [e for e in events if e["type"] == "tool_result"]
    assert json.loads(result["text"])["meta_traceparent"] is None and result["ms"] >= 0
    assert events[-1]["trace_id"] is None and events[-1]["ms"] > 0


def test_telemetry_off_imports_no_part_of_the_recorder(tmp_path: Path) -> None:
    script = write_script(tmp_path, ["done"])
    write_manifest(tmp_path, {}, model={"id": "scripted", "script": script}, checkpointer="memory")
    check = ("import sys, anyio\n"
             "from runner.agent.runtime import load_agent\n"
             "from runner.agent.turns import stream_turn\n"
             "async def main():\n"
             "    async with load_agent('agent.yaml') as runtime:\n"
             "        [e async for e in stream_turn(runtime, 'hi')]\n"
             "anyio.run(main)\n"
             "print(sorted(m for m in sys.modules if m.startswith('runner.telemetry.')))\n")
    environ = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    result = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=environ, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_readme_command_with_an_otlp_endpoint_sends_a_complete_trace_and_metrics(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    section = (ROOT / "README.md").read_text().split("## Telemetry\n", 1)[1].split("\n## ", 1)[0]
    line = next(line for line in section.splitlines() if line.startswith("OTEL_EXPORTER_OTLP_ENDPOINT="))
    assignment, program, *args = shlex.split(line)
    assert program == "mcp-run" and assignment == "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"
    folder = copy_bundled_agent(tmp_path)
    result = subprocess.run([str(MCP_RUN), *args, "--json"], cwd=folder, capture_output=True, text=True,
                            env=otel_environ(receiver, OTEL_SERVICE_NAME="from-env"), timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    final = json.loads(result.stdout.splitlines()[-1])
    spans = receiver.spans()
    turn = only(spans, "invoke_agent notes-assistant")
    assert final["trace_id"] == turn.trace_id
    tool = only(spans, "execute_tool notes__calculate")
    call = only(spans, "tools/call calculate")
    steps = by_name(spans, "chat mcp-run-offline")
    assert (tool.parent_id, call.parent_id) == (turn.span_id, tool.span_id)
    assert len(steps) == 2 and all(step.parent_id == turn.span_id for step in steps)
    assert {s.span_id for s in spans if s.trace_id == turn.trace_id} == {
        turn.span_id, tool.span_id, call.span_id, *(step.span_id for step in steps)}
    assert turn.resource["service.name"] == "from-env"
    assert only(spans, "server start notes").attributes["mcp_run.server.transport"] == "stdio"
    assert receiver.metric_total("mcp_run.tool.calls", {"gen_ai.tool.name": "notes__calculate"}) == 1
    assert receiver.metric_total("gen_ai.client.operation.duration") == 2


def test_ctrl_c_during_a_turn_still_exports_the_stopped_turn(tmp_path: Path, receiver: OtlpReceiver) -> None:
    script = write_script(tmp_path, [{"tool_calls": [{"name": "demo__sleep", "args": {"seconds": 60}}]}])
    write_manifest(tmp_path, {"demo": server("demo")}, name="stopped", checkpointer="memory",
                   model={"id": "scripted", "script": script})
    process = subprocess.Popen([str(MCP_RUN), "agent.yaml", "-p", "wait", "--json"], cwd=tmp_path,
                               env=otel_environ(receiver), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        while json.loads(process.stdout.readline())["type"] != "tool_call":
            pass
        receiver.wait_for_span("server start demo")  # spans are exported while the turn runs
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    turn = only(receiver.spans(), "invoke_agent stopped")
    tool = only(receiver.spans(), "execute_tool demo__sleep")
    assert tool.parent_id == turn.span_id and tool.attributes["error.type"] == "cancelled"
    assert turn.status_code == 2 and turn.attributes["error.type"] == "cancelled"


async def test_capture_content_puts_arguments_and_results_in_the_tool_span(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    echo = {"name": "local__echo", "args": {"text": "visible"}}
    script = write_script(tmp_path, [{"tool_calls": [echo]}, "ok"])
    path = write_manifest(tmp_path, {"local": server("traced")}, checkpointer="memory",
                          model={"id": "scripted", "script": script},
                          telemetry={"service_name": "svc", "capture_content": True,
                                     "resource_attributes": {"deployment.environment": "test"}})
    await run_turn(path, otel_environ(receiver))
    tool = only(receiver.spans(), "execute_tool local__echo")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"text": "visible"}
    assert "visible" in tool.attributes["gen_ai.tool.call.result"]
    assert tool.resource["service.name"] == "svc" and tool.resource["deployment.environment"] == "test"


async def test_enabled_false_wins_over_the_endpoint_variable(tmp_path: Path, receiver: OtlpReceiver) -> None:
    script = write_script(tmp_path, ["ok"])
    path = write_manifest(tmp_path, {}, checkpointer="memory", model={"id": "scripted", "script": script},
                          telemetry={"enabled": False})
    events = await run_turn(path, otel_environ(receiver))
    assert events[-1]["trace_id"] is None and receiver.bodies == []


async def test_a_manifest_asking_for_telemetry_without_the_packages_gets_a_located_error_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("runner.telemetry.exporting", "runner.telemetry.recorder"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    script = write_script(tmp_path, ["ok"])
    path = write_manifest(tmp_path, {}, checkpointer="memory", model={"id": "scripted", "script": script},
                          telemetry={"enabled": True})
    with pytest.raises(ManifestError) as raised:
        await run_turn(path, {})
    (problem,) = raised.value.problems
    assert (problem.path, problem.line) == ("telemetry.enabled", 8)
    assert "pip install 'mcp-run[otel]'" in problem.message

    path = write_manifest(tmp_path, {}, checkpointer="memory", model={"id": "scripted", "script": script})
    events = await run_turn(path, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert events[-1]["text"] == "ok"
    assert "pip install 'mcp-run[otel]'" in caplog.text


@pytest.mark.parametrize(("block", "message"), [
    ({"enabled": "sometimes"}, "telemetry.enabled"),
    ({"capture": True}, "telemetry.capture"),
    ({"resource_attributes": {"k": [1]}}, "telemetry.resource_attributes.k"),
])
def test_a_bad_telemetry_block_is_a_located_error(
    tmp_path: Path, block: dict[str, Any], message: str
) -> None:
    path = write_manifest(tmp_path, {}, telemetry=block)
    with pytest.raises(ManifestError) as raised:
        parse_manifest(path.read_text(), file=str(path), path=path)
    assert any(problem.path.startswith(message) for problem in raised.value.problems), raised.value


async def test_an_approval_wait_a_list_change_a_reload_and_token_usage_are_recorded(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "demo__echo", "args": {"text": "hi"}}],
         "usage": {"input_tokens": 120, "output_tokens": 7}},
        {"text": "done", "usage": {"input_tokens": 150, "output_tokens": 3}},
    ])
    servers = {"demo": server("demo", tools={"approve": ["echo"]}), "dyn": server("dynamic")}
    path = write_manifest(tmp_path, servers, name="waits", defaults=FAST, checkpointer="memory",
                          model={"id": "scripted", "script": script})
    with anyio.fail_after(90):
        async with load_agent(path, environ=otel_environ(receiver), thread_id="t1") as runtime:
            first = [event async for event in stream_turn(runtime, "go")]
            assert first[-1]["type"] == "approval"
            await anyio.sleep(0.5)  # the person deciding: a wait the tool's duration leaves out
            resumed_at = anyio.current_time()
            second = [e async for e in stream_turn(runtime, Command(resume={"action": "approve"}))]
            resumed_for = anyio.current_time() - resumed_at
            (result,) = [e for e in second if e["type"] == "tool_result"]
            assert 0 <= result["ms"] <= resumed_for * 1000  # counted from the resume, not the ask
            assert second[-1]["text"] == "done"
            async with runtime.fleet.subscribe() as changes:
                await runtime.caller.call("dyn__add_tool", {"name": "fresh"})
                await changes.receive()
            path.write_text(path.read_text() + "agent: {max_steps: 7}\n")
            report = await runtime.apply(checked_agent(path))
            assert report.rebuilt == ["agent"]

    spans = receiver.spans()
    turns = by_name(spans, "invoke_agent waits")
    asked, resumed = sorted(turns, key=lambda s: s.attributes["mcp_run.turn.resumed"])
    assert "mcp_run.wait.kind" not in asked.attributes
    assert resumed.attributes["mcp_run.wait.kind"] == "approval"
    assert resumed.attributes["mcp_run.wait.seconds"] >= 0.5
    assert resumed.links == [(asked.trace_id, asked.span_id)] and asked.links == []
    assert resumed.attributes["gen_ai.conversation.id"] == asked.attributes["gen_ai.conversation.id"] == "t1"
    assert only(spans, "execute_tool demo__echo").parent_id == resumed.span_id
    step = next(s for s in by_name(spans, "chat mcp-run-scripted") if s.parent_id == asked.span_id)
    usage = (step.attributes["gen_ai.usage.input_tokens"], step.attributes["gen_ai.usage.output_tokens"])
    assert usage == (120, 7)
    assert step.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert receiver.metric_total("mcp_run.wait.duration", {"mcp_run.wait.kind": "approval"}) == 1
    assert receiver.metric_total("gen_ai.client.token.usage", {"gen_ai.token.type": "input"}) == 2
    tokens = receiver.metric_points()["gen_ai.client.token.usage"]
    assert sum(p.sum for attributes, p in tokens if attributes["gen_ai.token.type"] == "output") == 10

    listed = only(spans, "list_changed dyn")
    assert listed.attributes["mcp_run.kinds"] == ["tools"] and listed.parent_id == ""
    reload = only(spans, "reload")
    assert reload.attributes["mcp_run.reload.rebuilt"] == ["agent"]
    assert reload.attributes["mcp_run.generation"] == 2
    assert receiver.metric_total("mcp_run.reloads") == 1


async def test_a_stale_server_records_a_heartbeat_failure_and_a_restart_with_the_reason(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    script = write_script(tmp_path, ["ok"])
    stale = server("demo", heartbeat={"interval": "200ms", "stale_after": "600ms"})
    path = write_manifest(tmp_path, {"demo": stale}, defaults=FAST, checkpointer="memory",
                          model={"id": "scripted", "script": script})
    with anyio.fail_after(60):
        async with load_agent(path, environ=otel_environ(receiver)) as runtime:
            connection = runtime.fleet.connections["demo"]
            frozen = connection.pid
            os.kill(frozen, signal.SIGSTOP)  # alive, but answers nothing
            try:
                await connection.wait_until(lambda c: c.sessions == 2 and c.status == "ready")
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(frozen, signal.SIGCONT)
    spans = receiver.spans()
    heartbeat = only(spans, "heartbeat failed demo")
    assert heartbeat.attributes["error.type"] == "stale" and heartbeat.status_code == 2
    restart = only(spans, "server restart demo")
    assert "stale" in restart.attributes["mcp_run.restart.reason"]
    assert restart.attributes["mcp_run.server.restarts"] == 1


async def test_a_served_turn_joins_the_trace_its_caller_sent_in_meta(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    path = write_manifest(tmp_path, {"local": server("traced")}, name="served", model="offline",
                          checkpointer="memory")
    caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    params = StdioServerParameters(command=sys.executable, args=["-m", "runner", "serve", str(path)],
                                   cwd=str(tmp_path), env=otel_environ(receiver))
    with anyio.fail_after(60):
        async with Client(params) as client:
            asked = await client.call_tool("ask", {"message": 'local__echo {"text": "hi"}'},
                                           meta={"traceparent": f"00-{caller_trace}-{caller_span}-01"})
            assert not asked.is_error
    turn = receiver.wait_for_span("invoke_agent served")
    assert (turn.trace_id, turn.parent_id) == (caller_trace, caller_span)
    tool = only(receiver.spans(), "execute_tool local__echo")
    assert (tool.trace_id, tool.parent_id) == (caller_trace, turn.span_id)


def test_a_server_printing_its_secret_before_failing_leaks_it_to_neither_terminal_nor_spans(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    secret = "brk-SEKRIT-777"
    broken = {"command": "sh", "args": ["-c", 'echo "bad token $BROKEN_SECRET" >&2; exit 4'],
              "env": {"BROKEN_SECRET": secret}, "required": False}
    script = write_script(tmp_path, ["ok"])
    write_manifest(tmp_path, {"broken": broken}, defaults=FAST, checkpointer="memory",
                   model={"id": "scripted", "script": script})
    result = subprocess.run([str(MCP_RUN), "agent.yaml", "-p", "hi", "--json"], cwd=tmp_path,
                            env=otel_environ(receiver), capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert "bad token ***" in result.stderr  # the tail still says what went wrong
    failed = only(receiver.spans(), "server failed broken")
    assert "bad token ***" in failed.attributes["mcp_run.failure.reason"]
    for text in (result.stdout, result.stderr, *(body.decode("latin-1") for body in receiver.bodies)):
        assert secret not in text
    assert secret in (tmp_path / ".mcp-run" / "logs" / "broken.log").read_text()  # the log keeps it


def closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_one_turn(folder: Path, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = write_script(folder, ["ok"])
    write_manifest(folder, {}, checkpointer="memory", model={"id": "scripted", "script": script})
    keep = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    return subprocess.run([str(MCP_RUN), "agent.yaml", "-p", "hi"], cwd=folder, env={**keep, **environ},
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_an_unreachable_endpoint_earns_one_warning_naming_it_and_the_sdk_lines_go_to_the_log(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    result = run_one_turn(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": url,
                                     "OTEL_METRIC_EXPORT_INTERVAL": "100"})
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    warnings = [line for line in result.stderr.splitlines() if "cannot export" in line]
    assert len(warnings) == 1 and url in warnings[0], result.stderr
    assert "Transient error" not in result.stderr and "Failed to export" not in result.stderr
    assert "opentelemetry" in (tmp_path / ".mcp-run" / "logs" / "telemetry.log").read_text()


def test_an_endpoint_with_credentials_is_named_without_them_on_the_terminal_and_in_the_log(
    tmp_path: Path,
) -> None:
    password, token = "CANARYotelpw1", "CANARYoteltoken1"
    port = closed_port()
    result = run_one_turn(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://bob:{password}@127.0.0.1:{port}",
                                     "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT":
                                         f"http://127.0.0.1:{port}/v1/metrics?access_token={token}",
                                     "OTEL_METRIC_EXPORT_INTERVAL": "100"})
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    warnings = [line for line in result.stderr.splitlines() if "cannot export" in line]
    assert len(warnings) == 1 and f"http://bob:***@127.0.0.1:{port}/v1/traces" in warnings[0], result.stderr
    assert "access_token=***" in warnings[0]
    log = (tmp_path / ".mcp-run" / "logs" / "telemetry.log").read_text()
    for text in (result.stderr, log):
        assert password not in text and token not in text
    (tmp_path / "bad").mkdir()
    bad = run_one_turn(tmp_path / "bad", {"OTEL_EXPORTER_OTLP_ENDPOINT": f"ftp://bob:{password}@127.0.0.1:{port}"})
    assert f"OTEL_EXPORTER_OTLP_ENDPOINT=ftp://bob:***@127.0.0.1:{port} is not" in bad.stderr, bad.stderr
    assert password not in bad.stderr


def test_an_endpoint_that_is_no_url_and_malformed_headers_are_each_one_clear_warning(tmp_path: Path) -> None:
    result = run_one_turn(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": "not-a-url",
                                     "OTEL_EXPORTER_OTLP_HEADERS": "api-key-without-value"})
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    lines = result.stderr.splitlines()
    assert lines.count("warning: OTEL_EXPORTER_OTLP_ENDPOINT=not-a-url is not an http:// or https:// URL: "
                       "no traces are exported") == 1, result.stderr
    assert len([line for line in lines if "OTEL_EXPORTER_OTLP_HEADERS" in line]) == 1, result.stderr
    assert "api-key-without-value" not in result.stderr and "cannot export" not in result.stderr


async def test_the_metrics_endpoint_alone_turns_telemetry_on_and_exports_only_metrics(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    script = write_script(tmp_path, ["ok"])
    path = write_manifest(tmp_path, {}, checkpointer="memory", model={"id": "scripted", "script": script})
    environ = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    await run_turn(path, {**environ, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": f"{receiver.url}/v1/metrics"})
    assert receiver.metric_total("gen_ai.client.operation.duration") == 1
    assert receiver.spans() == []


def test_a_signal_without_its_own_or_the_common_endpoint_is_not_sent_to_the_default() -> None:
    from runner.telemetry.exporting import endpoint

    traces_only = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/t"}
    assert endpoint(traces_only, "traces") == "http://127.0.0.1:9/t"
    assert endpoint(traces_only, "metrics") is None
    assert endpoint({}, "metrics") == "http://localhost:4318/v1/metrics"  # telemetry.enabled with no variable


async def test_validate_reports_telemetry_without_its_packages_and_commands_without_turns_warn_and_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("runner.telemetry.exporting", "runner.telemetry.recorder"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    path = write_manifest(tmp_path, {"demo": server("demo")}, checkpointer="memory",
                          telemetry={"enabled": True})
    with pytest.raises(ManifestError) as raised:
        checked_agent(path)  # what `mcp-run validate` runs
    (problem,) = raised.value.problems
    assert problem.path == "telemetry.enabled" and "pip install 'mcp-run[otel]'" in problem.message
    with anyio.fail_after(60):
        # as `tools` and `call` run it
        async with load_agent(path, model=False, host=Host(answers_questions=False)) as runtime:
            assert "demo__echo" in {tool.name for tool in runtime.catalog.tools}
    assert "OpenTelemetry packages are not installed" in caplog.text


async def test_a_turn_the_sampler_drops_reports_no_trace_id(
    tmp_path: Path, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")  # the SDK reads it from the process
    script = write_script(tmp_path, ["ok"])
    path = write_manifest(tmp_path, {}, checkpointer="memory", model={"id": "scripted", "script": script})
    events = await run_turn(path, otel_environ(receiver))
    assert events[-1]["type"] == "final" and events[-1]["trace_id"] is None
    assert receiver.spans() == []


@pytest.mark.parametrize(("block", "expected"), [
    (True, "telemetry: a mapping: enabled, service_name, resource_attributes, capture_content"),
    ({"resource_attributes": {"deployment.environment": ["a"]}},
     "telemetry.resource_attributes.deployment.environment: a value is text, a number or true/false"),
    ({"resource_attributes": {"": "x"}}, "telemetry.resource_attributes: an attribute name cannot be empty"),
])
def test_a_bad_telemetry_value_is_one_clear_located_line(tmp_path: Path, block: Any, expected: str) -> None:
    path = write_manifest(tmp_path, {}, telemetry=block)
    with pytest.raises(ManifestError) as raised:
        parse_manifest(path.read_text(), file=str(path), path=path)
    (problem,) = raised.value.problems
    assert f"{problem.path}: {problem.message}" == expected


async def test_the_cost_of_each_model_step_adds_to_the_cost_counter_by_the_model_that_answered(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "demo__echo", "args": {"text": "hi"}}],
         "usage": {"input_tokens": 1000, "output_tokens": 100}, "model": "openai:gpt-4.1-mini"},
        {"text": "done", "usage": {"input_tokens": 2000, "output_tokens": 10}, "model": "ollama:llama3.1"},
    ])
    path = write_manifest(tmp_path, {"demo": server("demo")}, name="costly", defaults=FAST,
                          checkpointer="memory", model={"id": "scripted", "script": script})
    events = await run_turn(path, otel_environ(receiver))
    assert events[-1]["text"] == "done"
    # gpt-4.1-mini's price from genai-prices; llama3.1 on ollama has none: nothing is added for it
    assert receiver.metric_total("mcp_run.model.cost", {"gen_ai.response.model": "gpt-4.1-mini"}) == \
        pytest.approx((1000 * 0.4 + 100 * 1.6) / 1e6)
    assert receiver.metric_total("mcp_run.model.cost", {"gen_ai.response.model": "llama3.1"}) == 0


async def test_a_policy_decision_is_recorded_on_the_tool_calls_span(
        tmp_path: Path, receiver: OtlpReceiver) -> None:
    denied = {"name": "local__echo", "args": {"text": "secret"}, "id": "d"}
    script = write_script(tmp_path, [{"tool_calls": [denied]}, "ok"])
    policy = [{"tool": "local__echo", "args": {"text": "secret*"}, "action": "deny", "reason": "no secrets"}]
    path = write_manifest(tmp_path, {"local": server("traced")}, checkpointer="memory",
                          model={"id": "scripted", "script": script}, policy=policy)
    await run_turn(path, otel_environ(receiver))
    tool = only(receiver.spans(), "execute_tool local__echo")
    assert {key: value for key, value in tool.attributes.items() if key.startswith("mcp_run.policy.")} == {
        "mcp_run.policy.action": "deny", "mcp_run.policy.rule": 0, "mcp_run.policy.source": "policy[0]",
        "mcp_run.policy.reason": "no secrets"}
    assert tool.attributes["error.type"] == "tool_error"
    assert not by_name(receiver.spans(), "tools/call echo")  # refused before the server was asked
