"""``/context`` in the chat: how full the model's window is for the thread, and the ``context``
events of a turn whose request was made to fit (the JSON-lines chat, as programs read it)."""

from __future__ import annotations

from pathlib import Path

from builders import JsonChat, server, write_manifest

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
