"""`mcp-run serve` on a PostgreSQL that goes down and comes back: a caller hears at once that the
conversation store is unreachable (a tool error, no traceback in the log, no password), and the
same conversation goes on once the database is back."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
from builders import write_manifest
from services import PostgresServer, pg_ctl
from serving import ServedProcess, http_agent, http_client, text_of

LIMIT = 90


def logged_lines(served: ServedProcess) -> list[str]:
    lines = []
    while True:
        try:
            lines.append(served.lines.get_nowait())
        except queue.Empty:
            return lines


def test_a_database_that_goes_down_is_named_as_the_unreachable_store_and_serving_recovers(
    tmp_path: Path, own_postgres: PostgresServer
) -> None:
    url = own_postgres.create_database().replace("postgres@", "postgres:s3cret-pw@")
    with turns_across_a_restart(tmp_path, own_postgres, url, ask_while_down=True) as served:
        pass
    logged = "\n".join(logged_lines(served))
    assert "Traceback" not in logged and "raised" not in logged
    assert "s3cret-pw" not in logged


def test_the_first_turn_after_the_database_was_restarted_unseen_is_answered(
    tmp_path: Path, own_postgres: PostgresServer
) -> None:
    # Stopped and started between two turns: every connection the agent held is gone.
    with turns_across_a_restart(tmp_path, own_postgres, own_postgres.create_database(), ask_while_down=False):
        pass


@contextmanager
def turns_across_a_restart(tmp_path: Path, server: PostgresServer, url: str, *,
                           ask_while_down: bool) -> Iterator[ServedProcess]:
    """An agent served on ``url``: a turn, PostgreSQL stopped (``ask_while_down``: a turn then
    fails, naming the unreachable store, without the password) and started, and a turn of the
    same thread answered."""
    manifest = write_manifest(tmp_path, {}, name="stored", model="offline", checkpointer=url)
    with http_agent(manifest) as served:
        anyio.run(_turns_across_a_restart, served, server, ask_while_down)
        yield served


async def _turns_across_a_restart(
    served: ServedProcess, server: PostgresServer, ask_while_down: bool
) -> None:
    with anyio.fail_after(LIMIT):
        async with http_client(served.url) as client:
            first = await client.call_tool("ask", {"message": "hello"})
            assert not first.is_error, text_of(first)
            thread = first.structured_content["thread"]
            pg_ctl(server, "-m", "immediate", "stop")
            if ask_while_down:
                down = await client.call_tool("ask", {"message": "still there?", "thread": thread})
                assert down.is_error
                assert "the conversation store is unreachable" in text_of(down)
                assert "s3cret-pw" not in text_of(down)
            pg_ctl(server, "start")
            back = await client.call_tool("ask", {"message": "back again", "thread": thread})
            assert not back.is_error, text_of(back)
            assert back.structured_content["thread"] == thread
