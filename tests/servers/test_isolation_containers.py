"""Servers in containers (``container:``), on a private Docker daemon the tests start themselves.

Each test asserts, through the autouse ``no_leftover_containers`` guard, that no container of
mcp-run outlives it. Skipped (with the reason printed) only when dockerd truly cannot start here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import builders
import psutil
import pytest
from builders import mcp_run
from engines import IMAGE, DockerDaemon, python_mounts
from mcp_servers import script, specs
from test_isolation_sandbox import start_error

from runner.errors import ServerClosedError, ServerTimeoutError
from runner.manifest import StdioServerSpec
from runner.servers import open_fleet

pytestmark = pytest.mark.containers  # a private daemon: safe beside other suites in another process
CLI_WAIT = 120.0
RESTART_WAIT = 30.0


@pytest.fixture(autouse=True)
def engine(docker_daemon: DockerDaemon) -> DockerDaemon:
    return docker_daemon


def container(**overrides: Any) -> dict[str, Any]:
    return {"image": IMAGE, "mounts": python_mounts(), **overrides}


def probe(*flags: str, container_settings: dict[str, Any] | None = None, **settings: Any) -> StdioServerSpec:
    return specs.process(
        sys.executable, str(script("probe")), *flags,
        container=container(**(container_settings or {})), **settings,
    )


def write_manifest(folder: Path, server: dict[str, Any], **settings: Any) -> Path:
    probe = {"command": sys.executable, "args": [str(script("probe"))], "container": container(), **server}
    return builders.write_manifest(folder, {"probe": probe}, name="contained", model="offline",
                                   checkpointer="memory", **settings)


def text(result: Any) -> str:
    return result.content[0].text


def test_a_containerised_server_answers_mcp_run_call(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"env": {"GREETING": "hello from the manifest"}})
    done = mcp_run("call", "agent.yaml", "probe__env", '{"name": "GREETING"}', cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "hello from the manifest" in done.stdout


async def test_a_containerised_server_sees_only_the_manifests_env_and_passthrough(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOST_SECRET", "do-not-leak")
    monkeypatch.setenv("SHARED", "passed on purpose")
    spec = probe(env={"GREETING": "from the manifest"}, env_passthrough=["SHARED"])
    async with open_fleet({"probe": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["probe"]
        seen = {
            name: text(await connection.call_tool("env", {"name": name}))
            for name in ("GREETING", "SHARED", "HOST_SECRET", "PATH")
        }
    assert seen["GREETING"] == "from the manifest" and seen["SHARED"] == "passed on purpose"
    assert seen["HOST_SECRET"] == "<unset>"
    assert seen["PATH"] != os.environ["PATH"]  # not even the host allow-list enters a container


def test_a_containerised_server_answers_the_agent(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"env": {"GREETING": "agent sees me"}})
    done = mcp_run("agent.yaml", "-p", 'probe__env {"name": "GREETING"}', cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "agent sees me" in done.stdout


async def test_a_containerised_server_reads_only_its_mounts_and_writes_only_writable_ones(
    tmp_path: Path, state_dir: Path
) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "note.txt").write_text("mounted")
    (tmp_path / "out").mkdir()
    (tmp_path / "secret.txt").write_text("host only")
    mounts = [*python_mounts(), "shared:/data", "out:/out:rw"]
    spec = probe(container_settings={"mounts": mounts})
    async with open_fleet({"probe": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["probe"]
        mounted = await connection.call_tool("read_file", {"path": "/data/note.txt"})
        secret = await connection.call_tool("read_file", {"path": str(tmp_path / "secret.txt")})
        read_only = await connection.call_tool("write_file", {"path": "/data/new.txt", "text": "x"})
        writable = await connection.call_tool("write_file", {"path": "/out/new.txt", "text": "x"})
    assert text(mounted) == "mounted"
    assert secret.is_error and "No such file" in text(secret)
    assert read_only.is_error and "Read-only file system" in text(read_only)
    assert not writable.is_error and (tmp_path / "out" / "new.txt").read_text() == "x"


async def test_a_container_mount_that_holds_the_state_folder_shows_it_empty(
    tmp_path: Path, state_dir: Path
) -> None:
    (tmp_path / ".mcp-run").mkdir()
    (tmp_path / ".mcp-run" / "state.sqlite").write_text("SECRET-CANARY")
    (tmp_path / "visible.txt").write_text("mounted")
    spec = probe(container_settings={"mounts": [*python_mounts(), ".:/project"]})
    async with open_fleet({"probe": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["probe"]
        mounted = await connection.call_tool("read_file", {"path": "/project/visible.txt"})
        hidden = await connection.call_tool("read_file", {"path": "/project/.mcp-run/state.sqlite"})
    assert text(mounted) == "mounted"
    assert hidden.is_error and "No such file" in text(hidden)


async def test_a_containerised_server_cannot_reach_a_loopback_port_on_the_host(
    tmp_path: Path, state_dir: Path, listening_port: int
) -> None:
    async with open_fleet({"probe": probe()}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        address = {"host": "127.0.0.1", "port": listening_port}
        blocked = await fleet.connections["probe"].call_tool("connect", address)
    assert blocked.is_error and "cannot connect" in text(blocked)


async def test_a_crashing_containerised_server_is_restarted_after_its_backoff(
    tmp_path: Path, state_dir: Path
) -> None:
    spec = probe(restart={"max_attempts": 3, "backoff": 0.5, "max_backoff": 1})
    async with open_fleet({"probe": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["probe"]
        crashed_at = anyio.current_time()
        with anyio.fail_after(RESTART_WAIT), pytest.raises(ServerClosedError):
            await connection.call_tool("crash", {})
        with anyio.fail_after(RESTART_WAIT):
            await connection.wait_until(lambda c: c.sessions == 2 and c.status == "ready")
        back_after = anyio.current_time() - crashed_at
        answer = await connection.call_tool("env", {"name": "NOTHING"})
    assert back_after >= 0.5 and text(answer) == "<unset>"


async def test_a_hung_containerised_call_times_out_and_the_server_keeps_serving(
    tmp_path: Path, state_dir: Path
) -> None:
    async with open_fleet({"probe": probe()}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["probe"]
        with anyio.fail_after(20), pytest.raises(ServerTimeoutError):
            await connection.call_tool("hang", {}, timeout=0.5)
        answer = await connection.call_tool("env", {"name": "NOTHING"})
    assert text(answer) == "<unset>"


async def test_a_stale_containerised_server_is_killed_and_its_container_removed(
    tmp_path: Path, state_dir: Path, engine: DockerDaemon
) -> None:
    spec = probe("--linger", heartbeat={"interval": 0.2, "stale_after": 1})
    async with open_fleet({"probe": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["probe"]
        [first] = engine.run_containers()
        engine.docker("pause", first.split()[0])  # alive, but answers nothing
        with anyio.fail_after(RESTART_WAIT):
            await connection.wait_until(lambda c: c.sessions == 2 and c.status == "ready")
        [second] = engine.run_containers()
    assert second != first


def _start_cli(folder: Path) -> subprocess.Popen[str]:
    """A one-turn run of the agent whose tool call never returns."""
    return subprocess.Popen(
        [sys.executable, "-m", "runner", "agent.yaml", "-p", "probe__hang"], cwd=folder, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_leave_no_container(
    tmp_path: Path, engine: DockerDaemon, sig: signal.Signals
) -> None:
    write_manifest(tmp_path, {"args": [str(script("probe")), "--linger"], "timeout": "5m"})
    cli = _start_cli(tmp_path)
    try:
        engine.wait_for_containers(1)
        cli.send_signal(sig)
        _, stderr = cli.communicate(timeout=CLI_WAIT)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.communicate(timeout=CLI_WAIT)
    assert cli.returncode in (130, 143), stderr  # an orderly exit, not death by the signal
    assert engine.run_containers() == []


def test_a_container_left_by_a_killed_run_is_removed_by_the_next_run(
    tmp_path: Path, engine: DockerDaemon
) -> None:
    write_manifest(tmp_path, {"args": [str(script("probe")), "--linger"], "timeout": "5m"})
    cli = _start_cli(tmp_path)
    try:
        [left] = engine.wait_for_containers(1)
        run = psutil.Process(cli.pid)
        clients = run.children(recursive=True)
        for process in [run, *clients]:  # the whole run dies at once, as in an OOM kill or a crash
            process.kill()
        psutil.wait_procs([run, *clients], timeout=CLI_WAIT)
        cli.communicate(timeout=CLI_WAIT)
        assert engine.run_containers() == [left]
        write_manifest(tmp_path, {})
        after = mcp_run("call", "agent.yaml", "probe__env", '{"name": "NOTHING"}', cwd=tmp_path)
        assert after.returncode == 0, after.stderr
        assert engine.run_containers() == []
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.communicate(timeout=CLI_WAIT)


def processes_in(engine: DockerDaemon, container: str) -> list[str]:
    """The command lines of the processes running in ``container``."""
    rows = engine.docker("top", container, "-o", "pid,args").stdout.splitlines()[1:]
    return [row.split(None, 1)[1] for row in rows]


@pytest.fixture
def running_container(engine: DockerDaemon) -> Iterator[str]:
    """A container someone else started (not labelled by mcp-run): ``exec`` enters it."""
    name = "mcp-run-test-target"
    mounts = [item for mount in python_mounts() for item in ("-v", f"{mount}:ro")]
    engine.docker("run", "-d", "--rm", "--name", name, "--network", "none", *mounts, IMAGE, "sleep", "600")
    try:
        yield name
    finally:
        engine.docker("rm", "-f", name, check=False)


async def test_a_server_execd_into_a_running_container_ends_with_the_run_and_leaves_the_container(
    tmp_path: Path, state_dir: Path, engine: DockerDaemon, running_container: str
) -> None:
    spec = specs.process(
        sys.executable, str(script("probe")),
        container={"exec": running_container}, env={"GREETING": "inside"},
    )
    async with open_fleet({"probe": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        greeting = await fleet.connections["probe"].call_tool("env", {"name": "GREETING"})
        during = processes_in(engine, running_container)
    after = processes_in(engine, running_container)
    assert text(greeting) == "inside"
    assert len(during) == 2 and after == ["sleep 600"]  # the server ended when its stdin closed


async def test_exec_into_a_container_that_is_not_running_is_a_clear_start_error(
    tmp_path: Path, state_dir: Path
) -> None:
    spec = specs.process(sys.executable, container={"exec": "mcp-run-nowhere"}, required=True)
    with anyio.fail_after(60):
        message = await start_error(spec, tmp_path, state_dir)
    assert "container 'mcp-run-nowhere' is not running" in message


async def test_a_missing_image_is_a_clear_start_error(tmp_path: Path, state_dir: Path) -> None:
    spec = probe(container_settings={"image": "mcp-run-absent:none"}, required=True)
    with anyio.fail_after(60):
        message = await start_error(spec, tmp_path, state_dir)
    assert "image 'mcp-run-absent:none' is not present locally" in message


async def test_a_daemon_that_is_not_running_is_a_clear_start_error(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'nobody.sock'}")
    spec = probe(required=True, restart={"max_attempts": 1, "backoff": 0.05})
    with anyio.fail_after(60):
        message = await start_error(spec, tmp_path, state_dir)
    assert "the docker daemon is not running" in message


async def test_an_engine_that_is_not_installed_is_a_clear_start_error(
    tmp_path: Path, state_dir: Path
) -> None:
    spec = probe(container_settings={"engine": "podman"}, required=True)
    with anyio.fail_after(60):
        message = await start_error(spec, tmp_path, state_dir)
    assert "container engine 'podman' is not installed" in message
