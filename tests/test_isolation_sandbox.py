"""Servers under bubblewrap (``sandbox:``): a read-only host, a private /tmp, no network."""

from __future__ import annotations

import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from servers import script, specs

from runner.errors import ServerStartError
from runner.manifest import StdioServerSpec
from runner.servers import open_fleet


def probe(**settings: object) -> StdioServerSpec:
    return specs.process(sys.executable, str(script("probe")), **settings)


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A TCP port on the host's loopback that accepts connections."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def text(result: object) -> str:
    return result.content[0].text  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def bwrap_installed() -> None:
    assert shutil.which("bwrap"), "bubblewrap is installed by scripts/test.sh (apt-get install bubblewrap)"


async def test_a_sandboxed_server_writes_only_its_writable_paths(tmp_path: Path, state_dir: Path) -> None:
    (tmp_path / "out").mkdir()
    outside = Path.home() / f".mcp-run-sandbox-probe-{tmp_path.name}"
    spec = probe(sandbox={"writable": ["out"]})
    async with open_fleet({"probe": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["probe"]
        inside = await connection.call_tool("write_file", {"path": str(tmp_path / "out" / "a.txt"), "text": "x"})
        beside = await connection.call_tool("write_file", {"path": str(tmp_path / "b.txt"), "text": "x"})
        home = await connection.call_tool("write_file", {"path": str(outside), "text": "x"})
        private = await connection.call_tool("write_file", {"path": "/tmp/scratch.txt", "text": "x"})
    assert not inside.is_error and (tmp_path / "out" / "a.txt").read_text() == "x"
    assert beside.is_error and "Read-only file system" in text(beside)
    assert home.is_error and not outside.exists()
    assert not private.is_error and not Path("/tmp/scratch.txt").exists()  # its /tmp is its own


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


async def test_a_sandboxed_server_can_read_the_host_but_not_its_tmp(tmp_path: Path, state_dir: Path) -> None:
    with open("/tmp/mcp-run-sandbox-secret-" + tmp_path.name, "w") as handle:
        handle.write("host tmp")
    try:
        async with open_fleet({"probe": probe(sandbox={})}, base_dir=tmp_path, state_dir=state_dir) as fleet:
            connection = fleet.connections["probe"]
            hidden = await connection.call_tool("read_file", {"path": handle.name})
            shared = await connection.call_tool("read_file", {"path": str(script("probe"))})
    finally:
        Path(handle.name).unlink()
    assert hidden.is_error and "No such file" in text(hidden)
    assert "Probes its own isolation" in text(shared) or "probe" in text(shared)


async def test_a_missing_bwrap_is_a_clear_start_error(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without bwrap on it
    spec = probe(sandbox={}, required=True)
    with pytest.raises(ServerStartError) as raised:
        async with open_fleet({"probe": spec}, base_dir=tmp_path, state_dir=state_dir):
            pass
    assert "'bwrap' is not on PATH" in str(raised.value) and "bubblewrap" in str(raised.value)


async def test_a_missing_writable_path_is_a_clear_start_error(tmp_path: Path, state_dir: Path) -> None:
    spec = probe(sandbox={"writable": ["nowhere"]}, required=True)
    with pytest.raises(ServerStartError) as raised:
        async with open_fleet({"probe": spec}, base_dir=tmp_path, state_dir=state_dir):
            pass
    assert "sandbox.writable" in str(raised.value) and "nowhere" in str(raised.value)
