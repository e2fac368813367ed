"""The policy's matching, without servers: a rule's tool glob over generated names, its argument
paths (nested, through lists, missing), globs over text and over the JSON text of other values,
regular expressions searched, the first matching rule deciding, ``tools.approve`` as ``ask`` rules
after the declared ones, and the rules that can match no tool."""

from __future__ import annotations

from typing import Any

import pytest

from runner.manifest import Manifest
from runner.tools.policy import Policy, PolicyDecision, rule_warnings


def manifest(policy: list[dict[str, Any]], **servers: Any) -> Manifest:
    servers = servers or {"fs": {"command": "x"}}
    return Manifest.model_validate({"version": 1, "name": "p", "servers": servers, "policy": policy})


def decide(policy: list[dict[str, Any]], name: str, arguments: dict[str, Any],
           origin: tuple[str | None, str] | None = None) -> PolicyDecision | None:
    server, _, tool = name.partition("__")
    return Policy(manifest(policy)).decide(name, origin or (server, tool), arguments)


@pytest.mark.parametrize(("match", "arguments", "matched"), [
    ("/etc/**", {"path": "/etc/ssh/sshd_config"}, True),
    ("/etc/**", {"path": "/home/etc/x"}, False),
    ("/etc/*", {"options": {"mode": "/etc/x"}}, False),  # the rule's path is 'path', not nested
    ("/etc/*", {}, False),  # an argument the call lacks never matches
    ("/etc/*", {"path": ["/tmp/a", "/etc/passwd"]}, True),  # a list: one of its items
    ({"regex": "passw(or)?d"}, {"path": "/etc/passwd"}, True),  # searched, not anchored
    ({"regex": "^passwd$"}, {"path": "/etc/passwd"}, False),
])
def test_an_argument_is_matched_by_a_glob_or_a_searched_regex(match: Any, arguments: dict[str, Any],
                                                               matched: bool) -> None:
    rule = {"tool": "fs__*", "args": {"path": match}, "action": "deny"}
    assert (decide([rule], "fs__read", arguments) is not None) is matched


def test_a_nested_path_walks_objects_and_lists_and_other_values_match_as_json_text() -> None:
    rule = {"tool": "fs__write", "args": {"options.mode": 777, "options.recursive": True}, "action": "ask"}
    hit = {"options": {"mode": 777, "recursive": True}}
    assert decide([rule], "fs__write", hit) == PolicyDecision("ask", 0, "policy[0]", None)
    assert decide([rule], "fs__write", {"options": {"mode": 644, "recursive": True}}) is None
    listed = {"options": [{"mode": 1}, {"mode": 777, "recursive": True}]}
    assert decide([rule], "fs__write", listed) is not None
    assert decide([rule], "fs__write", {"options": "777"}) is None


def test_the_first_matching_rule_decides_and_a_call_no_rule_matches_is_left_alone() -> None:
    rules = [{"tool": "fs__read", "args": {"path": "/etc/*"}, "action": "deny", "reason": "private"},
             {"tool": "fs__*", "action": "allow"}, {"tool": "*", "action": "ask"}]
    assert decide(rules, "fs__read", {"path": "/etc/x"}) == PolicyDecision("deny", 0, "policy[0]", "private")
    assert decide(rules, "fs__read", {"path": "/tmp/x"}) == PolicyDecision("allow", 1, "policy[1]", None)
    assert decide(rules, "web__fetch", {}, ("web", "fetch")) == PolicyDecision("ask", 2, "policy[2]", None)
    assert decide(rules[:2], "web__fetch", {}, ("web", "fetch")) is None


def test_tools_approve_entries_are_ask_rules_after_the_declared_ones() -> None:
    servers = {"fs": {"command": "x", "tools": {"approve": ["write*"]}}}
    allowed = {"tool": "fs__write", "args": {"path": "/tmp/*"}, "action": "allow"}
    policy = Policy(manifest([allowed], **servers))
    assert policy.decide("fs__write", ("fs", "write"), {"path": "/tmp/a"}) == \
        PolicyDecision("allow", 0, "policy[0]", None)
    assert policy.decide("fs__write", ("fs", "write"), {"path": "/srv/a"}) == \
        PolicyDecision("ask", None, "servers.fs.tools.approve[0]", None)
    # an approve entry names the server's original tool, whatever the generated name became
    assert policy.decide("fs__renamed", ("fs", "write_all"), {}) is not None
    assert policy.may_ask("fs__write", ("fs", "write")) and not policy.may_ask("fs__read", ("fs", "read"))


def test_a_denial_and_an_unanswerable_ask_name_the_rule_and_its_reason() -> None:
    decision = PolicyDecision("deny", 2, "policy[2]", "no system files")
    assert decision.denial("fs__read") == \
        "The call to fs__read was denied by the manifest's policy (policy[2]): no system files"
    assert decision.unanswered() == "needs approval (policy[2]: no system files) and no one can answer here"
    assert decision.event("fs__read", "call_1") == {
        "type": "policy", "tool": "fs__read", "action": "deny", "rule": 2, "source": "policy[2]",
        "reason": "no system files", "id": "call_1"}


def test_rules_that_can_match_no_tool_are_found_before_and_after_the_servers_list_theirs() -> None:
    rules = [{"tool": "fss__*", "action": "deny"}, {"tool": "fs__[x", "action": "deny"},
             {"tool": "fs__read", "action": "deny"}, {"tool": "*", "action": "ask"}]
    found = rule_warnings(manifest(rules))
    assert found == [(("policy", 0, "tool"), "'fss__*' matches no tool: no server is called 'fss' "
                                             "(did you mean 'fs'?)"),
                     (("policy", 1, "tool"), "'fs__[x' is a malformed glob: its '[' is never closed, so it "
                                             "matches only a tool whose name has a literal '['")]
    assert Policy(manifest(rules)).unmatched(["fs__write", "fs__list"]) == [0, 1, 2]
