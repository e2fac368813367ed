"""The chat: its own commands, /call, Ctrl-C at an approval question, the prompt redrawn after a
reload, and the JSON-lines chat whose events are the ones the README documents."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import pexpect
import pytest
import yaml
from builders import (
    MCP_RUN,
    ROOT,
    JsonChat,
    chat_in_a_terminal,
    copy_bundled_agent,
    mcp_run,
    server,
    write_manifest,
)
from provider_server import Failure, ProviderServer

from runner.cli.chat import CHAT_COMMAND_HELP, CHAT_HANDLERS, LEAVE_COMMANDS
from runner.manifest import CHAT_COMMANDS


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    return copy_bundled_agent(tmp_path)


def test_every_chat_command_has_a_handler_and_a_help_line() -> None:
    assert set(CHAT_HANDLERS) | set(LEAVE_COMMANDS) == set(CHAT_COMMANDS)
    assert set(CHAT_COMMAND_HELP) == set(CHAT_COMMANDS)


def test_an_unknown_command_lists_the_real_commands_and_help_lists_every_one(agent_dir: Path) -> None:
    with chat_in_a_terminal(agent_dir) as session:
        session.sendline("/bogus")
        session.expect(r"unknown command '/bogus'; commands: ([^\r\n]*)\r\n")
        listed = session.match.group(1)
        assert all(f"/{name}" in listed for name in CHAT_COMMANDS) and "/summary" in listed
        session.expect("> ")
        session.sendline("/relaod")
        session.expect(r"did you mean '/reload'\?\)")
        session.expect("> ")
        session.sendline("/help")
        session.expect("Anything else is a message to the model.")
        shown = session.before
        session.expect("> ")
    for name in CHAT_COMMANDS:
        assert re.search(rf"^  /{name}\b", shown, re.MULTILINE), name
    assert "/summary [style=<style>]" in shown


def test_call_in_the_chat_calls_the_tool_directly_and_asks_first_when_it_needs_approval(
    agent_dir: Path,
) -> None:
    with chat_in_a_terminal(agent_dir) as session:
        session.sendline('/call notes__calculate {"expression": "6*7"}')
        session.expect("→ notes__calculate")
        session.expect("42")
        session.expect("> ")
        session.sendline('/call notes__delete_note {"id": "ghost"}')  # not asked: it would be refused
        session.expect("invalid arguments for notes__delete_note")
        session.expect("'title' is a required property")
        session.expect("> ")
        assert "approve?" not in session.before
        session.sendline('/call notes__delete_note {"title": "ghost"}')
        session.expect(r"approve\? \[y\]es / \[n\]o / \[e\]dit: ")
        session.sendline("n")
        session.expect("reason")
        session.sendline("not now")
        session.expect("denied: not now")
        session.expect("> ")


def test_save_writes_the_conversation_as_a_case_that_mcp_run_test_then_passes(agent_dir: Path) -> None:
    with chat_in_a_terminal(agent_dir) as session:
        session.sendline("/save sums")
        session.expect("no user message yet")  # a CaseSaveError is printed and the chat goes on
        session.expect("> ")
        session.sendline('notes__calculate {"expression": "6*7"}')
        session.expect("returned: 42")
        session.expect("> ")
        session.sendline("/save sums")
        session.expect("saved the case sums to ")
        session.expect("> ")
        session.sendline("/save sums")
        session.expect("already exists")
        session.expect("> ")
    saved = agent_dir / "evals" / "sums.yaml"
    case = saved.read_text()
    assert "notes__calculate" in case and "6*7" in case
    result = subprocess.run([str(MCP_RUN), "test", "agent.yaml", "evals/sums.yaml", "--json"], cwd=agent_dir,
                            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [(r["name"], r["status"]) for r in json.loads(result.stdout)["cases"]] == [("sums", "passed")]


def test_save_writes_a_secret_a_tool_returned_as_its_variable_and_the_case_still_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "CANARYsaved0123456789"
    monkeypatch.setenv("MCP_RUN_TEST_CANARY", canary)  # the chat and `mcp-run test` inherit it
    probe = server("probe", env={"PROBE_SECRET": "${MCP_RUN_TEST_CANARY}"})
    write_manifest(tmp_path, {"probe": probe}, model="offline", checkpointer="memory")
    chat = JsonChat(tmp_path)
    try:
        chat.wait_for("ready")
        chat.send({"text": 'probe__env {"name": "PROBE_SECRET"}'})
        assert chat.wait_for("final")["text"] == f"probe__env returned: {canary}"
        chat.send({"text": "/save leaky"})
        chat.wait_for("saved")
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=60)
    case = (tmp_path / "evals" / "leaky.yaml").read_text()
    assert canary not in case
    assert "contains: 'probe__env returned: ${MCP_RUN_TEST_CANARY}'" in case
    result = mcp_run("test", "agent.yaml", "evals/leaky.yaml", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [(r["name"], r["status"]) for r in json.loads(result.stdout)["cases"]] == [("leaky", "passed")]


def test_a_saved_case_answers_approvals_as_the_chat_did_and_passes_without_deleting_anything_more(
    agent_dir: Path,
) -> None:
    notes = agent_dir / ".mcp-run" / "notes.json"
    chat = JsonChat(agent_dir)
    try:
        chat.wait_for("ready")
        for title in ("milk", "eggs"):
            chat.send({"text": f'notes__add_note {{"title": "{title}", "text": "buy"}}'})
            chat.wait_for("final")
        chat.send({"text": 'notes__delete_note {"title": "milk"}'})
        chat.wait_for("approval")
        chat.process.send_signal(signal.SIGINT)  # Ctrl-C at the question: the call never runs
        chat.wait_for("interrupted")
        chat.send({"text": 'notes__delete_note {"title": "milk"}'})
        chat.wait_for("approval")
        chat.send({"action": "deny", "reason": "keep it"})
        assert "keep it" in chat.wait_for("final")["text"]
        chat.send({"text": 'notes__delete_note {"title": "milk"}'})
        chat.wait_for("approval")
        chat.send({"action": "edit", "args": {"title": "eggs"}})
        assert "deleted note 'eggs'" in chat.wait_for("final")["text"]
        chat.send({"text": "/save pantry"})
        chat.wait_for("saved")
        chat.send({"text": "/exit"})
        assert chat.process.wait(timeout=60) == 0
    finally:
        if chat.process.poll() is None:
            chat.process.terminate()
            chat.process.wait(timeout=60)
    case = yaml.safe_load((agent_dir / "evals" / "pantry.yaml").read_text())["cases"][0]
    assert case["approvals"] == [
        {"tool": "notes__delete_note", "action": "stop"},
        {"tool": "notes__delete_note", "action": "deny", "reason": "keep it"},
        {"tool": "notes__delete_note", "action": "edit", "args": {"title": "eggs"}},
    ]
    result = subprocess.run([str(MCP_RUN), "test", "agent.yaml", "evals/pantry.yaml", "--json"],
                            cwd=agent_dir, capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [(r["name"], r["status"]) for r in json.loads(result.stdout)["cases"]] == [("pantry", "passed")]
    assert [note["title"] for note in json.loads(notes.read_text())] == ["milk"]  # as after the chat


def test_ctrl_c_at_an_approval_question_ends_the_turn_and_the_next_line_is_not_lost(
    agent_dir: Path,
) -> None:
    with chat_in_a_terminal(agent_dir) as session:
        session.sendline('notes__delete_note {"title": "ghost"}')
        session.expect(r"approve\? \[y\]es / \[n\]o / \[e\]dit: ")
        session.sendcontrol("c")
        session.expect("turn interrupted")
        session.expect("> ")
        for number in (5, 6, 7):  # the abandoned question's reader must not take any of them
            session.sendline(f'notes__calculate {{"expression": "{number}*{number}"}}')
            session.expect(f"returned: {number * number}")
            session.expect("> ")
    assert session.exitstatus == 0


def test_ctrl_c_at_the_prompt_leaves_the_chat_with_130(agent_dir: Path) -> None:
    session = pexpect.spawn(str(MCP_RUN), ["agent.yaml"], cwd=str(agent_dir), encoding="utf-8", timeout=60)
    try:
        session.expect("> ")
        session.sendcontrol("c")
        session.expect(pexpect.EOF)
    finally:
        session.close(force=True)
    assert session.exitstatus == 130


def test_in_watch_mode_the_prompt_is_redrawn_after_a_reload_line(agent_dir: Path) -> None:
    with chat_in_a_terminal(agent_dir, "--watch") as session:
        manifest = agent_dir / "agent.yaml"
        manifest.write_text(manifest.read_text().replace("tone: concise", "tone: friendly"))
        session.expect("reloaded in")
        session.expect("> ")  # the prompt drawn again below the line
        session.sendline('notes__calculate {"expression": "2+2"}')
        session.expect("returned: 4")
        session.expect("> ")


# --------------------------------------------------------------------------- JSON lines


def documented_events() -> dict[str, set[str]]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Chat events", 1)[1].split("\n## ", 1)[0]
    events = {}
    for row in re.findall(r"^\| `(\w+)` \|([^|]*)\|", section, re.MULTILINE):
        events[row[0]] = set(re.findall(r"`(\w+)`", row[1])) | {"type"}
    return events


def test_the_json_lines_chat_emits_exactly_the_documented_events_and_fields(
        agent_dir: Path, provider_server: ProviderServer) -> None:
    notes = {"command": "python", "args": ["examples/notes_server.py"], "env": {"NOTES_FILE": "notes.json"},
             "tools": {"approve": ["delete_note"]}}
    write_manifest(agent_dir, {"notes": notes, "dyn": server("dynamic"), "demo": server("demo"),
                               "asking": server("asking", "--legacy"), "tasks": server("tasks"),
                               "answers": server("answers"),
                               # never starts: its calls are made again on its fallback (a tool_retry)
                               "mirrored": {"command": "mcp-run-no-such-command", "fallback": "demo",
                                            "tools": {"only": ["add"]}}},
                   name="events", model="offline", checkpointer="memory",
                   # the approval of "x" names this rule; the edited call runs with a policy event
                   policy=[{"tool": "notes__delete_note", "args": {"title": "x"}, "action": "ask",
                            "reason": "x marks a note"}])
    chat = JsonChat(agent_dir)
    try:
        assert "notes__calculate" in chat.wait_for("ready")["tools"]
        for command, kind in (("/help", "help"), ("/tools", "tools"), ("/prompts", "prompts"),
                              ("/agents", "agents"), ("/agent", "current_agent"), ("/thread", "thread"),
                              ("/reload", "reload"),
                              ("/bogus", "error")):
            chat.send({"text": command})
            chat.wait_for(kind)
        chat.send("not json")
        assert "JSON object" in chat.wait_for("error")["message"]
        chat.send({"text": 'notes__calculate {"expression": "6*7"}'})
        assert chat.wait_for("final")["text"] == "notes__calculate returned: 42"
        chat.send({"text": 'mirrored__add {"a": 2, "b": 3}'})
        assert chat.wait_for("tool_retry")["fallback"] == "demo"
        chat.wait_for("final")
        chat.send({"text": "/save sums"})
        assert chat.wait_for("saved")["path"].endswith("sums.yaml")
        chat.send({"text": 'notes__delete_note {"title": "x"}'})
        assert chat.wait_for("approval")["tool"] == "notes__delete_note"
        chat.send({"action": "deny", "reason": "no"})
        assert "denied" in chat.wait_for("final")["text"]
        chat.send({"action": "approve"})
        assert chat.wait_for("error")["message"].startswith("no approval is pending")
        chat.send({"text": 'notes__delete_note {"title": "x"}'})
        chat.wait_for("approval")
        chat.send({"action": "edit", "args": {"title": "y"}})
        edited = chat.wait_for("tool_call")
        assert edited["args"] == {"title": "y"} and edited["edited"] is True
        assert chat.wait_for("final")["reason"] == "stop"
        chat.send({"text": "asking__book"})
        assert chat.wait_for("elicitation")["mode"] == "form"
        chat.send({"action": "accept", "content": {"date": "today"}})
        assert "booked today for 2" in chat.wait_for("final")["text"]
        chat.send({"text": "asking__visit"})
        assert chat.wait_for("elicitation")["mode"] == "url"
        chat.send({"action": "decline"})
        chat.wait_for("final")
        chat.send({"text": "asking__visit"})
        chat.wait_for("elicitation")
        chat.send({"action": "accept"})
        assert chat.wait_for("elicitation_complete")["elicitation_id"] == "sign-in-1"
        chat.wait_for("final")
        for action in ("accept", "decline", "cancel"):  # asked with a new id at every call: once
            before = len(chat.seen)
            chat.send({"text": "asking__sign_in"})
            assert chat.wait_for("elicitation")["url"].startswith("https://mail.example/sign-in?session=")
            chat.send({"action": action})
            assert chat.wait_for("tool_result")["text"] == f"sign-in: {action}"
            chat.wait_for("final")
            assert [e["type"] for e in chat.seen[before:]].count("elicitation") == 1
        chat.send({"text": 'tasks__steps {"steps": 1, "interval_ms": 10}'})
        assert chat.wait_for("task")["server"] == "tasks"
        chat.wait_for("final")
        chat.send({"text": 'asking__summarize {"text": "a story"}'})
        assert chat.wait_for("sampling")["server"] == "asking"
        chat.send({"action": "deny"})
        chat.wait_for("final")
        chat.send({"text": 'asking__slow {"steps": 1, "interval": 0.01}'})
        assert chat.wait_for("progress")["total"] == 1
        chat.wait_for("final")
        chat.send({"text": "demo__image"})
        image = chat.wait_for("media")
        assert image["tool"] == "demo__image" and Path(image["path"]).read_bytes().startswith(b"\x89PNG")
        chat.send({"text": "/media"})
        assert chat.wait_for("media_list")["files"] == [image["path"]]
        chat.send({"text": '/call dyn__add_tool {"name": "fresh"}'})
        assert chat.wait_for("change")["added"] == ["fresh"]
        chat.send({"text": '/call answers__unlisted {"score": 3}'})  # answered, though not listed
        assert chat.wait_for("tool_call")["unlisted"] is True
        assert chat.wait_for("tool_result")["text"].startswith("score 3\n")
        manifest = agent_dir / "agent.yaml"
        good = manifest.read_text()
        manifest.write_text(good + "bogus_key: 1\n")
        chat.send({"text": "/reload"})
        assert "bogus_key" in chat.wait_for("reload_error")["problems"][0]
        manifest.write_text(good)
        chat.send({"text": 'demo__sleep {"seconds": 60}'})
        chat.wait_for("tool_call")
        chat.process.send_signal(signal.SIGINT)
        assert chat.wait_for("interrupted")["what"] == "turn"
        chat.send({"text": '/call demo__sleep {"seconds": 60}'})
        chat.wait_for("tool_call")
        chat.process.send_signal(signal.SIGINT)
        assert chat.wait_for("interrupted")["what"] == "/call"  # not a turn: the model was not asked
        chat.send({"text": "/usage"})
        assert chat.wait_for("usage_totals")["total"]["model_steps"] > 0
        manifest.write_text(good + "limits: {per_turn: {max_tool_calls: 0}}\n")
        chat.send({"text": "/reload"})
        chat.wait_for("reload")
        chat.send({"text": 'notes__calculate {"expression": "1+1"}'})
        assert chat.wait_for("limit")["limit"] == "max_tool_calls"
        assert chat.wait_for("final")["reason"] == "limit"
        chat.send({"text": "/exit"})
        assert chat.process.wait(timeout=60) == 0
    finally:
        if chat.process.poll() is None:  # SIGTERM stops the servers too
            chat.process.terminate()
            chat.process.wait(timeout=60)
    watch = subprocess.Popen([str(MCP_RUN), "watch", "agent.yaml", "--json"], cwd=agent_dir, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert watch.stdout is not None
        watching = json.loads(watch.stdout.readline())
        assert watching["type"] == "watching" and "notes__calculate" in watching["tools"]
    finally:
        watch.terminate()
        watch.wait(timeout=60)
    # A provider that fails: a retry, then the fallback (the offline model) answers.
    provider_server.script(Failure(429, retry_after="0.01"), Failure(500))
    retrying = write_manifest(agent_dir / "retrying", {}, name="retrying", checkpointer="memory",
                              model=provider_server.model(fallbacks=["offline"], retries={"max_attempts": 2}))
    failing = JsonChat(retrying.parent)
    try:
        failing.wait_for("ready")
        failing.send({"text": "hello"})
        failing.wait_for("model_fallback")
        failing.wait_for("final")
        failing.send({"text": "/exit"})
        assert failing.process.wait(timeout=60) == 0
    finally:
        if failing.process.poll() is None:
            failing.process.terminate()
            failing.process.wait(timeout=60)
    # A chat whose requests pass a small context limit: its context events, and /context.
    write_manifest(agent_dir / "limited", {"demo": server("demo")}, name="limited", model="offline",
                   checkpointer="memory", context={"max_tokens": 2000, "keep_last_turns": 1})
    limited = JsonChat(agent_dir / "limited")
    try:
        limited.wait_for("ready")
        for _ in range(3):
            limited.send({"text": 'demo__big_output {"chars": 3000}'})
            limited.wait_for("final")
        limited.send({"text": "/context"})
        limited.wait_for("context_window")
    finally:
        limited.process.terminate()
        limited.process.wait(timeout=60)
    documented = plain_agent(documented_events())
    emitted: dict[str, set[str]] = {}
    for event in [*chat.seen, watching, *failing.seen, *limited.seen]:
        emitted.setdefault(event["type"], set()).update(event)
    assert emitted == documented


def plain_agent(documented: dict[str, set[str]]) -> dict[str, set[str]]:
    """The events and fields of an agent without ``agents:`` and ``output:``: no ``agent`` or
    ``handoff`` event, no ``agent`` field naming one of its agents (tests/agent/test_team.py and
    tests/agent/test_handoffs.py check those), no answer object in ``final``
    (tests/cli/test_structured_output_cli.py checks it)."""
    plain = {kind: fields - {"agent"} if kind in NAMING_AN_AGENT else fields
             for kind, fields in documented.items() if kind not in ("agent", "handoff")}
    plain["final"] = plain["final"] - {"output"}
    plain["reload"] = plain["reload"] - {"agents"}  # agents an edit touched: test_agent_reload.py
    return plain


NAMING_AN_AGENT = ("token", "tool_call", "tool_result", "approval", "elicitation", "sampling", "progress",
                   "final")


def test_one_shot_json_events_are_documented_with_their_fields(agent_dir: Path) -> None:
    result = subprocess.run([str(MCP_RUN), "agent.yaml", "-p", 'notes__calculate {"expression": "1+1"}',
                             "--json"], capture_output=True, text=True, cwd=agent_dir, timeout=120)
    assert result.returncode == 0, result.stderr
    documented = documented_events()
    events = list(map(json.loads, result.stdout.splitlines()))
    for event in events:
        assert set(event) <= documented[event["type"]], event
    final = events[-1]
    assert final == {
        "type": "final", "text": final["text"], "reason": "stop", "ms": final["ms"], "trace_id": None
    }
    assert [e["text"] for e in events if e["type"] == "tool_result"] == ["2"]


def test_a_tool_error_is_reported_once_without_a_doubled_error_prefix(agent_dir: Path) -> None:
    result = subprocess.run([str(MCP_RUN), "agent.yaml", "-p", 'notes__calculate {"expression": "1/0"}',
                             "--json"], capture_output=True, text=True, cwd=agent_dir, timeout=120)
    assert result.returncode == 0, result.stderr
    error = next(e for e in map(json.loads, result.stdout.splitlines()) if e["type"] == "tool_result")
    assert error["status"] == "error" and error["text"].startswith("Error executing tool calculate: ")


def test_a_mistyped_thread_id_is_said_to_be_new_and_a_unique_prefix_resumes_its_thread(
    agent_dir: Path,
) -> None:
    with chat_in_a_terminal(agent_dir) as session:
        session.sendline('notes__calculate {"expression": "2*8"}')
        session.expect("returned: 16")
        session.expect("> ")
        session.sendline("/thread")
        session.expect(r"thread ([0-9a-f]{12})\r\n")
        first = session.match.group(1)
        session.expect("> ")
        session.sendline("/thread nosuch")
        session.expect(r"new thread nosuch \(no conversation had that id\)")
        session.expect("> ")
        session.sendline(f"/thread {first[:5]}")
        session.expect(f"resumed thread {first}")
        session.expect("> ")
    resumed = subprocess.run([str(MCP_RUN), "agent.yaml", "--thread", "doesnotexist", "-p", "hello"],
                             cwd=agent_dir, capture_output=True, text=True, timeout=60)
    assert "new thread doesnotexist (no conversation had that id)" in resumed.stderr


def test_resuming_a_thread_by_its_full_id_says_so_and_shows_its_last_messages(agent_dir: Path) -> None:
    first = mcp_run("agent.yaml", "-p", 'notes__calculate {"expression": "2*8"}', "--thread", "t1",
                    cwd=agent_dir)
    assert first.returncode == 0, first.stderr
    resumed = mcp_run("agent.yaml", "--thread", "t1", cwd=agent_dir)  # input at its end: leaves at once
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[:4] == [
        "resumed thread t1",
        '  you: notes__calculate {"expression": "2*8"}',
        "  agent → notes__calculate",
        "  agent: notes__calculate returned: 16",
    ]
    one_shot = mcp_run("agent.yaml", "--thread", "t1", "-p", "hello", cwd=agent_dir)
    assert "resumed thread t1" in one_shot.stderr
