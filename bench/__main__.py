"""``python -m bench``: every benchmark row, back to back in rounds, as a Markdown table.

    .venv/bin/python -m bench                 # the full run (under 5 minutes on 2 cores)
    .venv/bin/python -m bench --quick         # fewer rounds and calls (under 60 s)
    .venv/bin/python -m bench --json          # raw numbers of every round instead of the table
    .venv/bin/python -m bench --no-adapters   # skip langchain-mcp-adapters (no venv, no PyPI)
    .venv/bin/python -m bench --smoke         # tiny sizes, one round: does every row still run?
    .venv/bin/python -m bench --no-langchain-mcp   # skip langchain.mcp (no venv, no PyPI)

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
    parser.add_argument("--rounds", type=int, help="override the number of rounds")
    parser.add_argument("--verbose", "-v", action="store_true", help="log the runner too")
    return parser.parse_args(argv)


async def run(settings: Settings, *, peers: list[str]) -> tuple[list[CaseResult], dict[str, Any]]:
    from bench.agent import agent_suite
    from bench.calls import call_suite
    from bench.launch import http_server
    from bench.scale import scale_suite
    from bench.scaleout import scale_out_suite
    from bench.search import search_suite
    from bench.serving import serving_suite
    from bench.startup import command_cases, start_cases
    from bench.telemetry import telemetry_suite

    began = time.perf_counter()
    environment: dict[str, Any] = {
        "python": platform.python_version(), "mcp": version("mcp"), "cpus": os.cpu_count(),
        "load before": f"{os.getloadavg()[0]:.2f}", "rounds": settings.rounds,
    }
    async with AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        logger.info("starting servers and opening sessions")
        http_url = await stack.enter_async_context(http_server())
        suites: list[AbstractAsyncContextManager[Any]] = [
            call_suite(settings, http_url), scale_suite(settings), agent_suite(settings, folder),
            serving_suite(settings, folder), scale_out_suite(settings, folder),
            search_suite(settings),
        ]
        ours = len(suites)  # the peers' suites, when run, come last
        from bench.adapters import PEER_SUITES

        suites += [PEER_SUITES[peer](settings, http_url) for peer in peers]
        opened = await stack.enter_async_context(opened_together(suites, SETUP_TIMEOUT))
        cases: list[Case] = [case for suite_cases in opened[:ours] for case in suite_cases]
        for peer, (peer_cases, versions) in zip(peers, opened[ours:], strict=True):
            cases += peer_cases
            environment[peer] = ", ".join(f"{name} {number}" for name, number in versions.items())
        cases += start_cases(settings) + command_cases(folder / "command")
        cases += await stack.enter_async_context(telemetry_suite(settings))
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
    if options.rounds:
        settings = dataclasses.replace(settings, rounds=options.rounds)
    peers, skipped = chosen_peers(options, smoke=mode == "smoke")
    results, environment = anyio.run(functools.partial(run, settings, peers=peers))
    environment = {"mode": mode, **environment, **skipped}
    output = as_json(results, environment, settings) if options.json else markdown(results, environment)
    sys.stdout.write(output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
