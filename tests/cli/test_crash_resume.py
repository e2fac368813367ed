"""A process killed (``kill -9``) in the middle of a turn: the thread resumes at the step it had
reached. Scripted models, a real stdio server whose tool counts what ran (``steps.py``), SQLite
state, the CLI run as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

from builders import COMMAND_LIMIT, JsonChat, mcp_run
from crash_runs import call, done, killed_while_held, manifest, write_scripts
from provider_server import ProviderServer, Reply

from runner.agent.nodes import STOPPED_TEXT


def test_a_chain_killed_in_its_second_step_resumes_there_without_running_the_first_again(
    tmp_path: Path,
) -> None:
    manifest(tmp_path, {
        name: {"description": f"Step {name}.", "tools": ["steps"],
               "model": {"id": "scripted", "script": f"{name}.yaml"}} for name in ("a", "b", "c")
    } | {"pipeline": {"description": "a, b, then c.", "chain": ["a", "b", "c"]}},
        agent={"agents": ["pipeline"]})
    write_scripts(tmp_path, {
        "main": [call("pipeline", task="Owls"), "Main: done."],
        "a": [call("steps__work", step="1"), "A done."],
        "b": [call("steps__work", step="2", hold=True), "B done."],
        "c": [call("steps__work", step="3"), "C done."],
    })
    with killed_while_held(tmp_path, "2.held", "-p", "go", "--json", "--thread", "crash"):
        assert done(tmp_path) == ["1"]
    # The new process's models start their scripts again: each gets what is left of its own.
    write_scripts(tmp_path, {"main": ["Main: done."], "a": [], "b": ["B done."],
                             "c": [call("steps__work", step="3"), "C done."]})
    chat = JsonChat(tmp_path)
    try:
        chat.wait_for("ready")
        chat.send({"text": "/thread crash"})
        shown = chat.wait_for("thread")
        assert "cut off at step pipeline › 1-b › steps__work" in shown["note"]
        assert "/resume" in shown["note"]
        chat.send({"text": "/resume"})
        final = chat.wait_for("final")
        assert final["text"] == "Main: done."
        started = [(e["agent"], e["task"]) for e in chat.seen if e["type"] == "agent"]
        # a's step is not run again; b's run goes on at its tool call; c gets b's answer. Whether
        # pipeline's and b's starts are told again depends on whether LangGraph hands them its
        # resuming flag (then they are not news), so only what must and must not run is checked.
        assert "a" not in [agent for agent, _ in started]
        assert ("c", "B done.") in started
        results = {(e.get("agent"), e["name"]): e["text"] for e in chat.seen if e["type"] == "tool_result"}
        # Every call run again is told as it starts, before its result, at every depth.
        told = [(e["type"], e.get("agent"), e["id"]) for e in chat.seen
                if e["type"] in ("tool_call", "tool_result")]
        for index, (kind, agent, call_id) in enumerate(told):
            assert kind != "tool_result" or ("tool_call", agent, call_id) in told[:index], told
        assert results[("b", "steps__work")] == "done 2"
        assert results[(None, "pipeline")] == "C done."
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=COMMAND_LIMIT)
    assert done(tmp_path) == ["1", "2", "3"]  # each step's side effect once


def test_a_single_agent_turn_killed_mid_call_is_closed_by_the_next_message_as_providers_require(
    tmp_path: Path, provider_server: ProviderServer,
) -> None:
    provider_server.script(Reply(tool_calls=[("steps__work", {"step": "x", "hold": True})]),
                           Reply("Next answer."))
    manifest(tmp_path, model=provider_server.model())
    with killed_while_held(tmp_path, "x.held", "-p", "go", "--thread", "solo"):
        pass
    result = mcp_run("agent.yaml", "-p", "again", "--json", "--thread", "solo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "cut off at step steps__work" in result.stderr and "closed" in result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[-1]["type"] == "final" and events[-1]["text"] == "Next answer."
    assert done(tmp_path) == []  # the cut call is not run again
    # The next request carries a result for every call, as providers require: the cut call's
    # says it had started (the server may have acted), then comes the new message.
    sent = provider_server.completions()[-1].body["messages"]
    assert [m["role"] for m in sent[-4:]] == ["user", "assistant", "tool", "user"]
    assert sent[-3]["tool_calls"][0]["id"] == sent[-2]["tool_call_id"]
    assert sent[-2]["content"] == STOPPED_TEXT
    assert sent[-1]["content"] == "again"


def test_in_the_chat_a_new_message_closes_the_cut_off_turn_and_then_nothing_is_left_to_resume(
    tmp_path: Path, provider_server: ProviderServer,
) -> None:
    provider_server.script(Reply(tool_calls=[("steps__work", {"step": "y", "hold": True})]),
                           Reply("Next answer."))
    manifest(tmp_path, model=provider_server.model())
    with killed_while_held(tmp_path, "y.held", "-p", "go", "--thread", "talk"):
        pass
    chat = JsonChat(tmp_path)
    try:
        chat.wait_for("ready")
        chat.send({"text": "/thread talk"})
        assert "cut off at step steps__work" in chat.wait_for("thread")["note"]
        chat.send({"text": "again"})
        assert chat.wait_for("final")["text"] == "Next answer."
        chat.send({"text": "/resume"})
        assert chat.wait_for("error")["message"].startswith("nothing to resume")
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=COMMAND_LIMIT)
    sent = provider_server.completions()[-1].body["messages"]
    assert [m["role"] for m in sent[-3:]] == ["assistant", "tool", "user"]
    assert sent[-2]["content"] == STOPPED_TEXT
    assert done(tmp_path) == []
