"""Row 14: ``mcp-run web``: a turn's first token as the page receives it, against the same turn in
process.

The manifest of rows 7a-7b and 13 (the offline model, the benchmark server over stdio; each turn
one ``bench__echo`` call and the model's report of it), on SQLite in the state folder beside it,
runs in this process (``load_agent`` + ``stream_turn``) and as an ``mcp-run web --port 0``
subprocess (a copy of the manifest in a folder of its own).

What is timed is the page's own event stream as the page consumes it: the page's script
(``static/api.js``, ``postStream``) sends ``POST /api/turn`` with the run's token and reads the
answer's server-sent events, appending each ``token`` event's text to the answer as it is read;
here httpx sends the same request over loopback and reads the same stream, and the time runs from
sending it to the first ``event: event`` carrying a ``token``. A browser is not driven: what it
adds after reading the event is one text node's append, and a browser in the benchmark would
mostly time itself. Timed alternately with the in-process turn (from ``stream_turn``'s start to
its first ``token`` event); ``overhead_ms`` is the p50 difference. Each turn is on a new thread.
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx

from bench.harness import BenchError, Case, Goal, Settings
from bench.launch import announcing_process
from bench.openai_api import first_token_in_process, first_token_measures, first_tokens, sqlite_manifest
from bench.serving import ANSWER, MESSAGE

ROW = "14. web page: time to first token of the page's turn stream vs in process"
IN_PROCESS = "in process: stream_turn, first token (floor)"
PAGE_STREAM = "mcp-run web: POST /api/turn, read as the page reads it"
GOAL = Goal("a turn's first token in the page p50 <= 20 ms after the same turn's in process", 20.0,
            metric="overhead_ms")
START_TIMEOUT = 90.0
READY = re.compile(r"the page of '.*' is at (http://\S+)")
TOKEN_HEADER = "X-MCP-Run-Token"


@asynccontextmanager
async def web_process(manifest: Path) -> AsyncIterator[str]:
    """``mcp-run web MANIFEST --port 0`` in a subprocess; yields the page's printed address."""
    command = [sys.executable, "-m", "runner", "web", str(manifest), "--port", "0"]
    async with announcing_process(command, READY, "mcp-run web", START_TIMEOUT) as (url, _):
        yield url


async def page_turn(http: httpx.AsyncClient, base: str, token: str, thread: str) -> float:
    """One turn on ``thread`` through the page's API: ms from sending it to the first ``token``
    event read (the whole stream is read, and its answer checked)."""
    first = 0.0
    text = ""
    failed = None
    started = time.perf_counter()
    async with http.stream("POST", f"{base}/api/turn", json={"thread": thread, "text": MESSAGE},
                           headers={TOKEN_HEADER: token}) as response:
        if response.status_code != 200:
            body = await response.aread()
            raise BenchError(f"/api/turn answered {response.status_code}: {body!r}")
        kind = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data = json.loads(line.removeprefix("data: "))
                if kind == "failed":
                    failed = data.get("message")
                elif kind == "event" and data.get("type") == "token":
                    if not first:
                        first = (time.perf_counter() - started) * 1000
                    text += data["text"]
    if failed is not None or text != ANSWER:
        why = f" (failed: {failed})" if failed is not None else ""
        raise BenchError(f"the page's turn answered {text!r} instead of {ANSWER!r}{why}")
    return first


@asynccontextmanager
async def web_suite(settings: Settings, folder: Path) -> AsyncIterator[list[Case]]:
    from runner.agent.runtime import load_agent

    page_manifest, local_manifest = (sqlite_manifest(folder / name) for name in ("page", "local"))
    async with AsyncExitStack() as stack:
        runtime = await stack.enter_async_context(load_agent(local_manifest))
        url = await stack.enter_async_context(web_process(page_manifest))
        base, token = url.split("/?", 1)[0], url.rsplit("token=", 1)[1]
        # No proxy from the environment: loopback only.
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=120, trust_env=False))
        await first_token_in_process(runtime, uuid.uuid4().hex)
        await page_turn(http, base, token, uuid.uuid4().hex)
        per_slice = max(settings.agent_turns // settings.latency_slices, 1)

        in_process, page_stream = first_token_measures(
            runtime, per_slice, lambda thread: page_turn(http, base, token, thread))

        yield [
            Case(ROW, IN_PROCESS, in_process, "p50_ms", slices=settings.latency_slices, combine=first_tokens),
            Case(ROW, PAGE_STREAM, page_stream, "p50_ms", IN_PROCESS, (GOAL,), settings.latency_slices,
                 first_tokens),
        ]
