"""The era memory: what a server is known by, and a file that is missing, damaged or unwritable."""

from __future__ import annotations

import logging
from pathlib import Path

from servers import specs

from runner.servers.eras import EraMemory, launch_identity

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
    with caplog.at_level(logging.WARNING, logger="runner.servers.eras"):
        missing.remember(spec, LEGACY)
    assert "cannot remember protocol eras" in caplog.text
    assert missing.connect_mode(spec) == "auto"
