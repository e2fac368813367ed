"""The loop of a peer's worker (``bench.adapters_worker``, ``bench.langchain_mcp_worker``).

A worker runs in the peer's own environment and is driven over stdin/stdout, one JSON object a line:

    -> {"op": "setup", ...}                <- {"cases": [{"id", "row", "path", "key", "floor"}, ...],
                                                "versions": {...}}
    -> {"op": "measure", "id": "..."}      <- {"metrics": {...}}
    -> {"op": "quit"}

Any failure is answered as {"error": "..."}. Imports only the standard library and anyio, so it
runs in any environment.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio

Metrics = dict[str, float]
Measure = Callable[[], Awaitable[Metrics]]
Described = dict[str, tuple[dict[str, Any], Measure]]
# setup(stack, request) -> (cases, versions); sessions it opens live on ``stack`` until quit
Setup = Callable[[AsyncExitStack, dict[str, Any]], Awaitable[tuple[Described, dict[str, str]]]]


def describe(cases: Described, row: str, path: str, key: str, floor: str | None, measure: Measure,
             *, sliced: bool = False) -> None:
    """A case; ``sliced``: a latency case whose measure is one ``latency_slice`` (pooled by the harness)."""
    case_id = f"{row} / {path}"
    cases[case_id] = ({"id": case_id, "row": row, "path": path, "key": key, "floor": floor, "sliced": sliced},
                      measure)


def reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def serve(setup: Setup) -> None:
    cases: Described = {}
    async with AsyncExitStack() as stack:
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                return  # the harness went away
            request = json.loads(line)
            try:
                if request["op"] == "quit":
                    return
                if request["op"] == "setup":
                    opened, versions = await setup(stack, request)
                    cases.update(opened)
                    reply({"cases": [description for description, _ in cases.values()], "versions": versions})
                elif request["op"] == "measure":
                    reply({"metrics": await cases[request["id"]][1]()})
                else:
                    reply({"error": f"unknown op {request['op']!r}"})
            except Exception:  # the harness reports it; the worker keeps serving
                reply({"error": traceback.format_exc()})
