"""What a run keeps (the state folder, its logs, the conversations, the chat's history, saved
media) is readable by its owner only, whatever the umask; older state with wider modes is narrowed
when it is next used."""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import mcp_run, server, write_manifest

from runner.auth.store import TokenRecord
from runner.cli.media import MediaFolder
from runner.manifest.loading import load_manifest
from runner.store.private import private_file, private_folder
from runner.store.state_folder import state_folder


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual umask, under which files are made world-readable unless asked otherwise."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_a_run_makes_its_state_folder_logs_and_conversations_private(
    tmp_path: Path, open_umask: None
) -> None:
    write_manifest(tmp_path, {"demo": server("demo")}, name="private", model="offline")
    result = mcp_run("agent.yaml", "-p", 'demo__echo {"text": "hi"}', cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    state = tmp_path / ".mcp-run"
    assert mode(state) == 0o700
    assert mode(state / "logs") == 0o700
    assert mode(state / "logs" / "demo.log") == 0o600
    databases = [path for path in state.iterdir() if path.name.startswith("state.sqlite") and path.is_file()]
    assert state / "state.sqlite" in databases
    assert {path.name: mode(path) for path in databases} == {path.name: 0o600 for path in databases}
    assert mode(state / "state.sqlite.locks") == 0o700  # the turn's thread lock was a file in there


def test_state_left_world_readable_by_an_older_run_is_narrowed(tmp_path: Path, open_umask: None) -> None:
    write_manifest(tmp_path, {"demo": server("demo")}, name="private", model="offline")
    state = tmp_path / ".mcp-run"
    (state / "logs").mkdir(parents=True, mode=0o755)
    state.chmod(0o755)
    for name in ("state.sqlite", "state.sqlite-wal", "logs/demo.log"):
        (state / name).touch(mode=0o644)
    result = mcp_run("agent.yaml", "-p", 'demo__echo {"text": "hi"}', cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (mode(state), mode(state / "logs")) == (0o700, 0o700)
    assert mode(state / "state.sqlite") == 0o600
    assert mode(state / "logs" / "demo.log") == 0o600
    if (state / "state.sqlite-wal").exists():
        assert mode(state / "state.sqlite-wal") == 0o600


def test_saved_media_and_their_folders_are_private(tmp_path: Path, open_umask: None) -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really").decode()
    block = {"type": "image", "base64": png, "mime_type": "image/png"}
    [saved] = MediaFolder(tmp_path).save("thread-1", "draw", "call-1", [block])
    assert mode(saved.path) == 0o600
    assert mode(saved.path.parent) == 0o700
    assert mode(tmp_path / "media") == 0o700


def test_a_file_another_library_opens_is_created_private_and_an_existing_one_narrowed(
    tmp_path: Path, open_umask: None
) -> None:
    history = private_file(tmp_path / "chat_history")
    assert history.read_bytes() == b"" and mode(history) == 0o600
    history.write_text("kept")
    history.chmod(0o644)
    private_file(history)
    assert mode(history) == 0o600
    assert history.read_text() == "kept"  # narrowed, not truncated


def test_a_folder_is_created_private_and_an_existing_one_narrowed(tmp_path: Path, open_umask: None) -> None:
    folder = private_folder(tmp_path / "a" / "state")
    assert mode(folder) == 0o700
    folder.chmod(0o755)
    private_folder(folder)
    assert mode(folder) == 0o700


def test_the_missing_parents_of_a_private_folder_are_created_private(
    tmp_path: Path, open_umask: None
) -> None:
    private_folder(tmp_path / "xdg" / "mcp-run" / "project-0123")
    created = ("xdg", "xdg/mcp-run", "xdg/mcp-run/project-0123")
    assert [mode(tmp_path / path) for path in created] == [0o700] * 3


def test_the_per_user_state_folder_and_its_parent_are_private(tmp_path: Path, open_umask: None) -> None:
    write_manifest(tmp_path, {}, name="fallback", model="offline")
    (tmp_path / ".mcp-run").write_text("in the way")  # the state folder beside the manifest cannot be made
    loaded = load_manifest(tmp_path / "agent.yaml")
    root = tmp_path / "xdg" / "mcp-run"
    folder = state_folder(loaded, environ={"XDG_STATE_HOME": str(tmp_path / "xdg")})
    assert folder.parent == root
    assert (mode(tmp_path / "xdg"), mode(root), mode(folder), mode(folder / "logs")) == (0o700,) * 4
    root.chmod(0o755)  # as an older run left it
    state_folder(loaded, environ={"XDG_STATE_HOME": str(tmp_path / "xdg")})
    assert mode(root) == 0o700


def test_a_login_creates_the_per_user_folders_private(
    tmp_path: Path, open_umask: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_RUN_TOKEN_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    TokenRecord("https://example.test/mcp", "mcp-run").forget_tokens()
    created = ("xdg", "xdg/mcp-run", "xdg/mcp-run/tokens")
    assert [mode(tmp_path / path) for path in created] == [0o700] * 3
