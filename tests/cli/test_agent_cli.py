"""The agent as a person runs it: one-shot turns, JSON events, approvals, resumed threads and the
interactive chat in a pseudo-terminal, all on a copy of the bundled agent (offline model).

One-shot turns run in this process (``invoke``) unless the test is about the process: a thread
resumed by another process, signals, Ctrl-C, the terminal, the servers it leaves behind."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pexpect
import pytest
from builders import ROOT, chat_in_a_terminal, copy_bundled_agent, invoke, mcp_run, server, write_manifest


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    return copy_bundled_agent(tmp_path)


def test_a_one_shot_turn_calls_a_tool_and_prints_only_the_answer_on_stdout(agent_dir: Path) -> None:
    result = invoke("agent.yaml", "-p", 'notes__calculate {"expression": "6*7"}', cwd=agent_dir)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "notes__calculate returned: 42"
    assert "→ notes__calculate" in result.stderr and "thread" in result.stderr


def test_json_events_describe_the_whole_turn(agent_dir: Path) -> None:
    result = invoke("agent.yaml", "-p", 'notes__calculate {"expression": "1+1"}', "--json",
                    cwd=agent_dir)
    assert result.exit_code == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [event["type"] for event in events]
    # each model step reports its usage (the offline model counts its tokens) before its calls
    assert kinds[:3] == ["ready", "usage", "tool_call"] and "tool_result" in kinds and kinds[-1] == "final"
    assert kinds.count("usage") == 2
    assert events[kinds.index("tool_result")]["status"] == "success"


def test_a_json_one_shot_turn_starts_with_a_ready_event_whose_thread_a_script_continues(
        agent_dir: Path) -> None:
    first = invoke("agent.yaml", "-p", 'notes__add_note {"title": "milk"}', "--json", cwd=agent_dir)
    ready = json.loads(first.stdout.splitlines()[0])
    assert ready["type"] == "ready" and "notes__add_note" in ready["tools"], first.stdout
    again = invoke("agent.yaml", "-p", "notes__list_notes", "--json", "--thread", ready["thread"],
                   cwd=agent_dir)
    events = [json.loads(line) for line in again.stdout.splitlines()]
    assert again.exit_code == 0 and events[0]["type"] == "ready", again.stderr
    assert events[0]["thread"] == ready["thread"] and events[-1]["type"] == "final"


def test_the_tools_listing_and_the_ready_event_show_the_agents_and_handoffs_the_model_is_offered(
        tmp_path: Path) -> None:
    write_manifest(tmp_path, {}, name="front", model="offline",
                   agent={"agents": ["desk"], "handoffs": ["billing"]},
                   agents={"desk": {"description": "Sends requests on."},
                           "billing": {"description": "Refunds and charges.", "handoffs": ["main"]}})
    listed = invoke("tools", "agent.yaml", "--json", cwd=tmp_path)
    assert listed.exit_code == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert (rows["desk"]["kind"], rows["desk"]["description"]) == ("agent", "Sends requests on.")
    assert rows["desk"]["input_schema"]["required"] == ["task"]
    assert rows["handoff_to_billing"]["kind"] == "handoff"
    assert "billing: Refunds and charges." in rows["handoff_to_billing"]["description"]
    assert not {"handoff_to_desk", "billing"} & set(rows)  # main may not hand to desk nor call billing
    turn = invoke("agent.yaml", "-p", "hi", "--json", cwd=tmp_path)
    ready = json.loads(turn.stdout.splitlines()[0])
    # handoff_back: billing may hand the conversation to main, which may hand it back
    assert (ready["tools"], ready["agents"], ready["handoffs"]) == ([], ["desk"], ["handoff_to_billing",
                                                                                  "handoff_back"])
    assert set(rows) == {"desk", *ready["handoffs"]}
    # With tool search on they are offered from the start, as the model's list has them.
    write_manifest(tmp_path, {}, name="front", model="offline",
                   agent={"agents": ["desk"], "tool_search": "on"}, agents={"desk": {"description": "On."}})
    searched = invoke("tools", "agent.yaml", "--json", cwd=tmp_path)
    assert [(row["name"], row["offered"]) for row in json.loads(searched.stdout)] == [("desk", True)]


def test_a_json_one_shot_turn_reports_a_server_changing_its_tools_mid_turn(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"dyn": server("dynamic")}, model="offline")
    result = invoke("agent.yaml", "-p", 'dyn__add_tool {"name": "fresh"}', "--json", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    changes = [event for event in events if event["type"] == "change"]
    assert changes == [{"type": "change", "server": "dyn", "kind": "tools", "added": ["fresh"],
                        "removed": [], "changed": []}]
    assert events[-1]["type"] == "final"
    text = invoke("agent.yaml", "-p", 'dyn__add_tool {"name": "other"}', cwd=tmp_path)
    assert "dyn tools: +other" in text.stderr


def test_a_tool_needing_approval_is_denied_in_one_shot_mode_unless_yes(agent_dir: Path) -> None:
    add = invoke("agent.yaml", "-p", 'notes__add_note {"title": "milk"}', cwd=agent_dir)
    assert add.exit_code == 0, add.stderr
    delete = 'notes__delete_note {"title": "milk"}'
    denied = invoke("agent.yaml", "-p", delete, cwd=agent_dir)
    assert "denied notes__delete_note" in denied.stderr
    assert "failed" in denied.stdout
    allowed = invoke("agent.yaml", "-p", delete, "--yes", cwd=agent_dir)
    assert allowed.exit_code == 0 and "deleted note 'milk'" in allowed.stdout


def human_messages_saved(database: Path, thread: str) -> int:
    """How many user messages the SQLite checkpointer at ``database`` holds for ``thread``."""
    import anyio
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def count() -> int:
        async with AsyncSqliteSaver.from_conn_string(str(database)) as saver:
            state = await saver.aget({"configurable": {"thread_id": thread}})
            assert state is not None, f"no checkpoint of thread {thread}"
            return sum(1 for message in state["channel_values"]["messages"] if message.type == "human")

    return anyio.run(count)


def test_a_thread_resumes_from_sqlite_in_a_new_process(agent_dir: Path) -> None:
    # The first turn runs in this process; the second, in a new one, finds it only in the file.
    first = invoke("agent.yaml", "-p", 'notes__calculate {"expression": "2*3"}', "--thread", "t1",
                   cwd=agent_dir)
    assert first.exit_code == 0, first.stderr
    second = mcp_run("agent.yaml", "-p", "hello again", "--thread", "t1", "--json", cwd=agent_dir)
    assert second.returncode == 0, second.stderr
    assert human_messages_saved(agent_dir / ".mcp-run" / "state.sqlite", "t1") == 2


def test_the_readme_run_command_works_offline(agent_dir: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if "mcp-run agent.yaml" in line and "pip" in line)
    run_part = command.split("&&")[-1].strip().replace(".venv/bin/mcp-run", "")
    args = __import__("shlex").split(run_part)
    result = invoke(*args, cwd=agent_dir)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip()


def test_the_chat_runs_a_tool_call_asks_before_one_that_needs_approval_and_exits_in_a_terminal(
        agent_dir: Path) -> None:
    with chat_in_a_terminal(agent_dir) as chat:
        chat.sendline('notes__calculate {"expression": "3*4"}')
        chat.expect("returned: 12")
        chat.expect("> ")
        chat.sendline("/tools")
        chat.expect("notes__delete_note")
        chat.expect("> ")
        chat.sendline('notes__delete_note {"title": "ghost"}')
        chat.expect(r"approve\? \[y\]es / \[n\]o / \[e\]dit: ")
        chat.sendline("e")
        chat.expect("arguments as JSON: ")
        chat.send("\x15")  # Ctrl-U: the answer starts from the current arguments; replace them
        chat.sendline('{"title": "still a ghost"}')
        chat.expect("no note titled 'still a ghost'")
        chat.expect("> ")
    assert chat.exitstatus == 0


def sleepy_agent(folder: Path) -> None:
    write_manifest(folder, {"demo": server("demo")}, name="sleepy", model="offline", checkpointer="memory")


def child_pids(pid: int) -> list[int]:
    import psutil

    return [child.pid for child in psutil.Process(pid).children(recursive=True)]


def test_sigterm_during_a_tool_call_stops_the_run_and_every_server(tmp_path: Path) -> None:
    import psutil

    sleepy_agent(tmp_path)
    run = pexpect.spawn(sys.executable, ["-m", "runner", "agent.yaml", "-p", 'demo__sleep {"seconds": 60}'],
                        cwd=str(tmp_path), encoding="utf-8", timeout=60)
    try:
        run.expect("→ demo__sleep")
        servers = child_pids(run.pid)
        assert servers
        run.kill(__import__("signal").SIGTERM)
        run.expect(pexpect.EOF, timeout=20)
    finally:
        run.close(force=True)
    assert run.exitstatus == 128 + 15 or run.signalstatus == 15
    assert not [pid for pid in servers if psutil.pid_exists(pid) and
                psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def test_ctrl_c_interrupts_the_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    sleepy_agent(tmp_path)
    with chat_in_a_terminal(tmp_path) as chat:
        chat.sendline('demo__sleep {"seconds": 60}')
        chat.expect("→ demo__sleep")
        chat.sendcontrol("c")
        chat.expect("turn interrupted")
        chat.expect("> ")
        chat.sendline('demo__echo {"text": "after"}')
        chat.expect("returned: after")
        chat.expect("> ")
    assert chat.exitstatus == 0


def test_sigterm_during_call_stops_it_and_every_server(tmp_path: Path) -> None:
    import psutil

    sleepy_agent(tmp_path)
    run = pexpect.spawn(sys.executable,
                        ["-m", "runner", "call", "agent.yaml", "demo__sleep", '{"seconds": 60}'],
                        cwd=str(tmp_path), encoding="utf-8", timeout=60)
    try:
        deadline = __import__("time").monotonic() + 60
        while not (servers := child_pids(run.pid)):  # the server is running: the call is under way
            assert __import__("time").monotonic() < deadline, "the server never started"
            run.expect([pexpect.TIMEOUT, pexpect.EOF], timeout=0.1)
        run.kill(__import__("signal").SIGTERM)
        run.expect("stopped by SIGTERM", timeout=20)
        run.expect(pexpect.EOF, timeout=20)
    finally:
        run.close(force=True)
    assert run.exitstatus == 128 + 15
    assert not [pid for pid in servers if psutil.pid_exists(pid) and
                psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize(("call", "running", "task_statuses"), [
    ('demo__sleep {"seconds": 60}', "tool_call", []),
    ("tasks__forever", "task", ["cancelled"]),  # the stopped call's last word, before "interrupted"
], ids=["plain-call", "task"])
def test_ctrl_c_during_a_json_one_shot_tool_call_ends_with_an_interrupted_event_exit_130_and_no_server(
    tmp_path: Path, call: str, running: str, task_statuses: list[str]
) -> None:
    import psutil

    write_manifest(tmp_path, {"demo": server("demo"), "tasks": server("tasks")}, name="stopped",
                   model="offline", checkpointer="memory")
    with (tmp_path / "stderr.txt").open("w") as errors:
        run = subprocess.Popen([sys.executable, "-m", "runner", "agent.yaml", "-p", call, "--json"],
                               cwd=tmp_path, text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=errors)
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert run.stdout is not None
        for line in run.stdout:
            lines.put(line)
        lines.put(None)

    def next_event() -> dict[str, Any] | None:
        line = lines.get(timeout=60)
        return None if line is None else json.loads(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        while (event := next_event()) is not None and event["type"] != running:
            pass
        assert event is not None, (tmp_path / "stderr.txt").read_text()
        servers = child_pids(run.pid)
        assert len(servers) >= 2
        run.send_signal(signal.SIGINT)
        after = []
        while (event := next_event()) is not None:
            after.append(event)
        code = run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=60)
    assert after and after[-1] == {"type": "interrupted", "what": "turn"}, (
        tmp_path / "stderr.txt").read_text()
    assert "final" not in [event["type"] for event in after]
    # A status the task reported before it heard of the stop ("working") may come first.
    statuses = [event["status"] for event in after if event["type"] == "task"]
    assert [status for status in statuses if status != "working"] == task_statuses
    assert code == 130
    assert not [pid for pid in servers if psutil.pid_exists(pid) and
                psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
