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

from runner.cli.safe_text import visible, visible_traceback
from runner.errors import ServerStartError

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



def test_under_debug_the_traceback_of_a_failed_servers_start_shows_its_stderr_as_text(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"broken": server("hostile", "--fail", required=True)}, name="hostile",
                   model="offline")
    result = mcp_run("--debug", "tools", "agent.yaml", cwd=tmp_path)
    assert result.returncode == 1, result.stderr  # a runtime failure, as without --debug
    assert "Traceback" in result.stderr and "ServerStartError: broken: the server exited" in result.stderr
    assert CONTROL.search(result.stderr) is None, repr(CONTROL.search(result.stderr))
    assert SHOWN in result.stderr


def test_under_debug_the_traceback_of_an_invalid_manifest_shows_its_text_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text('version: 1\nname: x\nmodel: offline\n"evil\\e]0;pwned\\a": 1\n')
    result = mcp_run("--debug", "validate", "bad.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stderr  # invalid input, as without --debug
    assert "Traceback" in result.stderr and "unknown key 'evil^[]0;pwned^G'" in result.stderr
    assert CONTROL.search(result.stderr) is None, repr(CONTROL.search(result.stderr))


def test_a_debug_traceback_shows_chained_errors_as_text_with_their_url_credentials_hidden() -> None:
    try:
        try:
            raise OSError("GET http://ann:hunter2@127.0.0.1:9/mcp?token=t0k failed \x1b]52;c;eA==\x07")
        except OSError as cause:
            raise ServerStartError("web", "cannot connect \x1b[2J") from cause
    except ServerStartError as error:
        shown = visible_traceback(error)
    assert "hunter2" not in shown and "t0k" not in shown
    assert "http://ann:***@127.0.0.1:9/mcp?token=***" in shown
    assert "cannot connect ^[[2J" in shown and "^[]52;c;eA==^G" in shown
    assert CONTROL.search(shown) is None
