"""The era memory: what a server is known by, and a file that is missing, damaged or unwritable."""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp_servers import specs

from runner.errors import ServerRequestError
from runner.manifest import StdioServerSpec
from runner.servers import open_fleet
from runner.servers.protocol_eras import REPROBE_AFTER, EraMemory, launch_identity

LEGACY = "2025-11-25"
OLD_SDK_ERA = "2025-03-26"  # what mcp 1.6 servers settle on


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


def test_a_remembered_era_is_probed_again_once_it_is_old(tmp_path: Path) -> None:
    now = [1_000_000.0]
    memory, spec = EraMemory(tmp_path, clock=lambda: now[0]), specs.stdio("demo")
    memory.remember(spec, LEGACY)
    assert memory.connect_mode(spec) == "legacy"
    now[0] += REPROBE_AFTER
    assert memory.connect_mode(spec) == "auto"
    memory.remember(spec, LEGACY)  # the probe taught it again: trusted anew
    assert memory.connect_mode(spec) == "legacy"
    now[0] -= 2 * REPROBE_AFTER  # a clock set back is no reason to trust the entry forever
    assert memory.connect_mode(spec) == "auto"


def test_an_entry_of_the_older_file_format_is_probed_again(tmp_path: Path) -> None:
    memory, spec = EraMemory(tmp_path), specs.stdio("demo")
    memory.path.write_text(json.dumps({launch_identity(spec): LEGACY}))
    assert memory.connect_mode(spec) == "auto"


def test_a_pinned_protocol_decides_the_mode_whatever_is_remembered(tmp_path: Path) -> None:
    memory = EraMemory(tmp_path)
    memory.remember(specs.stdio("demo", protocol="2026-07-28"), LEGACY)
    assert memory.connect_mode(specs.stdio("demo", protocol="2026-07-28")) == "2026-07-28"
    assert memory.connect_mode(specs.stdio("demo", protocol="2025-11-25")) == "legacy"


def old_server(starts: Path, *args: str, **settings: Any) -> StdioServerSpec:
    return specs.stdio("old_sdk", "--starts", str(starts), *args, **settings)


@pytest.mark.anyio
async def test_a_server_that_exits_on_the_probe_is_started_with_initialize_and_remembered(
    tmp_path: Path, state_dir: Path
) -> None:
    starts = tmp_path / "starts"
    spec = old_server(starts)
    with anyio.fail_after(60):
        for run in range(2):
            async with open_fleet({"chroma": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
                chroma = fleet.connections["chroma"]
                assert (chroma.status, chroma.era, chroma.restarts) == ("ready", OLD_SDK_ERA, 0)
                echoed = await chroma.call_tool("echo", {"text": f"run {run}"})
                assert echoed.content[0].text == f"run {run}"  # type: ignore[union-attr]
    # The first run probed (and killed) it, then started it with initialize; the second did not probe.
    assert starts.read_text().count("start") == 3
    assert EraMemory(state_dir).connect_mode(spec) == "legacy"


@pytest.mark.anyio
async def test_a_probe_unanswered_until_its_timeout_teaches_no_era(tmp_path: Path, state_dir: Path) -> None:
    # It reads nothing for 2 s: the 1 s probe times out, and the initialize that follows succeeds.
    spec = old_server(tmp_path / "starts", "--slow", "2", timeout=1)
    with anyio.fail_after(60):
        async with open_fleet({"slow": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
            assert (fleet.connections["slow"].status, fleet.connections["slow"].era) == ("ready", OLD_SDK_ERA)
    assert EraMemory(state_dir).connect_mode(spec) == "auto"


@pytest.mark.anyio
async def test_a_server_pinned_to_the_handshake_era_is_never_probed_nor_remembered(
    tmp_path: Path, state_dir: Path
) -> None:
    starts = tmp_path / "starts"
    with anyio.fail_after(60):
        async with open_fleet(
            {"chroma": old_server(starts, protocol="2025-11-25")}, base_dir=tmp_path, state_dir=state_dir
        ) as fleet:
            chroma = fleet.connections["chroma"]
            assert (chroma.status, chroma.era) == ("ready", OLD_SDK_ERA)
    assert starts.read_text().count("start") == 1
    assert not (state_dir / "eras.json").exists()


@pytest.mark.anyio
async def test_a_server_pinned_to_2026_starts_in_it(tmp_path: Path, state_dir: Path) -> None:
    with anyio.fail_after(60):
        async with open_fleet(
            {"modern": specs.stdio("demo", protocol="2026-07-28")}, base_dir=tmp_path, state_dir=state_dir
        ) as fleet:
            modern = fleet.connections["modern"]
            assert (modern.status, modern.era) == ("ready", "2026-07-28")
            assert (await modern.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}


@pytest.mark.anyio
async def test_a_tool_asking_with_ctx_elicit_works_once_its_server_is_pinned_to_the_handshake_era(
    tmp_path: Path, state_dir: Path
) -> None:
    async def ask(server: str, request: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"ok": True})

    servers = {"probed": specs.stdio("elicits"), "pinned": specs.stdio("elicits", protocol="2025-11-25")}
    with anyio.fail_after(60):
        async with open_fleet(servers, base_dir=tmp_path, state_dir=state_dir) as fleet:
            probed, pinned = fleet.connections["probed"], fleet.connections["pinned"]
            assert (probed.era, pinned.era) == ("2026-07-28", LEGACY)
            with pytest.raises(ServerRequestError, match="back-channel"):
                await probed.call_tool("confirm", {}, ask=ask)
            answered = await pinned.call_tool("confirm", {}, ask=ask)
    assert answered.content[0].text == "accept True"  # type: ignore[union-attr]
