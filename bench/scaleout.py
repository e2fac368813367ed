"""Row 7c: served turns per second of two ``mcp-run serve --http`` instances behind a load balancer,
against one.

Both instances serve one manifest (the offline model, the benchmark server over stdio) whose
conversations live in one PostgreSQL, each with ``--stateless`` (what a balancer needs). Both paths
go through HAProxy (round robin): in front of one instance (the floor) or of both. 8 and 32
conversations at once, each on its own thread; every turn is one tool call and the model's report.

PostgreSQL and HAProxy are Debian's (``tests/services.py`` starts them from temporary folders, as
the tests do); where either cannot run, the row is skipped and the run says why on stderr.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit

import anyio
import yaml
from mcp import Client

from bench.harness import Case, Goal, Settings
from bench.launch import ROOT, stdio_entry
from bench.serving import as_turns, check, conversations, served_agent, served_turn
from bench.stats import run_concurrently

logger = logging.getLogger(__name__)

ONE = "one instance behind HAProxy (floor)"
TWO = "two instances behind HAProxy, round robin"
SCALE_OUT_GOAL = Goal("served turns/s of two instances >= 1.5× one at c=32", 1.5, better="higher")


def row(concurrency: int) -> str:
    return f"7c. served turns/s, two instances vs one, c={concurrency}"


def _services() -> ModuleType:
    """tests/services.py: the PostgreSQL and HAProxy launchers the tests use."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import services

    return services


def write_scaled_manifest(folder: Path, database_url: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    document = {"version": 1, "name": "bench-scaled", "model": "offline", "checkpointer": database_url,
                "servers": {"bench": stdio_entry()}}
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@asynccontextmanager
async def scale_out_suite(settings: Settings, folder: Path) -> AsyncIterator[list[Case]]:
    """The row's cases, or none (said on stderr) where PostgreSQL or HAProxy cannot run."""
    missing = [name for name in ("pytest", "psycopg") if importlib.util.find_spec(name) is None]
    if missing:  # tests/services.py needs pytest; the database, psycopg
        logger.warning("row 7c skipped: %s not installed (pip install -e '.[test,postgres]')",
                       " and ".join(missing))
        yield []
        return
    services = _services()
    levels = [concurrency for concurrency in settings.concurrency if concurrency > 1]
    try:
        database = await anyio.to_thread.run_sync(services.start_postgres)
    except services.ServiceUnavailable as exc:
        logger.warning("row 7c skipped: no PostgreSQL: %s", exc)
        yield []
        return
    try:
        async with AsyncExitStack() as stack:
            url = await anyio.to_thread.run_sync(database.create_database)
            manifest = write_scaled_manifest(folder / "scaled", url)
            ports = []
            for _ in range(2):
                served = await stack.enter_async_context(served_agent(manifest, "--stateless"))
                ports.append(urlsplit(served).port)
            try:
                one = services.start_haproxy({"a": ports[0]})
                stack.callback(services.stop_haproxy, one)
                two = services.start_haproxy({"a": ports[0], "b": ports[1]})
                stack.callback(services.stop_haproxy, two)
            except services.ServiceUnavailable as exc:
                logger.warning("row 7c skipped: no load balancer: %s", exc)
                yield []
                return
            clients = {}
            for path, balancer in ((ONE, one), (TWO, two)):
                clients[path] = await stack.enter_async_context(Client(balancer.url("/mcp"), cache=None))
                await check(await served_turn(clients[path], uuid.uuid4().hex), path)
            yield [case for concurrency in levels for case in _cases(settings, clients, concurrency)]
    finally:  # also when cancelled (Ctrl-C, a failed sibling): a cancelled await would skip it
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(services.stop_postgres, database)


def _cases(settings: Settings, clients: dict[str, Client], concurrency: int) -> list[Case]:
    total = max(settings.throughput_calls // 4, concurrency)

    def measure(client: Client) -> Callable[[], Awaitable[dict[str, float]]]:
        async def turns() -> dict[str, float]:
            return as_turns(await run_concurrently(conversations(lambda thread: served_turn(client, thread)),
                                                   total, concurrency))

        return turns

    goals = (SCALE_OUT_GOAL,) if concurrency == 32 else ()
    return [Case(row(concurrency), ONE, measure(clients[ONE]), "turns_per_s"),
            Case(row(concurrency), TWO, measure(clients[TWO]), "turns_per_s", ONE, goals)]
