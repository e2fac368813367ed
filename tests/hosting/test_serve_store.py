"""`mcp-run serve` on a PostgreSQL that goes down and comes back: a caller hears at once that the
conversation store is unreachable (a tool error, no traceback in the log, no password), and the
same conversation goes on once the database is back."""

from __future__ import annotations

import queue
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from builders import write_manifest
from services import (
    POSTGRES_SETTINGS,
    START_WAIT,
    STOP_WAIT,
    PostgresServer,
    _as_user,
    postgres_or_skip,
)
from serving import ServedProcess, http_agent, http_client, text_of

LIMIT = 90
STORE_WAIT = 15.0  # the pool waits POOL_WAIT (5 s) for a connection; far less than psycopg's 30 s


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL of this test alone: the test stops and restarts it."""
    yield from postgres_or_skip()


def pg_ctl(server: PostgresServer, *action: str) -> None:
    options = f"-p {server.port} -k {server.folder} {POSTGRES_SETTINGS}"
    command = [str(server.bin_dir / "pg_ctl"), "-D", str(server.folder / "data"), "-l",
               str(server.folder / "postgres.log"), "-o", options, "-w", "-t", str(int(START_WAIT)), *action]
    subprocess.run(_as_user(server.user, command), capture_output=True, timeout=STOP_WAIT + START_WAIT,
                   check=True, stdin=subprocess.DEVNULL)


def logged_lines(served: ServedProcess) -> list[str]:
    lines = []
    while True:
        try:
            lines.append(served.lines.get_nowait())
        except queue.Empty:
            return lines


async def test_a_database_that_goes_down_is_named_as_the_unreachable_store_and_serving_recovers(
    tmp_path: Path, own_postgres: PostgresServer
) -> None:
    url = own_postgres.create_database().replace("postgres@", "postgres:s3cret-pw@")
    manifest = write_manifest(tmp_path, {}, name="stored", model="offline", checkpointer=url)
    with http_agent(manifest) as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:
                first = await client.call_tool("ask", {"message": "hello"})
                assert not first.is_error, text_of(first)
                thread = first.structured_content["thread"]

                pg_ctl(own_postgres, "-m", "immediate", "stop")
                started = time.monotonic()
                down = await client.call_tool("ask", {"message": "still there?", "thread": thread})
                assert time.monotonic() - started < STORE_WAIT
                assert down.is_error
                assert "the conversation store is unreachable" in text_of(down)
                assert "s3cret-pw" not in text_of(down)

                pg_ctl(own_postgres, "start")
                back = await client.call_tool("ask", {"message": "back again", "thread": thread})
                assert not back.is_error, text_of(back)
        logged = "\n".join(logged_lines(served))
        assert "Traceback" not in logged and "raised" not in logged
        assert "s3cret-pw" not in logged
