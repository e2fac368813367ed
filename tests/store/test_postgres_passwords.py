"""A PostgreSQL that asks for a password: where none was given, or a wrong one, the checkpointer's
error says where a password can come from (the URL, PGPASSWORD, ~/.pgpass); the right one from
PGPASSWORD opens it. Against the session's real PostgreSQL, with a role of its own that must log
in with a password."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import psycopg
import pytest
from services import PostgresServer

from runner.errors import CheckpointerError
from runner.store.checkpointers import open_checkpointer

pytestmark = pytest.mark.anyio

PASSWORD = "right-horse-battery"
RELOAD_WAIT = 30.0  # seconds for PostgreSQL to read its changed pg_hba.conf


@pytest.fixture
def password_role(postgres_server: PostgresServer) -> Iterator[str]:
    """A role that logs in with a password only (a pg_hba.conf line of its own); the URL of a
    database it owns, without the password. The role and the line are removed after the test."""
    role = f"pw_{uuid.uuid4().hex[:10]}"
    hba = postgres_server.folder / "data" / "pg_hba.conf"
    original = hba.read_text()
    admin = postgres_server.url()
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
        connection.execute(f"CREATE DATABASE {role} OWNER {role}")
        hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n{original}")
        connection.execute("SELECT pg_reload_conf()")
    try:
        yield f"postgresql://{role}@127.0.0.1:{postgres_server.port}/{role}"
    finally:
        hba.write_text(original)
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute("SELECT pg_reload_conf()")
            connection.execute(f'DROP DATABASE IF EXISTS "{role}" WITH (FORCE)')
            connection.execute(f"DROP ROLE IF EXISTS {role}")


async def opening_error(url: str, state_dir: Path) -> str:
    """The checkpointer's error opening ``url``, once PostgreSQL asks this role for a password."""
    with anyio.fail_after(RELOAD_WAIT):
        while True:
            try:
                async with open_checkpointer(url, state_dir=state_dir):
                    pass
            except CheckpointerError as exc:
                return str(exc)
            await anyio.sleep(0.1)  # the reload is not read yet: the role still logs in freely


async def test_a_missing_password_says_to_give_it_in_the_url_pgpassword_or_pgpass(
    tmp_path: Path, password_role: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))
    message = await opening_error(password_role, tmp_path)
    assert "no password supplied" in message
    assert "none was given" in message
    assert "PGPASSWORD" in message and "~/.pgpass" in message and "postgresql://USER:PASSWORD@" in message


async def test_a_refused_password_says_where_passwords_come_from_and_the_right_one_opens_it(
    tmp_path: Path, password_role: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))
    monkeypatch.setenv("PGPASSWORD", "wrong-" + PASSWORD)
    message = await opening_error(password_role, tmp_path)
    assert "the server refused the password" in message and "PGPASSWORD" in message
    assert PASSWORD not in message
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    with anyio.fail_after(RELOAD_WAIT):
        async with open_checkpointer(password_role, state_dir=tmp_path) as saver:
            assert await saver.aget_tuple({"configurable": {"thread_id": "t"}}) is None
