"""What a flooding server costs at most: a few warning lines per interval, and two log files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from runner.servers.transports.repeated_warnings import RepeatedWarning
from runner.servers.transports.stdio import StderrLog


def test_a_server_flooding_its_stderr_has_its_log_rotated_while_it_runs(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "flood.log"
    log = StderrLog("flood", path, max_bytes=10_000)
    log.open()
    try:
        for number in range(2_000):  # 200 kB: twenty times the limit, in one run
            log.write(f"line {number:05d} " + "x" * 90)
    finally:
        log.close()
    older = path.with_name("flood.log.1")
    assert path.stat().st_size <= 10_000 and older.stat().st_size <= 10_000 + 200
    assert "line 01999" in path.read_text()  # the newest lines are in the current file
    assert sorted(entry.name for entry in path.parent.iterdir()) == ["flood.log", "flood.log.1"]


def test_a_log_left_too_big_by_an_earlier_run_is_moved_aside_at_start(tmp_path: Path) -> None:
    path = tmp_path / "old.log"
    path.write_text("y" * 20_000)
    log = StderrLog("old", path, max_bytes=10_000)
    log.open()
    log.write("fresh")
    log.close()
    assert path.read_text() == "fresh\n" and path.with_name("old.log.1").stat().st_size == 20_000


def test_repeated_warnings_show_the_first_few_and_count_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("tests.floods")
    caplog.set_level(logging.WARNING, logger="tests.floods")
    warnings = RepeatedWarning(logger, "noisy", "junk warnings", shown=3, interval=3600)
    shown = [warnings.warn(f"junk {number}") for number in range(10_000)]
    warnings.flush()
    warnings.flush()  # nothing more was counted: no second summary
    assert shown.count(True) == 3
    assert caplog.messages == ["junk 0", "junk 1", "junk 2",
                               "server noisy: 9,997 more junk warnings not shown"]


def test_a_new_interval_summarises_the_last_one_and_shows_warnings_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("tests.floods")
    caplog.set_level(logging.WARNING, logger="tests.floods")
    now = [0.0]
    warnings = RepeatedWarning(logger, "noisy", "junk warnings", shown=1, interval=10, clock=lambda: now[0])
    for number in range(5):
        warnings.warn(f"junk {number}")
    now[0] = 10.0
    warnings.warn("junk 5")
    warnings.warn("junk 6")
    assert caplog.messages == ["junk 0", "server noisy: 4 more junk warnings not shown", "junk 5"]
