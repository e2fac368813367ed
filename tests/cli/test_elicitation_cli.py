"""Requests for input from the command line: the chat asks (a form, a URL, in a pseudo-terminal and
as JSON lines); one-shot runs and `call` decline at once, never hang.

One-shot runs and `call` run in this process (``invoke``). A chat in a pseudo-terminal is shared by
the tests of one module fixture (each leaves it at its prompt); the JSON-lines chat, which reads its
standard input's file descriptor, runs as a process."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect
import pytest
from builders import (
    ask_the_sub_agent_to_delete_a_note,
    asking_agent,
    chat_in_a_terminal,
    invoke,
    main_agent_serving_the_bundled_one,
)


@contextmanager
def asking_chat(tmp_path_factory: pytest.TempPathFactory, *, legacy: bool) -> Iterator[pexpect.spawn]:
    """The chat, in a pseudo-terminal, of the asking server (legacy protocol or 2026's)."""
    folder = tmp_path_factory.mktemp("legacy" if legacy else "modern")
    asking_agent(folder, legacy=legacy)
    with chat_in_a_terminal(folder) as chat:
        yield chat


@pytest.fixture(scope="module")
def legacy_chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pexpect.spawn]:
    with asking_chat(tmp_path_factory, legacy=True) as chat:
        yield chat


@pytest.fixture(scope="module")
def modern_chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pexpect.spawn]:
    with asking_chat(tmp_path_factory, legacy=False) as chat:
        yield chat


@pytest.fixture(scope="module")
def served_chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pexpect.spawn]:
    """The chat of :func:`main_agent_serving_the_bundled_one`, in a pseudo-terminal."""
    folder = tmp_path_factory.mktemp("served")
    main_agent_serving_the_bundled_one(folder)
    with chat_in_a_terminal(folder) as chat:
        yield chat


@contextmanager
def transcript_of(chat: pexpect.spawn) -> Iterator[io.StringIO]:
    """What a shared chat prints inside the block only."""
    chat.logfile_read = printed = io.StringIO()
    try:
        yield printed
    finally:
        chat.logfile_read = None


def test_a_one_shot_run_declines_the_servers_question_and_the_model_hears_it(tmp_path: Path) -> None:
    asking_agent(tmp_path, legacy=True)
    result = invoke("agent.yaml", "-p", "asking__book", "--json", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e for e in events if e["type"] == "elicitation"] == []
    [tool_result] = [e for e in events if e["type"] == "tool_result"]
    assert tool_result["text"].startswith("not booked: the user chose decline")
    assert "this run cannot ask the user" in tool_result["text"]


def test_the_call_command_declines_the_servers_question(tmp_path: Path) -> None:
    asking_agent(tmp_path, legacy=False)
    result = invoke("call", "agent.yaml", "asking__book", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    assert "not booked: the user chose decline" in result.stdout
    assert "this run cannot ask the user" in result.stdout


def test_the_chat_builds_the_form_re_asks_an_invalid_value_and_the_server_gets_the_answer(
    legacy_chat: pexpect.spawn,
) -> None:
    chat = legacy_chat
    chat.sendline("asking__book")
    chat.expect(r"\[asking\] asks: Which day, for how many\?")
    chat.expect(r"\[a\]nswer / \[d\]ecline / \[c\]ancel: ")
    chat.sendline("a")
    chat.expect("Day of the booking")
    chat.expect(r"date \(text; required\): ")
    chat.sendline("")
    chat.expect("date: a value is required")
    chat.sendline("saturday")
    chat.expect(r"seats \(a whole number; at least 1; default 2\): ")
    chat.sendline("0")
    chat.expect("seats: must be at least 1")
    chat.sendline("3")
    chat.expect("booked saturday for 3")
    chat.expect("> ")


@pytest.mark.parametrize("answer,action", [("d", "decline"), ("c", "cancel")])
def test_the_chat_can_decline_or_cancel_a_form(modern_chat: pexpect.spawn, answer: str, action: str) -> None:
    chat = modern_chat
    chat.sendline("asking__book")
    chat.expect(r"\[a\]nswer / \[d\]ecline / \[c\]ancel: ")
    chat.sendline(answer)
    chat.expect(f"not booked: the user chose {action}")
    chat.expect("> ")


def test_the_chat_shows_a_url_request_and_its_answer_reaches_the_server(legacy_chat: pexpect.spawn) -> None:
    chat = legacy_chat
    chat.sendline("asking__visit")
    chat.expect(r"\[asking\] asks you to visit https://calendar.example/sign-in")
    chat.expect("Sign in to the calendar")
    chat.sendline("y")
    chat.expect("visit: accept")
    chat.expect("> ")


def test_the_chat_prints_one_line_of_a_running_calls_progress_when_it_ends(
    legacy_chat: pexpect.spawn,
) -> None:
    chat = legacy_chat
    with transcript_of(chat) as transcript:
        chat.sendline('asking__slow {"steps": 2, "interval": 0.01}')
        chat.expect(r"… asking__slow: 2/2 \(100%\) step 2 \(2 progress notices\)")
        chat.expect("slow done 2")
        chat.expect("> ")
    assert "… asking__slow: 1/2" not in transcript.getvalue()


def test_a_served_sub_agents_streamed_answer_is_one_progress_line_and_a_yes_asks_no_reason(
    served_chat: pexpect.spawn,
) -> None:
    chat = served_chat
    with transcript_of(chat) as transcript:
        ask_the_sub_agent_to_delete_a_note(chat)
        chat.sendline("y")
        # The sub-agent streams its answer as one progress notice a token: one line stays of them.
        shown = chat.expect([r"Reason \(when refusing\)", r"← notes__delete_note failed"])
        assert shown == 1, "a reason was asked after yes"
        chat.expect("> ")
    printed = re.findall(r"… sub__ask: [^\r\n]*", transcript.getvalue())
    assert len(printed) == 1, printed
    assert "progress notices)" in printed[0], printed


def test_a_refusal_of_a_served_sub_agents_approval_is_asked_its_reason(served_chat: pexpect.spawn) -> None:
    chat = served_chat
    ask_the_sub_agent_to_delete_a_note(chat)
    chat.sendline("n")
    chat.expect(r"Reason \(when refusing\) \(text\): ")
    chat.sendline("not today")
    chat.expect("not today")
    chat.expect("> ")


def test_server_log_lines_on_the_terminal_name_the_server_and_start_at_its_terminal_level(
    tmp_path: Path,
) -> None:
    asking_agent(tmp_path, legacy=True, logging={"level": "debug", "terminal": "warning"})
    result = invoke("agent.yaml", "-p", "asking__levels", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    shown = [line for line in result.stderr.splitlines() if "message" in line]
    assert shown == ["[asking] warning: a warning message", "[asking] error: a error message"]
    log = (tmp_path / ".mcp-run" / "logs" / "asking.log").read_text()
    assert "debug [asking.levels]: a debug message" in log


@pytest.mark.parametrize("bad, field", [
    ({"action": "accept", "content": {"date": "sunday", "seats": "abc"}}, "seats"),
    ({"action": "accept"}, "date"),
])
def test_the_json_lines_chat_asks_with_an_elicitation_event_and_again_after_bad_content_naming_the_field(
        tmp_path: Path, bad: dict, field: str) -> None:
    asking_agent(tmp_path, legacy=True)
    lines = [{"text": "asking__book"}, bad, {"action": "accept", "content": {"date": "sunday"}}]
    result = subprocess.run([sys.executable, "-m", "runner", "agent.yaml", "--json"], cwd=tmp_path,
                            input="".join(json.dumps(line) + "\n" for line in lines),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [error] = [e for e in events if e["type"] == "error"]
    assert error["message"].startswith(f"{field}: ")
    assert "invalid literal" not in error["message"]
    questions = [e for e in events if e["type"] == "elicitation"]
    assert len(questions) == 2 and all(question["schema"]["required"] == ["date"] for question in questions)
    assert any(e["type"] == "tool_result" and e["text"] == "booked sunday for 2" for e in events)
