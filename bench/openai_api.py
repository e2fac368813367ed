"""Row 13: the OpenAI-compatible API of ``mcp-run serve --http`` (``/v1/chat/completions``).

The manifest of rows 7a-7b (the offline model, the benchmark server over stdio; each turn one
``bench__echo`` call and the model's report of it), on its default checkpointer (SQLite in the
state folder beside it), runs in this process (``load_agent`` + ``stream_turn``) and as an
``mcp-run serve --http 127.0.0.1:0`` subprocess (a copy of the manifest in a folder of its own,
so each has its own database), called with httpx (what the official ``openai`` client sends its
requests with) over loopback:

- 13a: time to first token of a streamed completion: from sending the request to the first chunk
  carrying text, against the same turn in process (from ``stream_turn``'s start to its first
  ``token`` event), timed alternately; ``overhead_ms`` is the p50 difference. Each turn is on a
  new thread.
- 13b: turns per second with 32 conversations at once, each on a thread of its own, streamed over
  ``/v1`` against MCP ``ask`` calls to the same instance (row 7b's served path: the floor).
- 13c: memory held per idle conversation: the serve process's resident set (``VmRSS``) read before
  and after opening ``idle_threads`` new threads (one turn each, 8 at a time, over ``/v1``); before
  the first round a tenth as many have been opened (lazy imports, caches and pools grown:
  :func:`warm_threads`), and rows 13a-13b's threads may have been too. The conversations'
  checkpoints are in the database file, not in the process, so the growth divided by the threads
  is what ``serve`` keeps per conversation beyond the checkpointer's data; SQLite's own page cache
  (2 MB at most per connection by default) is counted in it. The database's growth per thread is
  reported beside it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import yaml
from mcp import Client

from bench.harness import BenchError, Case, Goal, Settings
from bench.serving import (
    ANSWER,
    MESSAGE,
    as_turns,
    check,
    conversations,
    served_process,
    served_turn,
    write_served_manifest,
)
from bench.stats import Metrics, combined_throughput, elapsed_ms, percentile, run_concurrently, split_calls
from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn

TTFT_ROW = "13a. Chat Completions streaming: time to first token over HTTP vs in process"
THROUGHPUT_ROW = "13b. Chat Completions turns/s vs MCP ask, c=32"
MEMORY_ROW = "13c. serve: memory per idle conversation"
IN_PROCESS = "in process: stream_turn, first token (floor)"
STREAMED = "mcp-run serve --http: POST /v1/chat/completions, stream"
ASK = "mcp-run serve --http: MCP ask, 32 conversations (floor)"
COMPLETIONS = "mcp-run serve --http: /v1/chat/completions streamed, 32 conversations"
IDLE = "mcp-run serve --http on SQLite: threads opened over /v1"
TTFT_GOAL = Goal("Chat Completions time to first token p50 <= 5 ms over the same turn in process", 5.0,
                 metric="overhead_ms")
THROUGHPUT_GOAL = Goal("Chat Completions turns/s at c=32 within 10% of MCP ask (>= 0.9×)", 0.9,
                       better="higher")
MEMORY_GOAL = Goal("memory per idle conversation <= 50 kB beyond the checkpointer's", 50.0,
                   metric="kb_per_thread")
CONCURRENCY = 32
OPENING_CONCURRENCY = 8
THREAD_HEADER = "X-MCP-Run-Thread"


def chat_request(model: str) -> dict[str, Any]:
    return {"model": model, "stream": True, "messages": [{"role": "user", "content": MESSAGE}]}


async def streamed_turn(http: httpx.AsyncClient, api: str, model: str, thread: str) -> float:
    """One streamed completion on ``thread``: ms from sending it to the first chunk with text (the
    whole answer is read, and checked)."""
    first = 0.0
    text = ""
    started = time.perf_counter()
    async with http.stream("POST", f"{api}/chat/completions", json=chat_request(model),
                           headers={THREAD_HEADER: thread}) as response:
        if response.status_code != 200:
            body = await response.aread()
            raise BenchError(f"/v1/chat/completions answered {response.status_code}: {body!r}")
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data: "))
            if "error" in chunk:
                raise BenchError(f"the streamed turn failed: {chunk['error']}")
            for choice in chunk.get("choices", []):
                piece = choice.get("delta", {}).get("content") or ""
                if piece and not text:
                    first = elapsed_ms(started)
                text += piece
    if text != ANSWER:
        raise BenchError(f"the streamed turn answered {text!r} instead of {ANSWER!r}")
    return first


async def first_token_in_process(runtime: Runtime, thread: str) -> float:
    """The same turn in process: ms from ``stream_turn``'s start to its first ``token`` event."""
    first = 0.0
    final = None
    started = time.perf_counter()
    async for event in stream_turn(runtime, MESSAGE, thread_id=thread):
        if event["type"] == "token" and not first:
            first = elapsed_ms(started)
        elif event["type"] == "final":
            final = event["text"]
    await check(final or "", IN_PROCESS)
    if not first:
        raise BenchError("the in-process turn streamed no token")
    return first


def first_token_measures(runtime: Runtime, per_slice: int, remote: Callable[[str], Awaitable[float]]
                         ) -> tuple[Callable[[], Awaitable[Metrics]], Callable[[], Awaitable[Metrics]]]:
    """A first-token row's two measures: ``per_slice`` turns in process, and ``per_slice`` turns
    by ``remote`` (its first token's ms on a thread) timed alternately with in-process ones, so
    both see the same machine (combined by :func:`first_tokens`)."""
    async def in_process() -> Metrics:
        return {"samples_ms": [await first_token_in_process(runtime, uuid.uuid4().hex)
                               for _ in range(per_slice)]}

    async def paired() -> Metrics:
        local, far = [], []
        for _ in range(per_slice):
            local.append(await first_token_in_process(runtime, uuid.uuid4().hex))
            far.append(await remote(uuid.uuid4().hex))
        return {"samples_ms": far, "floor_samples_ms": local}

    return in_process, paired


def resident_kb(pid: int) -> float:
    """The process's resident set (``VmRSS``), in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return float(line.split()[1])
    raise BenchError(f"no VmRSS in /proc/{pid}/status")


def database_kb(folder: Path) -> float:
    """The state folder's SQLite database with its write-ahead log, in kB."""
    return sum(path.stat().st_size for path in (folder / ".mcp-run").glob("state.sqlite*")) / 1024


@asynccontextmanager
async def openai_api_suite(settings: Settings, folder: Path) -> AsyncIterator[list[Case]]:
    # Rows 7a-7b's manifest on the default checkpointer (SQLite in the state folder beside it),
    # twice: the served copy and the in-process one each keep their own database.
    served_manifest, local_manifest = (sqlite_manifest(folder / name) for name in ("served", "local"))
    model = yaml.safe_load(served_manifest.read_text())["name"]
    async with AsyncExitStack() as stack:
        runtime = await stack.enter_async_context(load_agent(local_manifest))
        url, pid = await stack.enter_async_context(served_process(served_manifest))
        api = url.removesuffix("/mcp") + "/v1"
        client = await stack.enter_async_context(Client(url, cache=None))
        # No proxy from the environment: loopback only. As many connections as conversations.
        limits = httpx.Limits(max_connections=CONCURRENCY * 2, max_keepalive_connections=CONCURRENCY * 2)
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=120, trust_env=False, limits=limits))
        await first_token_in_process(runtime, uuid.uuid4().hex)
        await streamed_turn(http, api, model, uuid.uuid4().hex)
        await check(await served_turn(client, uuid.uuid4().hex), ASK)
        await open_threads(http, api, model, warm_threads(settings))
        per_slice = max(settings.agent_turns // settings.latency_slices, 1)

        in_process, streamed = first_token_measures(
            runtime, per_slice, lambda thread: streamed_turn(http, api, model, thread))

        # Each worker makes a quarter of a throughput slice's calls per worker (a turn is 10-20
        # calls' worth of work), at least one.
        total = CONCURRENCY * max(settings.throughput_per_worker // 4, 1)

        async def ask() -> Metrics:
            return await run_concurrently(conversations(lambda thread: served_turn(client, thread)),
                                          total, CONCURRENCY)

        async def completions() -> Metrics:
            return await run_concurrently(
                conversations(lambda thread: streamed_turn(http, api, model, thread)), total, CONCURRENCY)

        async def idle_memory() -> Metrics:
            threads = settings.idle_threads
            before, stored = resident_kb(pid), database_kb(served_manifest.parent)
            await open_threads(http, api, model, threads)
            grown = resident_kb(pid) - before
            return {"kb_per_thread": grown / threads, "rss_growth_mb": grown / 1024,
                    "rss_mb": resident_kb(pid) / 1024, "threads": float(threads),
                    "db_kb_per_thread": (database_kb(served_manifest.parent) - stored) / threads}

        yield [
            Case(TTFT_ROW, IN_PROCESS, in_process, "p50_ms", slices=settings.latency_slices,
                 combine=first_tokens),
            Case(TTFT_ROW, STREAMED, streamed, "p50_ms", IN_PROCESS, (TTFT_GOAL,), settings.latency_slices,
                 first_tokens),
            Case(THROUGHPUT_ROW, ASK, ask, "turns_per_s", slices=settings.throughput_slices, combine=turns),
            Case(THROUGHPUT_ROW, COMPLETIONS, completions, "turns_per_s", ASK, (THROUGHPUT_GOAL,),
                 settings.throughput_slices, turns),
            Case(MEMORY_ROW, IDLE, idle_memory, "kb_per_thread", goals=(MEMORY_GOAL,)),
        ]


def sqlite_manifest(folder: Path) -> Path:
    """Rows 7a-7b's manifest without its ``checkpointer``: SQLite in the state folder beside it."""
    path = write_served_manifest(folder)
    document = yaml.safe_load(path.read_text())
    del document["checkpointer"]
    path.write_text(yaml.safe_dump(document))
    return path


def warm_threads(settings: Settings) -> int:
    """Threads opened before the first measurement: a tenth of a round's, at least 16."""
    return max(settings.idle_threads // 10, 16)


async def open_threads(http: httpx.AsyncClient, api: str, model: str, count: int) -> None:
    """``count`` new threads, one turn each, ``OPENING_CONCURRENCY`` at a time."""
    async def opener(threads: int) -> None:
        for _ in range(threads):
            await streamed_turn(http, api, model, uuid.uuid4().hex)

    async with anyio.create_task_group() as group:
        for threads in split_calls(count, OPENING_CONCURRENCY):
            group.start_soon(opener, threads)


def first_tokens(slices: list[Metrics]) -> Metrics:
    """Time to first token, every slice's samples pooled; against the in-process turns timed
    alongside, when there are."""
    samples = [sample for part in slices for sample in part["samples_ms"]]
    metrics = {"p50_ms": percentile(samples, 0.5), "p99_ms": percentile(samples, 0.99)}
    floor = [sample for part in slices for sample in part.get("floor_samples_ms", [])]
    if floor:
        metrics["in_process_p50_ms"] = percentile(floor, 0.5)
        metrics["overhead_ms"] = metrics["p50_ms"] - metrics["in_process_p50_ms"]
    return metrics


def turns(slices: list[Metrics]) -> Metrics:
    return as_turns(combined_throughput(slices))
