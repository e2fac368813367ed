"""The era memory: what a server is known by, and a file that is missing, damaged or unwritable."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest
from mcp_servers import specs

from runner.servers import open_fleet
from runner.servers.protocol_eras import EraMemory, launch_identity

LEGACY = "2025-11-25"


def test_a_server_is_known_by_its_launch_settings_and_the_names_not_values_of_its_secrets() -> None:
    base = launch_identity(specs.stdio("demo", env={"TOKEN": "one"}))
    assert launch_identity(specs.stdio("demo", env={"TOKEN": "two"})) == base
    assert launch_identity(specs.stdio("demo", env={"OTHER": "one"})) != base
    assert launch_identity(specs.stdio("demo", "--legacy", env={"TOKEN": "one"})) != base
    assert launch_identity(specs.http("http://user:pw@127.0.0.1:1/mcp?key=a")) == launch_identity(
        specs.http("http://127.0.0.1:1/mcp?key=b"))
    assert launch_identity(specs.http("http://127.0.0.1:1/mcp", transport="sse")) != launch_identity(
        specs.http("http://127.0.0.1:1/mcp"))


def test_only_the_handshake_era_skips_the_probe(tmp_path: Path) -> None:
    memory, spec = EraMemory(tmp_path), specs.stdio("demo")
    assert memory.connect_mode(spec) == "auto"
    memory.remember(spec, "2026-07-28")
    assert memory.connect_mode(spec) == "auto"
    memory.remember(spec, LEGACY)
    assert memory.connect_mode(spec) == "legacy"
    assert memory.forget(spec) and not memory.forget(spec)
    assert memory.connect_mode(spec) == "auto"


def test_a_damaged_file_means_probing_and_an_unwritable_folder_a_warning(tmp_path: Path, caplog) -> None:
    memory, spec = EraMemory(tmp_path), specs.stdio("demo")
    memory.path.write_text("{not json")
    assert memory.connect_mode(spec) == "auto"
    memory.remember(spec, LEGACY)  # a damaged file is replaced whole
    assert memory.connect_mode(spec) == "legacy"
    missing = EraMemory(tmp_path / "gone")
    with caplog.at_level(logging.WARNING, logger="runner.servers.protocol_eras"):
        missing.remember(spec, LEGACY)
    assert "cannot remember protocol eras" in caplog.text
    assert missing.connect_mode(spec) == "auto"


def test_servers_remembered_at_once_from_many_threads_are_all_kept(tmp_path: Path, caplog) -> None:
    servers = [specs.stdio("demo", str(index)) for index in range(16)]
    with caplog.at_level(logging.WARNING, logger="runner.servers.protocol_eras"):
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda spec: EraMemory(tmp_path).remember(spec, LEGACY), servers))
    assert "cannot remember" not in caplog.text
    assert all(EraMemory(tmp_path).connect_mode(spec) == "legacy" for spec in servers)


@pytest.mark.anyio
async def test_a_start_in_the_modern_era_leaves_nothing_to_remember(tmp_path: Path, state_dir: Path) -> None:
    with anyio.fail_after(60):
        async with open_fleet(
            {"modern": specs.stdio("demo")}, base_dir=tmp_path, state_dir=state_dir
        ) as fleet:
            assert fleet.connections["modern"].era == "2026-07-28"
    assert not (state_dir / "eras.json").exists()
