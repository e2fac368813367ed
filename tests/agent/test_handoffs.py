"""Handoffs (``handoffs:``): an agent hands the conversation to another, which answers this turn
and the next ones until it hands back or the user switches (``/agent``, ``--agent``). Run as a
user runs them (``-p --json``, the JSON chat, the chat in a terminal), with scripted models and
the bundled notes server.

Every scripted tool call has an id of its own: two scripted models in one thread would otherwise
both number their first call ``call_0_0``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml
from builders import ROOT, JsonChat, chat_in_a_terminal, invoke, mcp_run

NOTES = {"command": "python", "args": ["notes_server.py"], "env": {"NOTES_FILE": "notes.json"}}


def desk(folder: Path, main: list[Any], scripts: dict[str, list[Any]], *,
         checkpointer: str = "memory", **agents: dict[str, Any]) -> Path:
    """``folder/agent.yaml``: a front desk (the main agent, handing off to billing) and its
    agents, each playing its script (``folder/NAME.yaml``)."""
    shutil.copy(ROOT / "examples" / "notes_server.py", folder / "notes_server.py")
    write_scripts(folder, {"main": main, **scripts})
    declared = {"billing": {"description": "Refunds, invoices and charges.", "model": "offline",
                            "tools": ["notes"], "approve": ["notes__add_*"]},
                "support": {"description": "Errors and crashes.", "model": "offline"}, **agents}
    for name in scripts:
        declared[name] = {**declared[name], "model": {"id": "scripted", "script": f"{name}.yaml"}}
    document = {"version": 1, "name": "desk", "description": "The front desk.",
                "model": {"id": "scripted", "script": "main.yaml"}, "checkpointer": checkpointer,
                "servers": {"notes": NOTES}, "agent": {"handoffs": ["billing"]}, "agents": declared}
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def write_scripts(folder: Path, scripts: dict[str, list[Any]]) -> None:
    for name, script in scripts.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(script))


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args, "id": call_id}]}


def one_shot(folder: Path, text: str, *options: str) -> list[dict[str, Any]]:
    result = mcp_run("agent.yaml", "-p", text, "--json", *options, cwd=folder)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def test_a_handed_conversation_is_answered_by_the_agent_this_turn_and_after_a_restart(tmp_path: Path) -> None:
    # The main model has one turn: the handoff. Asked again, it would fail the run.
    desk(tmp_path, [call("handoff_to_billing", "m1", reason="a question about a charge")],
         {"billing": [call("notes__calculate", "b1", expression="2*21"), "Billing: refunded 42."]},
         checkpointer="sqlite:///state.sqlite")
    events = one_shot(tmp_path, "I was charged twice", "--thread", "t1")
    assert of_type(events, "handoff") == [
        {"type": "handoff", "from": "main", "to": "billing", "reason": "a question about a charge"}]
    assert [(e["name"], e.get("agent")) for e in of_type(events, "tool_result")] == [
        ("handoff_to_billing", None), ("notes__calculate", "billing")]
    final = events[-1]
    assert (final["type"], final["text"], final["agent"]) == ("final", "Billing: refunded 42.", "billing")

    # A new process on the same thread: billing answers at once (its script starts again; the
    # main model, asked, would have no turn left and fail the run).
    write_scripts(tmp_path, {"billing": ["Billing: anything else?"]})
    plain = mcp_run("agent.yaml", "-p", "Thanks", "--thread", "t1", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "Billing: anything else?\n"
    assert "handed the conversation" not in plain.stderr
    with chat_in_a_terminal(tmp_path, "--thread", "t1") as chat:  # the chat resumes with billing too
        # Already read, up to the first prompt: the line saying who answers, then that prompt.
        told = "talking to billing (/agent NAME switches: main, billing, support)"
        said, _, prompt = chat.before.partition(told)
        assert said and "billing" in prompt, chat.before


def test_the_chat_hands_off_asks_for_the_agents_approvals_hands_back_and_switches_with_agent(
    tmp_path: Path,
) -> None:
    desk(tmp_path, [call("handoff_to_billing", "m1"), "Main: back with you.", "Main: third."],
         {"billing": [call("notes__add_note", "b1", title="refund", text="Refund the charge."),
                      "Billing: refunded.",
                      call("handoff_back", "b2", reason="not a billing question"),
                      "Billing: switched to me."]})
    chat = JsonChat(tmp_path)
    try:
        chat.wait_for("ready")
        chat.send({"text": "/agent"})
        shown = chat.wait_for("current_agent")
        assert shown == {"type": "current_agent", "agent": "main", "choices": ["main", "billing", "support"]}

        chat.send({"text": "I was charged twice"})
        assert chat.wait_for("handoff") == {"type": "handoff", "from": "main", "to": "billing"}
        approval = chat.wait_for("approval")  # billing's own approve: asked as main's would be
        assert (approval["tool"], approval["agent"]) == ("notes__add_note", "billing")
        chat.send({"action": "approve"})
        final = chat.wait_for("final")
        assert (final["text"], final["agent"]) == ("Billing: refunded.", "billing")
        assert "refund" in (tmp_path / "notes.json").read_text()

        chat.send({"text": "/agents"})
        listed = {row["name"]: row.get("current") for row in chat.wait_for("agents")["agents"]}
        assert listed == {"main": None, "billing": True, "support": None}

        chat.send({"text": "Is it sunny?"})  # billing hands back: main answers this message
        assert chat.wait_for("handoff") == {"type": "handoff", "from": "billing", "to": "main",
                                            "reason": "not a billing question"}
        final = chat.wait_for("final")
        assert final["text"] == "Main: back with you." and "agent" not in final

        chat.send({"text": "/agent biling"})
        assert chat.wait_for("error")["message"] == (
            "unknown agent 'biling' (did you mean 'billing'?); the agents: main, billing, support")
        chat.send({"text": "/agent billing"})
        assert chat.wait_for("current_agent")["agent"] == "billing"
        chat.send({"text": "Hello"})
        final = chat.wait_for("final")
        assert (final["text"], final["agent"]) == ("Billing: switched to me.", "billing")
        chat.send({"text": "/agent main"})
        chat.wait_for("current_agent")
        chat.send({"text": "Hello again"})
        assert chat.wait_for("final")["text"] == "Main: third."
        assert len(of_type(chat.seen, "handoff")) == 2  # the switches are the user's, not handoffs
        chat.send({"text": "/exit"})
        assert chat.process.wait(timeout=60) == 0
    finally:
        if chat.process.poll() is None:
            chat.process.terminate()
            chat.process.wait(timeout=60)


def test_agent_on_the_command_line_sends_the_first_message_to_that_agent(tmp_path: Path) -> None:
    desk(tmp_path, ["Main: never asked."], {"support": ["Support: restart it."]},
         pipeline={"description": "Two steps.", "chain": ["billing", "support"]})
    events = one_shot(tmp_path, "It crashed", "--agent", "support")
    assert {e["agent"] for e in of_type(events, "usage")} == {"support"}
    assert (events[-1]["text"], events[-1]["agent"]) == ("Support: restart it.", "support")

    unknown = invoke(str(tmp_path / "agent.yaml"), "-p", "hi", "--agent", "suport")
    assert unknown.exit_code == 2
    assert "Invalid value for '--agent': unknown agent 'suport' (did you mean 'support'?)" in unknown.output
    workflow = invoke(str(tmp_path / "agent.yaml"), "--agent", "pipeline")
    assert workflow.exit_code == 2
    assert "'pipeline' is a chain workflow" in workflow.output


def test_validate_locates_handoffs_to_unknown_agents_workflows_and_the_agent_itself(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: 1\n"
        "name: desk\n"
        "agent:\n"
        "  handoffs: [biling, main]\n"
        "agents:\n"
        "  billing:\n"
        "    description: Refunds.\n"
        "    handoffs: [pipeline, billing, main]\n"
        "  pipeline: {chain: [billing]}\n")
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    assert result.output.splitlines()[:4] == [
        f"{path}:4:14: agent.handoffs[0]: unknown agent 'biling' (did you mean 'billing'?)",
        f"{path}:4:22: agent.handoffs[1]: an agent cannot hand the conversation to itself",
        f"{path}:8:16: agents.billing.handoffs[0]: 'pipeline' is a chain workflow: only an agent "
        "with a model answers a conversation handed to it",
        f"{path}:8:26: agents.billing.handoffs[1]: an agent cannot hand the conversation to itself",
    ]


def test_in_a_terminal_the_prompt_names_the_agent_answering_and_tab_completes_agent_names(
    tmp_path: Path,
) -> None:
    desk(tmp_path, [call("handoff_to_billing", "m1", reason="a charge"), "Main: hello."],
         {"billing": ["Billing: on it."]})
    with chat_in_a_terminal(tmp_path) as chat:
        chat.sendline("I was charged twice")
        chat.expect_exact("main handed the conversation to billing: a charge")
        chat.expect_exact("Billing: on it.")
        chat.expect_exact("billing> ")
        chat.send("/agent ma\t")
        chat.expect_exact("/agent main")
        chat.send("\r")
        chat.expect_exact("talking to main (/agent NAME switches: main, billing, support)")
        chat.sendline("Hi")
        chat.expect_exact("Main: hello.")
