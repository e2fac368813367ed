"""What a server says never drives the user's terminal: each class of sequence a terminal obeys
(OSC 52, OSC 0, CSI 2J, a cursor movement, C1 controls, bidi overrides), sent by the hostile server
(``tests/mcp_servers/hostile.py``) as a tool's description and result, a log message, an elicitation
message and a failed server's stderr, reaches every output path shown, never raw."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from builders import chat_in_a_terminal, server, write_manifest

from runner.cli.safe_text import visible

LIMIT = 120
# What the terminal must never receive, printed by mcp-run's own styling or not.
RAW = ("\x1b]52", "\x1b]0;pwned", "\x1b[2J", "\x1b[3;7H", "\x9b", "\x9d", "\u202e", "\u2066", "\x08", "\x7f")
# Any control character but newline and tab (CR too: it would rewrite the line).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SHOWN = "start ^[]52;c;aGFja2Vk^G ^[]0;pwned^G ^[[2J ^[[3;7H \\x9b2J"


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    write_manifest(tmp_path, {"hostile": server("hostile"), "broken": server("hostile", "--fail")},
                   name="hostile", model="offline")
    return tmp_path


def mcp_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runner", *args], capture_output=True, text=True,
                          timeout=LIMIT, cwd=cwd, stdin=subprocess.DEVNULL)


def assert_safe(text: str) -> None:
    assert CONTROL.search(text) is None, repr(CONTROL.search(text))
    assert "[bold]styled[/bold]" in text  # markup shown as text, not read


def test_visible_shows_each_control_and_keeps_newlines_and_tabs() -> None:
    assert visible("a\x1b[2Jb\tc\r\nd\x07\x7f\x9b\u202e") == "a^[[2Jb\tc\nd^G^?\\x9b\\u202e"
    assert visible(visible("\x1b]52;c;x\x07")) == "^[]52;c;x^G"  # shown once, not twice


def test_one_shot_output_and_its_warnings_show_every_sequence_as_text(agent_dir: Path) -> None:
    result = mcp_run("agent.yaml", "-p", "hostile__shout", cwd=agent_dir)
    assert result.returncode == 0, result.stderr
    assert_safe(result.stdout)  # the streamed answer
    assert_safe(result.stderr)  # the tool preview, the log message, the failed server's stderr tail
    assert result.stdout.startswith(f"hostile__shout returned: {SHOWN}")
    assert f"[hostile] warning: {SHOWN}" in result.stderr  # the server's log notification
    assert f"← {SHOWN}" in result.stderr  # the tool result's preview
    assert "broken: the server exited with code 3" in result.stderr
    assert result.stderr.count(SHOWN) == 3  # and the stderr tail of the server that failed


def test_one_shot_json_output_escapes_every_control(agent_dir: Path) -> None:
    result = mcp_run("agent.yaml", "-p", "hostile__shout", "--json", cwd=agent_dir)
    assert result.returncode == 0, result.stderr
    assert CONTROL.search(result.stdout) is None and result.stdout.isascii()
    final = next(event for event in map(json.loads, result.stdout.splitlines()) if event["type"] == "final")
    assert "\x1b]52;c;aGFja2Vk\x07" in final["text"]  # the text itself is intact, only escaped


def test_the_tools_listing_shows_names_and_descriptions_as_text(agent_dir: Path) -> None:
    result = mcp_run("tools", "agent.yaml", cwd=agent_dir)
    assert result.returncode == 0, result.stderr
    assert CONTROL.search(result.stdout + result.stderr) is None
    assert "hostile__shout" in result.stdout and "^[]52;c;aGFja2Vk^G" in result.stdout


def test_the_call_command_shows_the_result_as_text(agent_dir: Path) -> None:
    result = mcp_run("call", "agent.yaml", "hostile__shout", cwd=agent_dir)
    assert result.returncode == 0, result.stderr
    assert_safe(result.stdout)
    assert SHOWN in result.stdout


def test_the_chat_in_a_terminal_shows_previews_answers_listings_and_questions_as_text(
    agent_dir: Path,
) -> None:
    with chat_in_a_terminal(agent_dir) as chat:
        chat.logfile_read = shown = io.StringIO()  # all the terminal receives from here on
        chat.sendline("hostile__shout")
        chat.expect(re.escape("hostile__shout returned: start ^[]52"))
        chat.expect("> ")
        chat.sendline("/tools")
        chat.expect("hostile__fine")
        chat.expect("> ")
        chat.sendline("hostile__ask")
        chat.expect(r"\[a\]nswer / \[d\]ecline / \[c\]ancel: ")
        chat.sendline("d")
        chat.expect("asked: decline")
        chat.expect("> ")
    seen = shown.getvalue()
    # The terminal gets mcp-run's own styling, so ESC as such is there: the server's sequences are not.
    assert not [raw for raw in RAW if raw in seen], [raw for raw in RAW if raw in seen]
    assert seen.count("^[]0;pwned^G") >= 4  # preview, answer, listing, question
    assert "[bold]styled[/bold]" in seen

