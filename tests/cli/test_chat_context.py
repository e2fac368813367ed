"""``/context`` in the chat: how full the model's window is for the thread, and the ``context``
events of a turn whose request was made to fit (the JSON-lines chat, as programs read it); a
summary written by one ``-p`` process and reused by the next on the same SQLite thread."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from builders import JsonChat, mcp_run, server, write_manifest

BIG = 'demo__big_output {"chars": 3000}'


def test_context_shows_tokens_against_the_limit_and_what_the_request_leaves_out(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"demo": server("demo")}, model="offline", checkpointer="memory",
                   context={"max_tokens": 2000, "keep_last_turns": 1})
    chat = JsonChat(tmp_path)
    try:
        chat.wait_for("ready")
        chat.send({"text": "/context"})
        empty = chat.wait_for("context_window")
        assert (empty["limit"], empty["messages"], empty["sent"], empty["summary"]) == (2000, 0, 0, False)
        assert 0 < empty["tokens"] < 2000  # the system prompt and the tool definitions
        for _ in range(3):
            chat.send({"text": BIG})
            chat.wait_for("final")
        fitted = [event for event in chat.seen if event["type"] == "context"]
        assert fitted and fitted[-1]["action"] == "trim" and fitted[-1]["shortened"] >= 1
        chat.send({"text": "/context"})
        window = chat.wait_for("context_window")
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=60)
    assert window["limit"] == 2000 and window["tokens"] <= 2000
    assert window["messages"] == 12 and window["strategy"] == "trim"
    assert window["shortened"] >= 1 and window["summary"] is False
    assert window["thread"] == empty["thread"]


def test_a_summary_written_by_one_run_is_reused_by_the_next_process_on_the_thread(tmp_path: Path) -> None:
    write_manifest(tmp_path, {}, model={"id": "scripted", "script": "script.yaml"},
                   checkpointer="sqlite:///state.sqlite",
                   context={"max_tokens": 1200, "strategy": "summarize", "keep_last_turns": 1})

    def turn(text: str, script: list[str]) -> list[dict[str, object]]:
        (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))  # each process starts it again
        result = mcp_run("agent.yaml", "-p", text, "--thread", "long", "--json", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        return [json.loads(line) for line in result.stdout.splitlines()]

    assert not [e for e in turn("A" * 2400, ["first answer"]) if e["type"] == "context"]
    second = turn("B" * 2400, ["THE-SUMMARY", "second answer"])  # this step summarizes: 2 calls
    assert [e["text"] for e in second if e["type"] == "final"] == ["second answer"]
    assert [(e["action"], e["written"], e["summarized"]) for e in second if e["type"] == "context"] == [
        ("summarize", True, 2)]
    third = turn("and now?", ["third answer"])  # a second summary call would take this answer
    assert [e["text"] for e in third if e["type"] == "final"] == ["third answer"]
    assert [(e["action"], e["written"], e["summarized"]) for e in third if e["type"] == "context"] == [
        ("summarize", False, 2)]
