"""What a flooding server costs at most: a few warning lines per interval, two log files, and one
message's worth of memory per HTTP response."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from runner.servers.transports import library_logs
from runner.servers.transports.message_limits import BoundedTransport, MessageTooLarge
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


class _Chunks(httpx2.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


async def _read(chunks: list[bytes], content_type: str, limit: int) -> int:
    """The bytes a client reads of a response made of ``chunks`` through the bounded transport."""
    warnings = RepeatedWarning(logging.getLogger("tests.floods"), "web", "responses over the limit")
    transport = BoundedTransport(httpx2.MockTransport(lambda request: httpx2.Response(
        200, headers={"content-type": content_type}, stream=_Chunks(chunks))), key="web", limit=limit,
        warnings=warnings)
    async with httpx2.AsyncClient(transport=transport) as client:
        async with client.stream("GET", "http://127.0.0.1/mcp") as response:
            return len(await response.aread())


@pytest.mark.anyio
async def test_an_event_stream_is_bounded_per_event_not_per_stream() -> None:
    event = b"data: " + b"a" * 600 + b"\n\n"
    # Ten events, each under the limit; one's end is split across two chunks.
    chunks = [event * 4, event[:-1], event[-1:] + event * 5]
    assert await _read(chunks, "text/event-stream; charset=utf-8", limit=1_000) == len(event) * 10
    with pytest.raises(MessageTooLarge, match=r"server web sent an event larger than .* \(1,000 bytes\)"):
        await _read([event * 2, b"data: " + b"a" * 700, b"a" * 700 + b"\n\n"], "text/event-stream", 1_000)


@pytest.mark.anyio
async def test_a_json_body_is_bounded_as_a_whole() -> None:
    assert await _read([b"[" + b"1," * 400, b"1]"], "application/json", limit=1_000) == 803
    with pytest.raises(MessageTooLarge, match=r"server web sent a response larger than .* \(1 KiB\)"):
        await _read([b"[" + b"1," * 400, b"1," * 400], "application/json", limit=1_024)


def _log_a_parse_failure() -> None:
    try:
        raise ValueError("recursion limit exceeded\nline two of the error")
    except ValueError:
        logging.getLogger("mcp.client.streamable_http").exception("Error parsing SSE message")


def test_an_sdk_traceback_about_a_server_becomes_one_warning_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    library_logs.install()
    caplog.set_level(logging.WARNING)
    warnings = RepeatedWarning(logging.getLogger("tests.floods"), "web", "library errors")
    with library_logs.speaking_for(warnings):
        _log_a_parse_failure()
    _log_a_parse_failure()  # about no server in particular: one line all the same
    assert [record.exc_info for record in caplog.records] == [None, None]
    assert caplog.messages == [
        "server web: Error parsing SSE message (ValueError: recursion limit exceeded)",
        "Error parsing SSE message (ValueError: recursion limit exceeded)",
    ]


def test_with_debug_the_sdk_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    library_logs.install()
    caplog.set_level(logging.DEBUG)
    _log_a_parse_failure()
    [record] = caplog.records
    assert record.exc_info is not None and record.getMessage() == "Error parsing SSE message"
