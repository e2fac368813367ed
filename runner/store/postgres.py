"""The PostgreSQL checkpointer (``checkpointer: postgres://…``), shared by several processes.

A pool of connections rather than one: concurrent conversations do not queue behind a single
connection, and a connection the server dropped is replaced instead of failing every later turn.
Each read or write takes a connection of its own from the pool, so the saver's operations need no
lock between them (``AsyncPostgresSaver`` holds one around every operation, which one shared
connection needs and a pool does not: it would put every turn of the process in one queue). A
connection lent by the pool is checked with a round trip first: a connection the server closed
sends its reason at some point after the close, so looking for it without a round trip races.
The tables are created (and migrated) under a PostgreSQL advisory lock, so instances starting
together on a new database do not race to create them.

Needs the ``postgres`` extra (``langgraph-checkpoint-postgres`` and psycopg). libpq settings go in
the URL as usual (``?sslmode=require&connect_timeout=5``); the password may come from the URL, from
``PGPASSWORD`` or from ``~/.pgpass``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from runner.errors import CheckpointerError

POOL_MAX_SIZE = 10  # connections per process; a turn holds one only while it reads or writes
CONNECT_TIMEOUT = 10.0  # seconds to get the first connection at start-up
# Seconds a read or write waits for a pooled connection: with the database down, a turn fails in
# this time (psycopg_pool's default is 30 s) and the caller hears why.
POOL_WAIT = 5.0
# Key of the advisory lock held while the tables are created: any constant unique to this use.
SETUP_LOCK_KEY = 0x6D63_7072_756E  # "mcprun"
SETUP_POLL = 0.05  # seconds between attempts to take that lock
SETUP_WAIT = 60.0  # seconds another process may take to create the tables
MISSING_PACKAGE = (
    "the postgres checkpointer needs the langgraph-checkpoint-postgres package: "
    "pip install 'mcp-run[postgres]' (or langgraph-checkpoint-postgres and psycopg[binary])"
)


@asynccontextmanager
async def open_postgres_saver(url: str) -> AsyncIterator[Any]:
    """An ``AsyncPostgresSaver`` over a connection pool to ``url``, its tables set up, for the block.

    Raises CheckpointerError when the package is missing or the database cannot be reached; the
    message names host and user as psycopg does, never the password.
    """
    try:
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import DictRow, dict_row
        from psycopg_pool import AsyncConnectionPool, PoolTimeout

        from runner.store.pooled_postgres import AdvisoryLocks, PooledPostgresSaver
    except ImportError as exc:
        raise CheckpointerError(MISSING_PACKAGE) from exc
    # The settings AsyncPostgresSaver.from_conn_string uses for its connection.
    settings: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}

    # The tables first, on a connection of its own: an unreachable database fails at once, with
    # libpq's reason, rather than after the pool's wait.
    try:
        async with await psycopg.AsyncConnection.connect(url, **settings) as connection:
            await _setup_tables(connection, AsyncPostgresSaver)
    except TimeoutError as exc:
        raise CheckpointerError(
            "cannot open the postgres checkpointer: "
            f"its tables were still being created after {SETUP_WAIT:g}s"
        ) from exc
    except psycopg.Error as exc:  # its messages name host and user, never the password
        raise CheckpointerError(f"cannot open the postgres checkpointer: {exc}{password_hint(exc)}") from exc
    # The pool checks a connection before lending it, so one the server closed is replaced.
    # connection_class types the pool's rows as the dicts row_factory makes (psycopg_pool's way).
    pool = AsyncConnectionPool(url, min_size=1, max_size=POOL_MAX_SIZE, open=False, kwargs=settings,
                               connection_class=psycopg.AsyncConnection[DictRow],
                               check=AsyncConnectionPool.check_connection, timeout=POOL_WAIT)
    try:
        try:
            await pool.open(wait=True, timeout=CONNECT_TIMEOUT)
        except PoolTimeout as exc:
            raise CheckpointerError(
                f"cannot open the postgres checkpointer: no connection within {CONNECT_TIMEOUT:g}s"
            ) from exc
        locks = AdvisoryLocks(url, settings)
        try:
            yield PooledPostgresSaver(pool, locks=locks)
        finally:
            await locks.aclose()
    finally:
        await pool.close()


# libpq's words when the server asks for a password and none was given, or refuses the one given.
NO_PASSWORD, WRONG_PASSWORD = "no password supplied", "password authentication failed"
PASSWORD_SOURCES = (
    "the URL (postgresql://USER:PASSWORD@HOST/DB; percent-encode special characters), the PGPASSWORD "
    "variable, or the password file ~/.pgpass (or the file PGPASSFILE names; "
    "a line HOST:PORT:DB:USER:PASSWORD, mode 0600)"
)


def password_hint(error: Exception) -> str:
    """What to do when libpq's ``error`` is about the password: where a password can come from."""
    text = str(error)
    if NO_PASSWORD in text:
        return f" (the server asks for a password and none was given: give it in {PASSWORD_SOURCES})"
    if WRONG_PASSWORD in text:
        return f" (the server refused the password: check the one in {PASSWORD_SOURCES})"
    return ""


def store_failures() -> tuple[type[Exception], ...]:
    """The exceptions a postgres checkpointer raises when its database fails or is unreachable
    (none without the package): the callers translate them into CheckpointerError."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.Error,)


async def _setup_tables(connection: Any, saver_class: Any) -> None:
    """Create or migrate the checkpointer's tables, one process at a time.

    The lock is polled, not awaited in SQL: a session blocked in ``pg_advisory_lock`` holds a
    snapshot, which the migrations' ``CREATE INDEX CONCURRENTLY`` waits for (a deadlock).
    """
    with anyio.fail_after(SETUP_WAIT):
        # Another process holding it (creating the tables) sends nothing to wait on: poll.
        while not await _try_lock(connection):  # noqa: ASYNC110
            await anyio.sleep(SETUP_POLL)
    try:
        await saver_class(conn=connection).setup()
    finally:
        await connection.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))


async def _try_lock(connection: Any) -> bool:
    cursor = await connection.execute("SELECT pg_try_advisory_lock(%s) AS locked", (SETUP_LOCK_KEY,))
    return bool((await cursor.fetchone())["locked"])
