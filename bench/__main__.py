"""``python -m bench``: every benchmark row, back to back in rounds, as a Markdown table.

    .venv/bin/python -m bench                 # the full run (about 6 minutes on 2 cores, and row 9's
                                              # 1,000-turn thread: 2-3 minutes a round)
    .venv/bin/python -m bench --quick         # fewer rounds and calls (under 60 s)
    .venv/bin/python -m bench --json          # raw numbers of every round instead of the table
    .venv/bin/python -m bench --no-adapters   # skip langchain-mcp-adapters (no venv, no PyPI)
    .venv/bin/python -m bench --smoke         # tiny sizes, one round: does every row still run?
    .venv/bin/python -m bench --no-langchain-mcp   # skip langchain.mcp (no venv, no PyPI)
    .venv/bin/python -m bench --rows 1,4a     # only these rows ("6" is 6a-6c, "3" is 3 and 3b)

A smoke run uses a peer's environment only if it exists already (it never installs one).

Progress goes to stderr; the table (or JSON) to stdout. See bench/README.md for the rows and goals.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import os
import platform
import sys
import tempfile
import time
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio

from bench.harness import PRESETS, Case, CaseResult, Settings, opened_together, run_rounds
from bench.report import as_json, markdown

logger = logging.getLogger("bench")
SETUP_TIMEOUT = 600.0  # includes creating the adapters environment on a first run


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer rounds and calls (< 60 s)")
    size.add_argument("--smoke", action="store_true", help="tiny sizes, one round (CI)")
    parser.add_argument("--json", action="store_true", help="print raw numbers as JSON")
    parser.add_argument("--no-adapters", action="store_true",
                        help="skip the langchain-mcp-adapters rows (and the venv they need)")
    parser.add_argument("--no-langchain-mcp", action="store_true",
                        help="skip the langchain.mcp MCPAdapter rows (and the venv they need)")
    parser.add_argument("--rounds", type=positive, help="override the number of rounds (1 or more)")
    parser.add_argument("--rows", type=row_selection, default=None, metavar="IDS",
                        help="only these rows, comma-separated ids (1, 2, 3, 3b, 4a, 5, 6, 7c, ...)")
    parser.add_argument("--verbose", "-v", action="store_true", help="log the runner too")
    return parser.parse_args(argv)


# The rows each suite measures: a suite none of whose rows is selected is not even opened.
SUITE_ROWS = {
    "calls": ("1", "2"), "scale": ("4a", "4b"), "agent": ("5", "6a", "6b", "6c"),
    "serving": ("7a", "7b"), "scale-out": ("7c",), "search": ("4c",), "adapters": ("1", "2"),
    "langchain.mcp": ("1", "2", "4a"), "start": ("3",), "command": ("3b",), "telemetry": ("8",),
    "threads": ("9",), "context": ("4d",), "sub-agents": ("10a", "10b"),
    "fan-out": ("11",), "guards": ("12",),
    "openai-api": ("13a", "13b", "13c"),
    "web": ("14",),
}


def positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, not {text!r}")
    return number


def row_selection(text: str) -> tuple[str, ...]:
    tokens = tuple(dict.fromkeys(token.strip() for token in text.split(",")))
    known = {row for rows in SUITE_ROWS.values() for row in rows}
    unknown = [token for token in tokens if not any(_matches(token, row) for row in known)]
    if "" in tokens:  # "1,,4a", a trailing comma: a mistyped list, not a shorter one
        raise argparse.ArgumentTypeError(f"an empty row id in {text!r}; rows: {', '.join(sorted(known))}")
    if unknown:
        shown = ", ".join(repr(token) for token in unknown) if unknown else repr(text)
        raise argparse.ArgumentTypeError(f"unknown row id(s) {shown}; rows: {', '.join(sorted(known))}")
    return tokens


def _matches(token: str, row_id: str) -> bool:
    """``6`` selects 6a, 6b and 6c; ``3`` selects 3 and 3b; ``3b`` selects 3b only."""
    return row_id == token or (row_id.startswith(token) and row_id[len(token):].isalpha())


def selected(selection: tuple[str, ...] | None, *row_ids: str) -> bool:
    return selection is None or any(_matches(token, row) for token in selection for row in row_ids)


def row_id(row: str) -> str:
    return row.split(".", 1)[0]


async def run(settings: Settings, *, peers: list[str],
              rows: tuple[str, ...] | None = None) -> tuple[list[CaseResult], dict[str, Any]]:
    from bench.agent import agent_suite
    from bench.calls import call_suite
    from bench.context import context_suite
    from bench.fanout import fan_out_suite
    from bench.guards import guards_suite
    from bench.launch import http_server
    from bench.openai_api import openai_api_suite
    from bench.scale import scale_suite
    from bench.scaleout import scale_out_suite
    from bench.search import search_suite
    from bench.serving import serving_suite
    from bench.startup import command_cases, start_cases
    from bench.subagents import sub_agent_suite
    from bench.telemetry import telemetry_suite
    from bench.threads import long_thread_suite
    from bench.web import web_suite

    began = time.perf_counter()
    environment: dict[str, Any] = {
        "python": platform.python_version(), "mcp": version("mcp"), "cpus": os.cpu_count(),
        "load before": f"{os.getloadavg()[0]:.2f}", "rounds": settings.rounds,
    }
    async with AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        logger.info("starting servers and opening sessions")
        http_url = await stack.enter_async_context(http_server())
        factories = {
            "calls": lambda: call_suite(settings, http_url),
            "scale": lambda: scale_suite(settings, wide=selected(rows, "4b")),
            "agent": lambda: agent_suite(settings, folder),
            "serving": lambda: serving_suite(settings, folder),
            "scale-out": lambda: scale_out_suite(settings, folder),
            "search": lambda: search_suite(settings),
            "context": lambda: context_suite(settings),
            "threads": lambda: long_thread_suite(settings, folder),
            "sub-agents": lambda: sub_agent_suite(settings, folder / "sub-agents"),
            "fan-out": lambda: fan_out_suite(settings, folder / "fan-out"),
            "guards": lambda: guards_suite(settings, folder / "guards"),
            "openai-api": lambda: openai_api_suite(settings, folder / "openai-api"),
            "web": lambda: web_suite(settings, folder / "web"),
        }
        suites: list[AbstractAsyncContextManager[Any]] = [
            factory() for name, factory in factories.items() if selected(rows, *SUITE_ROWS[name])
        ]
        ours = len(suites)  # the peers' suites, when run, come last
        from bench.adapters import PEER_SUITES

        peers = [peer for peer in peers if selected(rows, *SUITE_ROWS[peer])]
        suites += [PEER_SUITES[peer](settings, http_url) for peer in peers]
        opened = await stack.enter_async_context(opened_together(suites, SETUP_TIMEOUT))
        cases: list[Case] = [case for suite_cases in opened[:ours] for case in suite_cases]
        for peer, (peer_cases, versions) in zip(peers, opened[ours:], strict=True):
            cases += peer_cases
            environment[peer] = ", ".join(f"{name} {number}" for name, number in versions.items())
        if selected(rows, *SUITE_ROWS["start"]):
            cases += start_cases(settings)
        if selected(rows, *SUITE_ROWS["command"]):
            cases += command_cases(folder / "command")
        if selected(rows, *SUITE_ROWS["telemetry"]):
            cases += await stack.enter_async_context(telemetry_suite(settings))
        cases = [case for case in cases if selected(rows, row_id(case.row))]
        logger.info("setup took %.1f s; %d cases, %d rounds", time.perf_counter() - began, len(cases),
                    settings.rounds)
        results = await run_rounds(cases, settings.rounds, on_round=_log_round)
    environment["load after"] = f"{os.getloadavg()[0]:.2f}"
    environment["wall time"] = f"{time.perf_counter() - began:.0f} s"
    return results, environment


def _log_round(index: int, seconds: float) -> None:
    logger.info("round %d done in %.1f s", index, seconds)


def chosen_peers(options: argparse.Namespace, *, smoke: bool) -> tuple[list[str], dict[str, str]]:
    """The peers to run, and why each other one is not; a smoke run never creates an environment."""
    from bench.adapters import PEER_ENVIRONMENTS

    peers, skipped = [], {}
    for peer, flag in (("adapters", options.no_adapters), ("langchain.mcp", options.no_langchain_mcp)):
        if flag:
            skipped[peer] = f"skipped (--no-{peer.replace('.', '-').replace('_', '-')})"
        elif smoke and not PEER_ENVIRONMENTS[peer].is_ready():
            skipped[peer] = f"skipped ({PEER_ENVIRONMENTS[peer].folder.name} does not exist)"
        else:
            peers.append(peer)
    return peers, skipped


def main(argv: list[str] | None = None) -> int:
    options = parse_arguments(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    if not options.verbose:  # restarts during the reload rows are expected; keep stderr readable
        logging.getLogger("runner").setLevel(logging.ERROR)
        logging.getLogger("mcp").setLevel(logging.ERROR)
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("httpx2").setLevel(logging.WARNING)
    mode = "smoke" if options.smoke else "quick" if options.quick else "full"
    settings = PRESETS[mode]
    if options.rounds is not None:
        settings = dataclasses.replace(settings, rounds=options.rounds)
    peers, skipped = chosen_peers(options, smoke=mode == "smoke")
    try:
        results, environment = anyio.run(functools.partial(run, settings, peers=peers, rows=options.rows))
    except KeyboardInterrupt:  # every server and worker is stopped by then (their contexts exit)
        sys.stderr.write("bench: interrupted\n")
        return 130
    environment = {"mode": mode, **environment, **skipped}
    if options.rows:
        environment["rows"] = ",".join(options.rows)
    output = as_json(results, environment, settings) if options.json else markdown(results, environment)
    sys.stdout.write(output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
