"""``mcp-run web``'s command line, in process: what it says before it serves (a manifest that is
wrong, a token too short to be safe) and when it cannot open a browser."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import pytest
from builders import invoke, write_manifest

from runner.cli import web


def test_a_missing_or_invalid_manifest_is_reported_with_exit_2_even_when_the_port_is_taken(
        tmp_path: Path, listening_port: int) -> None:
    missing = invoke("web", str(tmp_path / "nope.yaml"), "--port", str(listening_port))
    assert missing.exit_code == 2, missing.output
    assert "nope.yaml" in missing.output and "cannot listen" not in missing.output
    (tmp_path / "bad.yaml").write_text("name: bad\nmodel: offline\nservers: 3\n", encoding="utf-8")
    invalid = invoke("web", str(tmp_path / "bad.yaml"), "--port", str(listening_port))
    assert invalid.exit_code == 2, invalid.output
    assert "servers" in invalid.output and "cannot listen" not in invalid.output


def test_a_token_too_short_to_be_safe_is_warned_about(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {}, model="offline")
    (manifest.parent / manifest.name).unlink()  # stops right after the warning: no page is served
    short = invoke("web", str(manifest), "--token-env", "PAGE_TOKEN", env={"PAGE_TOKEN": "abc"})
    assert "warning: the token in PAGE_TOKEN has only 3 characters" in short.output
    assert "abc" not in short.output  # the token itself is never printed
    long = invoke("web", str(manifest), "--token-env", "PAGE_TOKEN", env={"PAGE_TOKEN": "x" * 32})
    assert "warning" not in long.output


def test_open_without_a_browser_says_that_none_could_be_opened(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(webbrowser, "open", lambda url: False)
    web._open_browser("http://127.0.0.1:1/?token=t")
    assert "no browser could be opened" in capsys.readouterr().err
