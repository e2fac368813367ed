"""The benchmark harness still runs, and compares each path with the floor of its own round.

The smoke run is ``python -m bench --smoke --json --no-adapters --no-langchain-mcp``: tiny sizes, one
round, and no peer rows in environments of their own (each needs a PyPI install, and starting their
workers makes the run slower on a busy machine). No timing
is asserted here: timing goals live in the benchmark's own report.
"""

from __future__ import annotations

import glob
import json
import math
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the bench package lives beside runner/, not in the installed distribution
    sys.path.insert(0, str(ROOT))

from bench.harness import PRESETS, Case, run_rounds  # noqa: E402
from bench.stats import (  # noqa: E402
    combined_latency,
    combined_throughput,
    latency_slice,
    slice_calls,
    throughput_metrics,
)

ROW_PREFIXES = (
    "1. call latency, stdio", "1. call latency, http",
    "2. throughput, stdio, c=1", "2. throughput, stdio, c=8", "2. throughput, stdio, c=32",
    "2. throughput, http, c=1", "2. throughput, http, c=8", "2. throughput, http, c=32",
    "3. cold start", "3b. start-up", "4a.", "4b.", "4c.", "4d.", "5.", "6a.", "6b.", "6c.",
    "7a. served turn", "7b. served turns/s, c=1", "7b. served turns/s, c=8", "7b. served turns/s, c=32",
    "8. tool call with telemetry", "9. long thread",
    "10a. sub-agent call in process vs a plain tool call", "10b. sub-agent call in process vs composition",
    "11. parallel fan-out to 8 agents", "12. turn overhead with usage, budgets and policy",
    "13a. Chat Completions streaming: time to first token", "13b. Chat Completions turns/s vs MCP ask, c=32",
    "13c. serve: memory per idle conversation", "14. web page: time to first token",
)
# Row 7c needs Debian's postgresql and haproxy (scripts/test.sh installs them); without, it is skipped.
SCALE_OUT_ROWS = ("7c. served turns/s, two instances vs one, c=8",
                  "7c. served turns/s, two instances vs one, c=32")
SCALE_OUT_POSSIBLE = (bool(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
                      and shutil.which("haproxy") is not None)
SMOKE_TIMEOUT = 200.0  # rows 10-13 added about a third to the run (their set-up most)
STOP_GRACE = 60.0  # what the benchmark gets, after Ctrl-C, to stop the services it started


async def run_stopping_on_timeout(command: list[str], limit: float) -> tuple[int, bytes, bytes]:
    """Run ``command``; past ``limit`` (or when the test fails or is cancelled) interrupt it as
    Ctrl-C would, so that it stops what it started (PostgreSQL, HAProxy, served agents), and
    kill it only if that does not end it. Raises TimeoutError past ``limit``."""
    process = await anyio.open_process(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = bytearray(), bytearray()

    async def drain(stream: Any, into: bytearray) -> None:
        async for chunk in stream:
            into.extend(chunk)

    try:
        with anyio.fail_after(limit):
            async with anyio.create_task_group() as group:
                group.start_soon(drain, process.stdout, out)
                group.start_soon(drain, process.stderr, err)
                await process.wait()
    finally:
        if process.returncode is None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_GRACE + 5):
                process.send_signal(signal.SIGINT)
                with anyio.move_on_after(STOP_GRACE):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
    return process.returncode, bytes(out), bytes(err)


async def test_a_run_past_its_time_is_interrupted_so_it_can_stop_what_it_started(tmp_path: Path) -> None:
    stopped = tmp_path / "stopped"
    # The shell sets its trap before anything else, so even a late start on a busy machine has it.
    child = f'trap "echo services stopped > {stopped}; exit 0" INT; while :; do sleep 0.1; done'
    # The limit leaves the shell time to set its trap on a machine busy with a whole test run.
    with pytest.raises(TimeoutError):
        await run_stopping_on_timeout(["sh", "-c", child], limit=15.0)
    assert stopped.read_text().strip() == "services stopped"


@pytest.mark.timeout(SMOKE_TIMEOUT + STOP_GRACE + 30)
async def test_every_benchmark_row_produces_numbers_in_a_smoke_run() -> None:
    command = [sys.executable, "-m", "bench", "--smoke", "--json", "--no-adapters", "--no-langchain-mcp"]
    returncode, stdout, stderr = await run_stopping_on_timeout(command, SMOKE_TIMEOUT)
    assert returncode == 0, stderr.decode()[-4000:]
    report = json.loads(stdout)
    rows = {result["row"] for result in report["results"]}
    for prefix in ROW_PREFIXES + (SCALE_OUT_ROWS if SCALE_OUT_POSSIBLE else ()):
        assert any(row.startswith(prefix) for row in rows), f"no row {prefix!r} in {sorted(rows)}"
    for result in report["results"]:
        where = f"{result['row']} / {result['path']}"
        assert len(result["rounds"]) == 1, where
        metrics = result["rounds"][0]
        assert all(math.isfinite(value) for value in metrics.values()), where
        # An overhead (a difference) and a memory growth (13c: 16 threads may fit in pages the
        # process already had) may be 0 or below.
        assert metrics[result["key"]] > 0 or result["key"] in ("overhead_ms", "kb_per_thread"), where
        if result["floor"] is not None:
            assert len(result["ratios"]) == 1 and result["ratios"][0] > 0, where
        for goal in result["goals"]:
            assert isinstance(goal["met"], bool), where


def constant(value: float, order: list[str], name: str):
    async def measure() -> dict[str, float]:
        order.append(name)
        return {"ms": value}

    return measure


def per_round(values: list[float], order: list[str], name: str):
    remaining = list(values)

    async def measure() -> dict[str, float]:
        order.append(name)
        return {"ms": remaining.pop(0)}

    return measure


async def test_a_ratio_is_taken_against_the_floor_measured_in_the_same_round() -> None:
    order: list[str] = []
    floor = Case("row", "floor", per_round([10.0, 20.0, 40.0], order, "floor"), "ms")
    path = Case("row", "path", per_round([15.0, 20.0, 20.0], order, "path"), "ms", floor="floor")
    results = await run_rounds([floor, path], rounds=3)
    ratios = {result.case.path: result.ratios for result in results}
    assert ratios == {"floor": [], "path": [1.5, 1.0, 0.5]}
    summary = {result.case.path: result.summary() for result in results}
    assert summary["path"]["ratio"] == 1.0 and summary["path"]["ms"] == 20.0
    assert summary["floor"]["ms"] == 20.0 and "ratio" not in summary["floor"]


async def test_each_round_starts_one_case_further_along() -> None:
    order: list[str] = []
    cases = [Case("row", name, constant(1.0, order, name), "ms") for name in ("a", "b", "c")]
    await run_rounds(cases, rounds=3)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]


@pytest.mark.timeout(60)
async def test_row_4a_alone_neither_starts_the_wide_server_nor_asks_for_psutil(caplog) -> None:
    from bench.harness import PRESETS
    from bench.scale import scale_suite

    with anyio.fail_after(50):
        async with scale_suite(PRESETS["smoke"], wide=False) as cases:
            rows = {case.row.split(".", 1)[0] for case in cases}
    assert rows == {"4a"}
    assert "psutil" not in caplog.text


async def test_sliced_cases_alternate_slice_by_slice_and_combine_their_slices_per_round() -> None:
    order: list[str] = []

    def throughput(name: str, seconds: list[float]):
        remaining = list(seconds)

        async def measure() -> dict[str, float]:
            order.append(name)
            return throughput_metrics(10, remaining.pop(0))

        return measure

    floor = Case("row", "floor", throughput("floor", [1.0, 3.0, 1.0, 1.0]), "calls_per_s",
                 slices=2, combine=combined_throughput)
    path = Case("row", "path", throughput("path", [1.0, 1.0, 1.0, 1.0]), "calls_per_s", "floor",
                slices=2, combine=combined_throughput)
    results = await run_rounds([floor, path], rounds=2)
    assert order == ["floor", "path", "path", "floor", "path", "floor", "floor", "path"]
    by_path = {result.case.path: result for result in results}
    assert [m["calls_per_s"] for m in by_path["floor"].rounds] == [5.0, 10.0]  # 20 calls in 4 s, then 2 s
    assert by_path["path"].ratios == [2.0, 1.0]  # 20 calls in 2 s against the floor's 5/s, then equal


async def test_latency_slices_are_pooled_into_one_sample_per_round() -> None:
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1

    parts = [await latency_slice(call, 10, 4, 2) for _ in range(2)]
    assert calls == 2 * (5 + 2)  # each slice: its share of the timed calls, and of the warm-up
    pooled = combined_latency(parts)
    assert pooled["n"] == 10.0 and "samples_ms" not in pooled
    assert combined_latency([{"samples_ms": [3.0, 1.0]}, {"samples_ms": [2.0]}])["p50_ms"] == 2.0


def test_a_throughput_slice_gives_every_worker_several_calls_at_high_concurrency() -> None:
    full = asdict(PRESETS["full"])
    assert [slice_calls(full, concurrency) for concurrency in (1, 8, 32)] == [160, 160, 512]
    assert slice_calls(asdict(PRESETS["smoke"]), 32) == 64  # the smoke run stays small


def test_a_client_leaving_mid_request_leaves_no_traceback_on_the_http_servers_stderr() -> None:
    import socket

    server = subprocess.Popen([sys.executable, str(ROOT / "bench" / "server.py"), "--transport", "http"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[1])
        for _ in range(3):  # headers and the start of a body, then the client is gone
            with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
                client.sendall(
                    f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                    "Accept: application/json, text/event-stream\r\nContent-Length: 200\r\n\r\n"
                    '{"jsonrpc":'.encode()
                )
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:  # still serving
            client.sendall(
                f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()
            )
            assert client.recv(100).startswith(b"HTTP/1.1 ")
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=30)
    assert "ClientDisconnect" not in errors and "Traceback" not in errors, errors


async def test_row_7c_is_skipped_with_the_reason_when_its_packages_are_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import importlib.util

    from bench import scaleout
    from bench.harness import PRESETS

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "psycopg" else real(name, *rest))
    with anyio.fail_after(10):
        async with scaleout.scale_out_suite(PRESETS["smoke"], tmp_path) as cases:
            assert cases == []
    assert "row 7c skipped: psycopg not installed (pip install -e '.[test,postgres]')" in caplog.text


async def test_the_database_row_7c_started_is_stopped_when_the_run_is_cancelled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from bench import scaleout
    from bench.harness import PRESETS

    stopped: list[object] = []
    started = anyio.Event()

    class Services:
        ServiceUnavailable = RuntimeError

        @staticmethod
        def start_postgres() -> Services:
            return Services()

        def create_database(self) -> str:
            return "postgresql://unused"

        @staticmethod
        def stop_postgres(database: object) -> None:
            stopped.append(database)

    @asynccontextmanager
    async def served_agent(*args: object) -> AsyncIterator[str]:
        started.set()
        await anyio.sleep_forever()  # the run is cancelled while an instance starts
        yield ""

    monkeypatch.setattr(scaleout, "_services", lambda: Services)
    monkeypatch.setattr(scaleout, "served_agent", served_agent)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            async def run() -> None:
                async with scaleout.scale_out_suite(PRESETS["smoke"], tmp_path):
                    pass

            group.start_soon(run)
            await started.wait()
            group.cancel_scope.cancel()
    assert len(stopped) == 1


def test_goals_name_the_sizes_measured_and_row_7c_has_its_goal_at_c32() -> None:
    from bench import scale, scaleout
    from bench.harness import PRESETS
    from bench.report import describe

    smoke = PRESETS["smoke"]
    assert scale.list_goal(smoke).text.startswith(f"{smoke.many_tools:,} tools listed")
    assert all(goal.text.startswith(f"{smoke.wide_servers} x {smoke.wide_tools} tools:")
               for goal in scale.wide_goals(smoke))
    clients: dict[str, Any] = {scaleout.ONE: None, scaleout.TWO: None}
    cases = scaleout._cases(smoke, clients, 32) + scaleout._cases(smoke, clients, 8)
    goals = {case.row: case.goals for case in cases}
    assert goals[scaleout.row(32)] == (scaleout.SCALE_OUT_GOAL,) and goals[scaleout.row(8)] == ()
    assert (scaleout.SCALE_OUT_GOAL.limit, scaleout.SCALE_OUT_GOAL.better) == (1.5, "higher")
    assert describe("turns_per_s", {"turns_per_s": 42.0}) == "42 turns/s"


def test_a_row_selection_picks_rows_by_id_and_refuses_unknown_ids() -> None:
    import argparse

    from bench.__main__ import row_selection, selected

    rows = row_selection("6, 3b")
    assert selected(rows, "6a") and selected(rows, "6c") and selected(rows, "3b")
    assert not selected(rows, "3") and not selected(rows, "1") and not selected(rows, "4a")
    assert selected(row_selection("3"), "3b") and selected(None, "7c")
    assert row_selection("1, 1,4a") == ("1", "4a")
    with pytest.raises(argparse.ArgumentTypeError, match="unknown row"):
        row_selection("9z")
    for mistyped in ("1,,4a", "1,", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="an empty row id"):
            row_selection(mistyped)


@pytest.mark.parametrize("rounds", ["0", "-1", "two"])
def test_a_round_count_below_one_is_refused_before_anything_starts(rounds: str, capsys) -> None:
    from bench.__main__ import parse_arguments

    with pytest.raises(SystemExit) as exit_:
        parse_arguments(["--rounds", rounds])
    assert exit_.value.code == 2
    assert "expected a whole number of 1 or more" in capsys.readouterr().err


def test_profiling_without_pyinstrument_says_what_to_install(monkeypatch, capsys) -> None:
    import importlib.util

    from bench import profiling

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "pyinstrument"
                        else real(name, *rest))
    monkeypatch.setattr(sys, "argv", ["profiling", "tool-call"])
    with pytest.raises(SystemExit) as exit_:
        profiling.main()
    assert exit_.value.code == 2
    assert "pip install pyinstrument, or add --cprofile" in capsys.readouterr().err


def test_goal_lines_show_a_share_as_a_percentage_and_7a_its_overhead() -> None:
    from bench.harness import Goal
    from bench.report import describe, shown_value

    assert shown_value(Goal("share", 0.02, percent=True), 0.017) == "1.70% of the floor"
    assert shown_value(Goal("ratio", 1.1), 1.04) == "1.04×"
    # A ratio that rounds to its limit shows the side it is on.
    assert shown_value(Goal("floor", 1.0, better="higher"), 0.9962) == "0.9962×"
    assert shown_value(Goal("floor", 1.0, better="higher"), 1.003) == "1.0030×"
    assert shown_value(Goal("floor", 1.0, better="higher"), 1.0) == "1.00×"
    cell = describe("p50_ms", {"p50_ms": 11.3, "p99_ms": 14.0, "overhead_ms": 4.1, "in_process_p50_ms": 7.2})
    assert "overhead 4.10 ms over the in-process p50 of 7.20 ms" in cell


def test_a_ratio_goal_line_shows_each_rounds_ratio_beside_the_median() -> None:
    from bench.harness import Case, CaseResult, Goal
    from bench.report import markdown

    async def measure() -> dict[str, float]:
        return {}

    goal = Goal("throughput at c=32 >= 1.0× the raw floor", 1.0, better="higher")
    floor = CaseResult(Case("2. throughput", "raw", measure, "calls_per_s"),
                       rounds=[{"calls_per_s": 100.0}] * 3)
    path = CaseResult(Case("2. throughput", "ours", measure, "calls_per_s", "raw", (goal,)),
                      rounds=[{"calls_per_s": value} for value in (95.0, 104.0, 99.6)],
                      ratios=[0.95, 1.04, 0.996])
    assert ("- MISSED: throughput at c=32 >= 1.0× the raw floor — measured 0.9960×, "
            "rounds 0.95× / 1.04× / 0.9960×") in markdown([floor, path], {})


@pytest.mark.timeout(120)
def test_ctrl_c_stops_the_benchmark_quietly_with_130_and_leaves_no_process() -> None:
    import os
    import signal

    import psutil

    command = [sys.executable, "-m", "bench", "--smoke", "--rows", "6a", "--no-adapters",
               "--no-langchain-mcp"]
    bench = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)  # its own group, as a terminal's foreground job
    children: set[int] = set()
    try:
        assert bench.stderr is not None
        for line in bench.stderr:  # bounded by the test's timeout
            children |= {child.pid for child in psutil.Process(bench.pid).children(recursive=True)}
            if "setup took" in line:
                break
        assert children, "the benchmark started no server"
        os.killpg(bench.pid, signal.SIGINT)  # what Ctrl-C does: the whole group gets it
        rest = bench.stderr.read()
        assert bench.wait(timeout=60) == 130
    finally:
        if bench.poll() is None:
            bench.kill()
    assert "bench: interrupted" in rest and "Traceback" not in rest, rest
    left = [pid for pid in children if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert left == []


def test_turn_overhead_slices_are_pooled_before_the_medians_are_taken() -> None:
    from bench.agent import combined_overhead

    parts = [{"turn_samples_ms": [10.0, 30.0], "tool_samples_ms": [1.0, 9.0]},
             {"turn_samples_ms": [20.0], "tool_samples_ms": [2.0]}]
    pooled = combined_overhead(parts)
    assert (pooled["turn_p50_ms"], pooled["tool_p50_ms"], pooled["overhead_ms"]) == (20.0, 2.0, 18.0)


def test_the_paired_median_interval_takes_the_textbook_order_statistics() -> None:
    from bench.paired import median_interval

    assert median_interval([float(value) for value in range(1, 101)]) == (50.5, 40.0, 61.0)
    assert median_interval([3.0, 1.0, 2.0, 5.0, 4.0]) == (3.0, 1.0, 5.0)  # few rounds: the extremes


def test_a_paired_run_prints_each_ratio_with_its_interval_and_refuses_too_few_rounds() -> None:
    command = [sys.executable, "-m", "bench.paired", "--transport", "stdio", "--concurrency", "4"]
    done = subprocess.run([*command, "--rounds", "5", "--calls", "16"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| stdio |")]
    assert len(rows) == 3 and all(line.endswith("| 5 |") for line in rows), done.stdout
    refused = subprocess.run([*command, "--rounds", "2"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode == 2 and "--rounds must be at least 5" in refused.stderr


def test_two_digit_row_ids_select_their_own_rows_and_one_digit_ids_not_theirs() -> None:
    from bench.__main__ import row_selection, selected

    assert selected(row_selection("10"), "10a") and selected(row_selection("10"), "10b")
    assert selected(row_selection("13c"), "13c") and not selected(row_selection("13c"), "13a")
    assert not selected(row_selection("1"), "10a") and not selected(row_selection("1"), "11")
    assert selected(row_selection("11,12"), "12") and not selected(row_selection("11"), "1")


def test_a_sub_agent_turns_overhead_is_its_p50_less_that_of_the_plain_turns_timed_between_them() -> None:
    from bench.subagents import turn_overhead

    parts = [{"turn_samples_ms": [12.0, 30.0], "floor_samples_ms": [10.0, 11.0]},
             {"turn_samples_ms": [13.0], "floor_samples_ms": [9.0]}]
    pooled = turn_overhead(parts)
    assert (pooled["p50_ms"], pooled["plain_p50_ms"], pooled["overhead_ms"]) == (13.0, 10.0, 3.0)


def test_first_token_slices_are_pooled_and_set_against_the_in_process_turns_timed_alongside() -> None:
    from bench.openai_api import first_tokens

    alone = first_tokens([{"samples_ms": [5.0, 7.0]}, {"samples_ms": [6.0]}])
    assert alone == {"p50_ms": 6.0, "p99_ms": 7.0}
    paired = first_tokens([{"samples_ms": [9.0, 11.0], "floor_samples_ms": [4.0, 6.0]},
                           {"samples_ms": [10.0], "floor_samples_ms": [5.0]}])
    assert (paired["p50_ms"], paired["in_process_p50_ms"], paired["overhead_ms"]) == (10.0, 5.0, 5.0)


def test_row_10b_counts_the_benchmark_servers_and_serve_processes_of_its_own_setup_only() -> None:
    from bench.subagents import TAG, tagged_processes

    def child(tag: str, *argv: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", *argv],
                                stdin=subprocess.PIPE, env={TAG: tag})

    children = [child("mine", "bench/server.py"), child("mine", "serve", "sub.yaml"),
                child("mine", "bench/server.py"), child("theirs", "bench/server.py")]
    try:
        assert tagged_processes("mine") == {"bench_servers": 2, "serve_processes": 1}
        assert tagged_processes("nobody") == {"bench_servers": 0, "serve_processes": 0}
    finally:
        for process in children:
            process.communicate(timeout=30)  # closes stdin: the child ends
    assert all(process.returncode == 0 for process in children)


def test_row_13c_shows_its_goal_in_kilobytes_and_row_10b_its_processes() -> None:
    from bench.openai_api import MEMORY_GOAL
    from bench.report import describe, shown_value

    assert shown_value(MEMORY_GOAL, 6.5) == "6.50 kB"
    cell = describe("call_p50_ms", {"call_p50_ms": 3.0, "call_p99_ms": 9.0, "bench_servers": 2.0,
                                    "serve_processes": 1.0})
    assert cell == "call p50 3.00 ms · p99 9.00 ms · 2 benchmark server process(es), 1 mcp-run serve"


def test_row_12s_goal_is_on_the_ratio_of_overheads_timed_in_pairs_and_shown_as_a_ratio() -> None:
    from bench.guards import GOAL, combined_paired
    from bench.report import shown_value

    parts = [{"turn_samples_ms": [12.0, 14.0], "tool_samples_ms": [2.0, 2.0],
              "floor_turn_samples_ms": [11.0, 13.0], "floor_tool_samples_ms": [2.0, 3.0]},
             {"turn_samples_ms": [13.0], "tool_samples_ms": [3.0],
              "floor_turn_samples_ms": [12.0], "floor_tool_samples_ms": [2.0]}]
    pooled = combined_paired(parts)
    assert (pooled["overhead_ms"], pooled["floor_overhead_ms"], pooled["overhead_ratio"]) == (11.0, 10.0, 1.1)
    assert GOAL.metric == "overhead_ratio" and not GOAL.met(pooled["overhead_ratio"])
    assert shown_value(GOAL, 1.1) == "1.10×"


def test_row_12s_goal_line_shows_each_rounds_ratio_of_paired_overheads() -> None:
    from bench.guards import GOAL, OFF, ON, ROW
    from bench.harness import Case, CaseResult
    from bench.report import markdown

    async def measure() -> dict[str, float]:
        return {}

    turn = {"overhead_ms": 10.0, "turn_p50_ms": 12.0, "tool_p50_ms": 2.0}
    paired = {"floor_overhead_ms": 9.5}
    floor = CaseResult(Case(ROW, OFF, measure, "overhead_ms"), rounds=[turn] * 2)
    path = CaseResult(Case(ROW, ON, measure, "overhead_ms", OFF, (GOAL,)),
                      rounds=[{**turn, **paired, "overhead_ratio": value} for value in (1.02, 1.1)],
                      ratios=[1.0, 1.0])
    report = markdown([floor, path], {})
    assert "measured 1.06×, rounds 1.02× / 1.10×" in report
    assert "10.0 ms (turn p50 12.0 − tool call p50 2.0) · 1.06× the 9.5 ms of the off turns" in report


def test_row_10b_bound_sets_the_stacks_floor_in_place_of_the_in_process_call_on_both_sides() -> None:
    from bench.report import describe
    from bench.subagents import stack_ceiling

    parts = [{"call_samples_ms": [1.0, 3.0], "in_process_samples_ms": [2.5, 3.0],
              "composed_samples_ms": [6.0, 8.0], "no_subgraph_samples_ms": [0.5, 0.75]},
             {"call_samples_ms": [2.0], "in_process_samples_ms": [2.5], "composed_samples_ms": [7.0],
              "no_subgraph_samples_ms": [1.0]}]
    bound = stack_ceiling(parts)
    # p50s: floor 2.0, in process 2.5, composed 7.0; composed at the floor: 7.0 - 2.5 + 2.0 = 6.5
    assert (bound["call_p50_ms"], bound["in_process_p50_ms"], bound["composed_p50_ms"]) == (2.0, 2.5, 7.0)
    assert bound["ceiling_ratio"] == 3.25
    cell = describe("call_p50_ms", bound)
    assert "call p50 2.00 ms" in cell and "at most 3.25× faster than composed" in cell
    assert bound["no_subgraph_p50_ms"] == 0.75 and "(the tool step calling the model) 0.75 ms" in cell


async def test_the_stacks_floor_turn_reports_its_sub_agents_answer_and_times_the_call() -> None:
    from bench.stack_floor import stack_graph, timed_stack_call

    for graph in (stack_graph(), stack_graph(subgraph=False)):  # a turn answering otherwise than
        assert await timed_stack_call(graph) > 0  # "sub returned: ping" raises BenchError
