"""Supervision of stdio servers: crashes, junk, stale servers, restarts, environment, shutdown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import psutil
import pytest
from mcp_servers import demo, script, specs

from runner.errors import ServerClosedError, ServerError, ServerStartError, ServerTimeoutError
from runner.manifest import StdioServerSpec
from runner.servers import open_fleet, server_environment

RESTART_WAIT = 20.0


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _launches(count_file: Path) -> int:
    return len(count_file.read_text().splitlines()) if count_file.exists() else 0


async def test_a_server_killed_mid_call_fails_the_call_at_once_and_comes_back(
    tmp_path: Path, state_dir: Path
) -> None:
    async with open_fleet({"demo": specs.stdio("demo")}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["demo"]
        old_pid = connection.pid
        assert old_pid is not None
        hanging = anyio.Event()
        failed = anyio.Event()
        failure: list[ServerError] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            hanging.set()

        async def call_that_hangs() -> None:
            try:
                await connection.call_tool("hang", {}, timeout=60, progress=on_progress)
            except ServerError as exc:
                failure.append(exc)
                failed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(call_that_hangs)
            with anyio.fail_after(10):
                await hanging.wait()
            os.kill(old_pid, signal.SIGKILL)
            with anyio.fail_after(2):  # fails now, not after its 60 s timeout
                await failed.wait()
        assert isinstance(failure[0], ServerClosedError)
        assert failure[0].server == "demo"

        with anyio.fail_after(RESTART_WAIT):
            await connection.wait_until(lambda c: c.sessions == 2 and c.status == "ready")
        assert connection.pid not in (None, old_pid)
        assert _gone(old_pid)
        assert connection.restarts == 1
        assert isinstance(connection.last_incident, ServerClosedError)
        assert "SIGKILL" in str(connection.last_incident)
        result = await connection.call_tool("echo", {"text": "back"})
        assert result.content[0].text == "back"


async def test_a_server_that_exits_at_once_is_failed_without_retries(tmp_path: Path, state_dir: Path) -> None:
    count_file = tmp_path / "launches"
    spec = specs.stdio("exits", "--count-file", str(count_file))
    async with open_fleet({"flaky": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        flaky = fleet.connections["flaky"]
        assert flaky.status == "failed"
        assert isinstance(flaky.error, ServerStartError)
        assert "exited with code 3" in str(flaky.error)
        assert flaky.restarts == 0
        assert _launches(count_file) == 2  # the probe, then initialize (old SDKs exit on the probe)


async def test_a_server_that_cannot_come_back_is_given_up_after_bounded_attempts(
    tmp_path: Path, state_dir: Path
) -> None:
    count_file = tmp_path / "launches"
    spec = specs.stdio("exits", "--count-file", str(count_file), "--healthy-launches", "1")
    assert spec.restart is not None and spec.restart.max_attempts == 3
    async with open_fleet({"flaky": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        flaky = fleet.connections["flaky"]
        assert flaky.status == "ready" and flaky.pid is not None
        async with fleet.subscribe() as changes:
            os.kill(flaky.pid, signal.SIGKILL)
            with anyio.fail_after(RESTART_WAIT):
                await flaky.wait_for_status("failed")
                gone = await changes.receive()
        assert _launches(count_file) == 1 + 3
        assert flaky.restarts == 3
        assert isinstance(flaky.error, ServerStartError)
        assert (gone.kind, gone.added) == ("tools", ())
        assert "echo" in gone.removed and flaky.tools == []
        with pytest.raises(ServerClosedError):
            await flaky.call_tool("echo", {"text": "anyone?"})


async def test_a_stale_server_is_killed_and_restarted(tmp_path: Path, state_dir: Path) -> None:
    spec = specs.stdio("demo", heartbeat={"interval": 0.2, "stale_after": 0.6})
    async with open_fleet({"demo": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["demo"]
        frozen_pid = connection.pid
        assert frozen_pid is not None
        os.kill(frozen_pid, signal.SIGSTOP)  # alive, but answers nothing
        try:
            with anyio.fail_after(RESTART_WAIT):
                await connection.wait_until(lambda c: c.sessions == 2 and c.status == "ready")
        finally:
            if not _gone(frozen_pid):
                os.kill(frozen_pid, signal.SIGKILL)
        assert isinstance(connection.last_incident, ServerTimeoutError)
        assert _gone(frozen_pid)
        assert (await connection.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}


@pytest.mark.parametrize(
    ("era", "probe"), [("2026-07-28", "server/discover"), ("2025-11-25", "ping")]
)
async def test_an_idle_healthy_server_answers_the_heartbeat_and_keeps_its_session(
    demo_urls: dict[str, str], tmp_path: Path, state_dir: Path, era: str, probe: str
) -> None:
    spec = specs.http(demo_urls[era], heartbeat={"interval": 0.1, "stale_after": 2})
    async with open_fleet({"demo": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["demo"]
        before = (await connection.call_tool("requests_seen", {"method": probe})).structured_content["result"]
        # While this call waits on the server, the connection is idle: the heartbeat must probe it.
        seen = await connection.call_tool("requests_seen", {"method": probe, "at_least": before + 3})
        assert seen.structured_content["result"] >= before + 3
        assert (connection.status, connection.sessions, connection.restarts) == ("ready", 1, 0)


async def test_junk_on_stdout_is_skipped(tmp_path: Path, state_dir: Path) -> None:
    async with open_fleet({"junk": specs.stdio("junk")}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        junk = fleet.connections["junk"]
        assert junk.status == "ready"  # after a banner line on stdout
        queued = await junk.call_tool("junk", {"text": "NOISE", "newline": True})
        assert queued.content[0].text == "junk queued"
        assert (await junk.call_tool("echo", {"text": "one"})).content[0].text == "one"
        await junk.call_tool("junk", {"text": "GLUED", "newline": False})
        with anyio.fail_after(5):  # the junk is glued to the front of this answer
            assert (await junk.call_tool("echo", {"text": "two"})).content[0].text == "two"
    log = (state_dir / "logs" / "junk.log").read_text()
    assert "Junk server v1 starting" in log
    assert "NOISE" in log and "GLUED" in log


async def test_a_server_sees_only_allowed_host_variables(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_RUN_TEST_SECRET", "hunter2")
    monkeypatch.setenv("MCP_RUN_TEST_PASSED", "passed on")
    (tmp_path / "work").mkdir()
    spec = specs.stdio(
        "demo", env={"MCP_RUN_TEST_GIVEN": "given"}, env_passthrough=["MCP_RUN_TEST_PASSED"], cwd="work"
    )
    async with open_fleet({"demo": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["demo"]

        async def variable(name: str) -> dict:
            return (await connection.call_tool("env", {"name": name})).structured_content

        assert (await variable("MCP_RUN_TEST_SECRET"))["set"] is False
        assert (await variable("MCP_RUN_TEST_PASSED"))["value"] == "passed on"
        assert (await variable("MCP_RUN_TEST_GIVEN"))["value"] == "given"
        assert (await variable("PATH"))["value"] == os.environ["PATH"]
        cwd = (await connection.call_tool("cwd", {})).structured_content["result"]
        assert Path(cwd) == (tmp_path / "work").resolve()
        await connection.call_tool("stderr", {"text": "a line for the log"})
    assert "a line for the log" in (state_dir / "logs" / "demo.log").read_text()
    assert "a line for the log" not in capfd.readouterr().err


def test_the_environment_is_the_allow_list_plus_passthrough_plus_env() -> None:
    host = {
        "PATH": "/bin",
        "HOME": "/home/me",
        "LC_TIME": "C",
        "OPENAI_API_KEY": "sk-secret",
        "EXTRA": "x",
        "BASH_FUNC_f%%": "() { :; }",
        "TERM": "() { evil; }",
    }
    spec = StdioServerSpec(command="x", env={"HOME": "/srv", "MINE": "1"}, env_passthrough=["EXTRA"])
    assert server_environment(spec, host) == {
        "PATH": "/bin",
        "HOME": "/srv",
        "LC_TIME": "C",
        "EXTRA": "x",
        "MINE": "1",
    }


async def test_an_error_in_the_body_stops_every_server_and_propagates_unwrapped(
    serve_http, tmp_path: Path, state_dir: Path
) -> None:
    servers = {"web": specs.http(serve_http(demo.build()))}
    with pytest.raises(LookupError):
        async with open_fleet(servers, base_dir=tmp_path, state_dir=state_dir) as fleet:
            web = fleet.connections["web"]
            raise LookupError("boom")
    assert web.status == "stopped"


def test_a_runner_stopped_by_sigterm_or_ctrl_c_stops_every_server(tmp_path: Path) -> None:
    """Two runners side by side (one per signal): each must stop its servers before it exits."""
    runners = {
        signum: subprocess.Popen(
            [sys.executable, str(script("run_fleet")), str(tmp_path / signum.name), "demo"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
    outcomes = {}
    try:
        pids = {}
        for signum, runner in runners.items():
            assert runner.stdout is not None
            pids[signum] = json.loads(runner.stdout.readline())["pids"]
            assert all(psutil.pid_exists(pid) for pid in pids[signum])
        for signum, runner in runners.items():
            runner.send_signal(signum)
        for signum, runner in runners.items():
            outcomes[signum] = runner.communicate(timeout=20)
    finally:
        for runner in runners.values():
            if runner.poll() is None:
                runner.kill()
                runner.wait()
    for signum, (_, err) in outcomes.items():
        assert all(_gone(pid) for pid in pids[signum]), err
    sigterm_out, sigterm_err = outcomes[signal.SIGTERM]
    assert runners[signal.SIGTERM].returncode == 0, sigterm_err
    assert json.loads(sigterm_out) == {"stopped_by": "SIGTERM"}
    assert "KeyboardInterrupt" in outcomes[signal.SIGINT][1]


async def test_endless_stdout_without_a_newline_is_dropped_past_the_cap(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.servers.transports import message_limits

    monkeypatch.setattr(message_limits, "MAX_MESSAGE_BYTES", 100_000)
    async with open_fleet({"junk": specs.stdio("junk")}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        junk = fleet.connections["junk"]
        await junk.call_tool("junk", {"text": "X" * 300_000, "newline": False})
        with anyio.fail_after(10):  # the oversized junk is dropped; the answer after it still arrives
            answer = await junk.call_tool("echo", {"text": "still talking"})
        assert "still talking" in answer.content[0].text
    assert "without a newline, dropped" in (state_dir / "logs" / "junk.log").read_text()
