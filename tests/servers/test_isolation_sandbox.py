"""Servers under bubblewrap (``sandbox:``): a read-only host, a private /tmp, no network."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_servers import script, specs

from runner.errors import ServerStartError
from runner.manifest import StdioServerSpec
from runner.servers import open_fleet


def probe(**settings: object) -> StdioServerSpec:
    return specs.process(sys.executable, str(script("probe")), **settings)


async def start_error(spec: StdioServerSpec, folder: Path, state_dir: Path) -> str:
    """The message of the ServerStartError that starting ``spec`` (as a required server) raises."""
    with pytest.raises(ServerStartError) as raised:
        async with open_fleet({"probe": spec}, base_dir=folder, state_dir=state_dir):
            pass
    return str(raised.value)


def text(result: object) -> str:
    return result.content[0].text  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def bwrap_installed() -> None:
    assert shutil.which("bwrap"), "bubblewrap is installed by scripts/test.sh (apt-get install bubblewrap)"


@pytest.fixture
def host_paths(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A file in the host's /tmp, and names outside the manifest's folder (removed afterwards)."""
    paths = {
        "host_tmp_file": Path(f"/tmp/mcp-run-sandbox-secret-{tmp_path.name}"),
        "scratch": Path(f"/tmp/mcp-run-sandbox-scratch-{tmp_path.name}"),
        "home": Path.home() / f".mcp-run-sandbox-probe-{tmp_path.name}",
    }
    paths["host_tmp_file"].write_text("host tmp")
    (tmp_path / "out").mkdir()
    yield paths
    for path in paths.values():
        path.unlink(missing_ok=True)


async def test_a_sandboxed_server_writes_only_its_writable_paths(
    tmp_path: Path, state_dir: Path, host_paths: dict[str, Path]
) -> None:
    spec = probe(sandbox={"writable": ["out"]})
    async with open_fleet({"probe": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["probe"]

        async def write(path: Path) -> Any:
            return await connection.call_tool("write_file", {"path": str(path), "text": "x"})

        inside = await write(tmp_path / "out" / "a.txt")
        beside = await write(tmp_path / "b.txt")
        home = await write(host_paths["home"])
        private = await write(host_paths["scratch"])
        outcome = {name: path.exists() for name, path in host_paths.items()}
    assert not inside.is_error and (tmp_path / "out" / "a.txt").read_text() == "x"
    assert beside.is_error and "Read-only file system" in text(beside)
    assert home.is_error and not outcome["home"]
    assert not private.is_error and not outcome["scratch"]  # its /tmp is its own


async def test_a_sandboxed_server_cannot_reach_a_loopback_port_on_the_host(
    tmp_path: Path, state_dir: Path, listening_port: int
) -> None:
    address = {"host": "127.0.0.1", "port": listening_port}
    servers = {"plain": probe(), "boxed": probe(sandbox={}), "netted": probe(sandbox={"network": True})}
    async with open_fleet(servers, base_dir=tmp_path, state_dir=state_dir) as fleet:
        plain = await fleet.connections["plain"].call_tool("connect", address)
        boxed = await fleet.connections["boxed"].call_tool("connect", address)
        netted = await fleet.connections["netted"].call_tool("connect", address)
    assert text(plain) == "connected" and text(netted) == "connected"
    assert boxed.is_error and "cannot connect" in text(boxed)


async def test_a_sandboxed_server_can_read_the_host_but_not_its_tmp(
    tmp_path: Path, state_dir: Path, host_paths: dict[str, Path]
) -> None:
    async with open_fleet({"probe": probe(sandbox={})}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["probe"]
        hidden = await connection.call_tool("read_file", {"path": str(host_paths["host_tmp_file"])})
        shared = await connection.call_tool("read_file", {"path": str(script("probe"))})
    assert hidden.is_error and "No such file" in text(hidden)
    assert "Probes its own isolation" in text(shared)


async def test_a_missing_bwrap_is_a_clear_start_error(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without bwrap on it
    message = await start_error(probe(sandbox={}, required=True), tmp_path, state_dir)
    assert "'bwrap' is not on PATH" in message and "bubblewrap" in message


async def test_a_missing_writable_path_is_a_clear_start_error(tmp_path: Path, state_dir: Path) -> None:
    message = await start_error(probe(sandbox={"writable": ["nowhere"]}, required=True), tmp_path, state_dir)
    assert "sandbox.writable" in message and "nowhere" in message


async def test_a_sandboxed_server_sees_neither_the_state_folder_nor_the_token_store(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_state = tmp_path / "user-state"
    monkeypatch.setenv("XDG_STATE_HOME", str(user_state))
    monkeypatch.delenv("MCP_RUN_TOKEN_DIR", raising=False)
    secrets = {
        "conversation": tmp_path / ".mcp-run" / "state.sqlite",
        "token": user_state / "mcp-run" / "tokens" / "record.json",
    }
    for path in secrets.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("SECRET-CANARY")
    granted = tmp_path / ".mcp-run" / "notes"
    granted.mkdir()
    (tmp_path / "visible.txt").write_text("shared")
    spec = probe(sandbox={"writable": [".mcp-run/notes"]})
    async with open_fleet({"probe": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["probe"]
        read = {name: await connection.call_tool("read_file", {"path": str(path)})
                for name, path in secrets.items()}
        shared = await connection.call_tool("read_file", {"path": str(tmp_path / "visible.txt")})
        wrote = await connection.call_tool("write_file", {"path": str(granted / "n.json"), "text": "kept"})
    for name, result in read.items():
        assert result.is_error and "No such file" in text(result), name
    assert text(shared) == "shared"
    assert not wrote.is_error and (granted / "n.json").read_text() == "kept"
