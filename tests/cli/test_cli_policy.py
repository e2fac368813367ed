"""The manifest's ``policy`` where a person calls a tool: ``mcp-run call`` refuses a denied call
with the rule and its reason, refuses an ``ask`` call when no one can answer (naming the rule) and
runs it with ``--yes``; the chat's ``/call`` shows a denial as the call's error and puts an ``ask``
call to the user. ``validate`` locates a bad rule."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from builders import JsonChat, copy_bundled_agent, invoke, server, write_manifest
from test_readme_commands import commands_in, readme_sections

POLICY = [
    {"tool": "demo__echo", "args": {"text": "/etc/*"}, "action": "deny",
     "reason": "system files stay private"},
    {"tool": "demo__add", "args": {"a": {"regex": "^[0-9]{3,}$"}}, "action": "ask", "reason": "big sums"},
]


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    write_manifest(tmp_path, {"demo": server("demo")}, name="policed", model="offline", checkpointer="memory",
                   policy=POLICY)
    return tmp_path


def test_call_refuses_a_denied_call_with_the_rule_and_its_reason_even_with_yes(agent: Path) -> None:
    for extra in ((), ("--yes",)):
        denied = invoke("call", "agent.yaml", "demo__echo", '{"text": "/etc/passwd"}', *extra, cwd=agent)
        assert denied.exit_code == 1 and denied.stdout == ""
        assert "denied by the manifest's policy (policy[0]): system files stay private" in denied.stderr
    plain = invoke("call", "agent.yaml", "demo__echo", '{"text": "/home/me"}', cwd=agent)
    assert plain.exit_code == 0 and plain.stdout.strip() == "/home/me"


def test_call_refuses_an_ask_call_without_a_terminal_naming_the_rule_and_runs_it_with_yes(
        agent: Path) -> None:
    refused = invoke("call", "agent.yaml", "demo__add", '{"a": 500, "b": 1}', cwd=agent)
    assert refused.exit_code == 1
    assert ("denied demo__add: needs approval (policy[1]: big sums) and no one can answer here "
            "(pass --yes to allow)") in refused.stderr
    approved = invoke("call", "agent.yaml", "demo__add", '{"a": 500, "b": 1}', "--yes", cwd=agent)
    assert approved.exit_code == 0 and approved.stdout.strip() == "501"
    small = invoke("call", "agent.yaml", "demo__add", '{"a": 5, "b": 1}', cwd=agent)  # no rule matches
    assert small.exit_code == 0 and small.stdout.strip() == "6"


def test_a_one_shot_run_refuses_an_ask_call_naming_the_rule_to_the_user_and_to_the_model(
        agent: Path) -> None:
    refused = invoke("agent.yaml", "-p", 'demo__add {"a": 500, "b": 1}', cwd=agent)
    assert ("denied demo__add: needs approval (policy[1]: big sums) and no one can answer here "
            "(pass --yes to allow)") in refused.stderr
    events = invoke("agent.yaml", "-p", 'demo__add {"a": 500, "b": 1}', "--json", cwd=agent)
    [result] = [event for event in map(json.loads, events.stdout.splitlines())
                if event["type"] == "tool_result"]
    assert result["status"] == "error"
    assert result["text"].startswith("The call to demo__add was not approved: a one-shot run cannot ask, "
                                     "and it needs approval (policy[1]: big sums)")


def test_call_in_the_chat_tells_a_denial_as_a_policy_event_and_the_call_s_error_and_asks_about_an_ask_call(
        agent: Path) -> None:
    chat = JsonChat(agent)
    try:
        chat.wait_for("ready")
        chat.send({"text": '/call demo__echo {"text": "/etc/passwd"}'})
        decided = chat.wait_for("policy")  # told as for the model's calls
        told = (decided["tool"], decided["action"], decided["rule"], decided["source"], decided["reason"])
        assert told == ("demo__echo", "deny", 0, "policy[0]", "system files stay private")
        denied = chat.wait_for("tool_result")
        assert denied["status"] == "error" and "system files stay private" in denied["text"]
        chat.send({"text": '/call demo__add {"a": 500, "b": 1}'})
        asked = chat.wait_for("approval")
        assert asked["args"] == {"a": 500, "b": 1}
        assert asked["policy"] == {"rule": 1, "source": "policy[1]", "reason": "big sums"}
        chat.send({"action": "edit", "args": {"a": 600, "b": 1}})
        assert chat.wait_for("tool_result")["text"].startswith("601\n")
        chat.send({"text": '/call demo__echo {"text": "fine"}'})
        assert chat.wait_for("tool_result")["text"].startswith("fine\n")
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=60)


def test_validate_locates_a_bad_regex_an_unknown_field_and_an_unknown_action(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text(
        "version: 1\n"
        "name: policed\n"
        "policy:\n"
        "  - tool: 'demo__*'\n"
        "    args: {path: '/etc/**', options.mode: {regex: '(['}}\n"
        "    action: deny\n"
        "  - tool: demo__echo\n"
        "    action: maybe\n"
        "    reson: typo\n")
    result = invoke("validate", "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert any(line.startswith("agent.yaml:5:") and "policy[0].args.options.mode.regex: not a valid regular "
               "expression" in line for line in lines), result.stderr
    assert any(line.startswith("agent.yaml:8:")
               and "policy[1].action: must be 'allow', 'deny' or 'ask'" in line
               for line in lines), result.stderr
    assert any(line.startswith("agent.yaml:9:") and "policy[1].reson: unknown key 'reson'" in line
               for line in lines), result.stderr


def test_validate_reports_rules_matching_no_tool_with_the_invalid_rules_in_one_run(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text(
        "version: 1\n"
        "name: policed\n"
        "servers:\n"
        "  notes: {command: python3, args: [notes.py]}\n"
        "policy:\n"
        "  - tool: 'notes__*'\n"
        "    args: {path: {regex: '(['}}\n"
        "    action: maybe\n"
        "  - tool: 'notes__[add'\n"
        "    action: deny\n"
        "    reasn: typo\n"
        "  - tool: 'nots__*'\n"
        "    action: deny\n")
    result = invoke("validate", "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    for row, text in ((7, "policy[0].args.path.regex: not a valid regular expression"),
                      (8, "policy[0].action: must be 'allow', 'deny' or 'ask'"),
                      (11, "policy[1].reasn: unknown key 'reasn'"),
                      (9, "policy[1].tool: warning: 'notes__[add' is a malformed glob"),
                      (12, "policy[2].tool: warning: 'nots__*' matches no tool: no server is called 'nots' "
                           "(did you mean 'notes'?)")):
        assert any(line.startswith(f"agent.yaml:{row}:") and text in line for line in lines), result.stderr


def test_a_rule_matching_no_tool_is_warned_at_its_line_by_validate_and_once_the_servers_list_tools(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_manifest(tmp_path, {"demo": server("demo")}, name="policed", model="offline", checkpointer="memory",
                   policy=[{"tool": "dmeo__*", "action": "deny"}, {"tool": "demo__ech", "action": "ask"},
                           {"tool": "demo__echo", "action": "ask"}])
    lines = (tmp_path / "agent.yaml").read_text().splitlines()
    row = {name: next(n for n, line in enumerate(lines, 1) if f"tool: {name}" in line)
           for name in ("dmeo__*", "demo__ech")}
    validated = invoke("validate", "agent.yaml", cwd=tmp_path)
    assert validated.exit_code == 0
    assert (f"agent.yaml:{row['dmeo__*']}:9: policy[0].tool: warning: 'dmeo__*' matches no tool: "
            "no server is called 'dmeo' (did you mean 'demo'?)") in validated.stderr
    assert "demo__ech'" not in validated.stderr  # which tools demo offers is not known before it runs
    caplog.clear()
    listed = invoke("tools", "agent.yaml", cwd=tmp_path)  # its warnings are log records, to stderr
    assert listed.exit_code == 0
    assert (f"agent.yaml:{row['demo__ech']}:9: policy[1].tool: 'demo__ech' matches no tool the servers offer "
            "(did you mean 'demo__echo'?)") in caplog.messages
    assert "policy[2]" not in caplog.text and "policy[2]" not in listed.stderr


def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    section = readme_sections()["Policy"]
    rules, commands = re.findall(r"^```[a-z]*\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    agent = copy_bundled_agent(tmp_path)
    manifest = agent / "agent.yaml"
    manifest.write_text(manifest.read_text() + rules)
    shown = commands_in(f"```\n{commands}```\n")
    denied_in_turn, refused, allowed, asked = [shlex.split(command) for command in shown]
    turn = invoke(*denied_in_turn, cwd=agent)
    assert turn.exit_code == 0
    assert "denied by the manifest's policy (policy[0]): notes marked keep are never deleted" in turn.stdout
    call = invoke(*refused, cwd=agent)
    assert call.exit_code == 1 and "(policy[0]): notes marked keep are never deleted" in call.stderr
    events = [json.loads(line) for line in invoke(*allowed, cwd=agent).stdout.splitlines()]
    assert not [event for event in events if event["type"] == "approval"]
    [decided] = [event for event in events if event["type"] == "policy"]
    assert (decided["action"], decided["rule"]) == ("allow", 1)
    secret = invoke(*asked, cwd=agent)
    assert secret.exit_code == 1
    assert "needs approval (policy[2]: it looks like a secret) and no one can answer here" in secret.stderr
