"""Requests for input from the command line: the chat asks (a form, a URL, in a pseudo-terminal and
as JSON lines); one-shot runs and `call` decline at once, never hang."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from builders import (
    ask_the_sub_agent_to_delete_a_note,
    asking_agent,
    chat_in_a_terminal,
    main_agent_serving_the_bundled_one,
    mcp_run,
)


def test_a_one_shot_run_declines_the_servers_question_and_the_model_hears_it(tmp_path: Path) -> None:
    asking_agent(tmp_path, legacy=True)
    result = mcp_run("agent.yaml", "-p", "asking__book", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e for e in events if e["type"] == "elicitation"] == []
    [tool_result] = [e for e in events if e["type"] == "tool_result"]
    assert tool_result["text"].startswith("not booked: the user chose decline")
    assert "this run cannot ask the user" in tool_result["text"]


def test_the_call_command_declines_the_servers_question(tmp_path: Path) -> None:
    asking_agent(tmp_path, legacy=False)
    result = mcp_run("call", "agent.yaml", "asking__book", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "not booked: the user chose decline" in result.stdout
    assert "this run cannot ask the user" in result.stdout


def test_the_chat_builds_the_form_re_asks_an_invalid_value_and_the_server_gets_the_answer(
    tmp_path: Path,
) -> None:
    asking_agent(tmp_path, legacy=True)
    with chat_in_a_terminal(tmp_path) as chat:
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
def test_the_chat_can_decline_or_cancel_a_form(tmp_path: Path, answer: str, action: str) -> None:
    asking_agent(tmp_path, legacy=False)
    with chat_in_a_terminal(tmp_path) as chat:
        chat.sendline("asking__book")
        chat.expect(r"\[a\]nswer / \[d\]ecline / \[c\]ancel: ")
        chat.sendline(answer)
        chat.expect(f"not booked: the user chose {action}")
        chat.expect("> ")


def test_the_chat_shows_a_url_request_and_its_answer_reaches_the_server(tmp_path: Path) -> None:
    asking_agent(tmp_path, legacy=True)
    with chat_in_a_terminal(tmp_path) as chat:
        chat.sendline("asking__visit")
        chat.expect(r"\[asking\] asks you to visit https://calendar.example/sign-in")
        chat.expect("Sign in to the calendar")
        chat.sendline("y")
        chat.expect("visit: accept")
        chat.expect("> ")


def test_the_chat_prints_one_line_of_a_running_calls_progress_when_it_ends(tmp_path: Path) -> None:
    asking_agent(tmp_path, legacy=True)
    with chat_in_a_terminal(tmp_path) as chat:
        chat.logfile_read = transcript = io.StringIO()
        chat.sendline('asking__slow {"steps": 2, "interval": 0.01}')
        chat.expect(r"… asking__slow: 2/2 \(100%\) step 2 \(2 progress notices\)")
        chat.expect("slow done 2")
        chat.expect("> ")
    assert "… asking__slow: 1/2" not in transcript.getvalue()


def test_a_served_sub_agents_streamed_answer_is_one_progress_line_and_a_yes_asks_no_reason(
    tmp_path: Path,
) -> None:
    main_agent_serving_the_bundled_one(tmp_path)
    with chat_in_a_terminal(tmp_path) as chat:
        chat.logfile_read = transcript = io.StringIO()
        ask_the_sub_agent_to_delete_a_note(chat)
        chat.sendline("y")
        # The sub-agent streams its answer as one progress notice a token: one line stays of them.
        shown = chat.expect([r"Reason \(when refusing\)", r"← notes__delete_note failed"])
        assert shown == 1, "a reason was asked after yes"
        chat.expect("> ")
    printed = re.findall(r"… sub__ask: [^\r\n]*", transcript.getvalue())
    assert len(printed) == 1, printed
    assert "progress notices)" in printed[0], printed


def test_a_refusal_of_a_served_sub_agents_approval_is_asked_its_reason(tmp_path: Path) -> None:
    main_agent_serving_the_bundled_one(tmp_path)
    with chat_in_a_terminal(tmp_path) as chat:
        ask_the_sub_agent_to_delete_a_note(chat)
        chat.sendline("n")
        chat.expect(r"Reason \(when refusing\) \(text\): ")
        chat.sendline("not today")
        chat.expect("not today")
        chat.expect("> ")


def test_the_json_lines_chat_asks_with_an_elicitation_event_and_reads_the_answer(tmp_path: Path) -> None:
    asking_agent(tmp_path, legacy=True)
    lines = [{"text": "asking__book"}, {"action": "accept", "content": {"date": "sunday"}}]
    result = subprocess.run([sys.executable, "-m", "runner", "agent.yaml", "--json"], cwd=tmp_path,
                            input="".join(json.dumps(line) + "\n" for line in lines),
                            capture_output=True, text=True, timeout=120)
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [question] = [e for e in events if e["type"] == "elicitation"]
    assert question["schema"]["required"] == ["date"]
    assert any(e["type"] == "tool_result" and e["text"] == "booked sunday for 2" for e in events)


def test_server_log_lines_on_the_terminal_name_the_server_and_start_at_its_terminal_level(
    tmp_path: Path,
) -> None:
    asking_agent(tmp_path, legacy=True, logging={"level": "debug", "terminal": "warning"})
    result = mcp_run("agent.yaml", "-p", "asking__levels", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    shown = [line for line in result.stderr.splitlines() if "message" in line]
    assert shown == ["[asking] warning: a warning message", "[asking] error: a error message"]
    log = (tmp_path / ".mcp-run" / "logs" / "asking.log").read_text()
    assert "debug [asking.levels]: a debug message" in log


@pytest.mark.parametrize("bad, field", [
    ({"action": "accept", "content": {"date": "sunday", "seats": "abc"}}, "seats"),
    ({"action": "accept"}, "date"),
])
def test_the_json_lines_chat_answers_bad_form_content_with_an_error_naming_the_field_and_asks_again(
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
    assert len([e for e in events if e["type"] == "elicitation"]) == 2
    assert any(e["type"] == "tool_result" and e["text"] == "booked sunday for 2" for e in events)
