"""The manifest's ``policy:`` applied to a tool call: which rule decides it, and what it says.

:class:`Policy` holds the rules in the order they apply: the manifest's ``policy`` rules first,
then each server's ``tools.approve`` entries, translated into ``ask`` rules over that server's
original tool names (so an explicit rule placed in ``policy`` can allow or deny what an approve
entry would ask about). :meth:`Policy.decide` gives the first rule matching a call's name and
arguments, as a :class:`PolicyDecision`, or None when none matches: the call runs, as it did before
policies existed.

A rule's ``tool`` is a glob over the generated name (``server__tool``; a local tool's own name);
each of its ``args`` paths (``options.mode`` walks into nested objects) must match the value there:
a glob over its text (a string as it is, anything else as its JSON text) or a regular expression
searched in it. A path that leads into a list matches when one of its items matches; a path the
arguments lack never matches. The arguments are those that will be sent (defaults filled in,
after an approval's edit), so what was checked is what runs.

The decision is taken here, in the tools layer, and applied wherever a tool runs: the
:class:`runner.tools.caller.ToolCaller` refuses a denied call whoever makes it (the model, ``/call``,
``mcp-run call``, a served agent), and those who can ask a person (the graph's approval node, the
chat, ``mcp-run call`` on a terminal) ask about an ``ask`` decision before calling.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from runner.events import PolicyDecided, PolicyReference
from runner.manifest import Manifest, did_you_mean
from runner.manifest.policy import ArgumentMatchSpec, PolicyAction
from runner.tools.filters import glob_defect


@dataclass(frozen=True)
class PolicyDecision:
    """What the first matching rule says of a call: ``rule`` is its index in ``policy`` (None
    for one translated from a server's ``tools.approve``), ``source`` where it is written."""

    action: PolicyAction
    rule: int | None
    source: str
    reason: str | None

    def denial(self, tool: str) -> str:
        """The tool error the caller (the model, a person) gets for a denied call."""
        because = f": {self.reason}" if self.reason else ""
        return f"The call to {tool} was denied by the manifest's policy ({self.source}){because}"

    def unanswered(self) -> str:
        """Why an ``ask`` call is refused where no one can be asked."""
        because = f": {self.reason}" if self.reason else ""
        return f"needs approval ({self.source}{because}) and no one can answer here"

    def reference(self) -> PolicyReference:
        """The rule, for an approval question (a rule of ``policy``: ``rule`` is set)."""
        assert self.rule is not None
        return PolicyReference(rule=self.rule, source=self.source, reason=self.reason)

    def event(self, tool: str, call_id: str | None = None) -> PolicyDecided:
        event = PolicyDecided(type="policy", tool=tool, action=self.action, rule=self.rule,
                              source=self.source, reason=self.reason)
        if call_id is not None:
            event["id"] = call_id
        return event


@dataclass(frozen=True)
class _Matcher:
    path: tuple[str, ...]
    glob: str | None
    regex: re.Pattern[str] | None

    def matches(self, arguments: Mapping[str, Any]) -> bool:
        return any(self._value_matches(value) for value in _values_at(arguments, self.path))

    def _value_matches(self, value: Any) -> bool:
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        if self.regex is not None:
            return self.regex.search(text) is not None
        assert self.glob is not None
        return fnmatchcase(text, self.glob)


@dataclass(frozen=True)
class Rule:
    """One rule as it applies: ``tool`` a glob over the generated name, or, for a rule translated
    from ``tools.approve``, over the original name of a tool of ``server``."""

    tool: str
    action: PolicyAction
    source: str
    reason: str | None = None
    index: int | None = None
    server: str | None = None  # set: ``tool`` matches the original name of this server's tools
    arguments: tuple[_Matcher, ...] = ()

    def names(self, name: str, origin: tuple[str | None, str]) -> bool:
        """Whether the rule's tool glob matches a tool called ``name`` coming from ``origin``."""
        if self.server is not None:
            return origin[0] == self.server and (origin[1] == self.tool or fnmatchcase(origin[1], self.tool))
        return name == self.tool or fnmatchcase(name, self.tool)

    def decision(self) -> PolicyDecision:
        return PolicyDecision(self.action, self.index, self.source, self.reason)


class Policy:
    """The manifest's rules, in the order they apply (see the module's docstring)."""

    def __init__(self, manifest: Manifest) -> None:
        rules = [
            Rule(spec.tool, spec.action, f"policy[{index}]", spec.reason, index,
                 arguments=tuple(_matcher(path, match) for path, match in spec.args.items()))
            for index, spec in enumerate(manifest.policy)
        ]
        rules += [
            Rule(entry, "ask", f"servers.{key}.tools.approve[{index}]", server=key)
            for key, spec in manifest.servers.items()
            for index, entry in enumerate(spec.tools.approve)
        ]
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.declared = len(manifest.policy)  # the first rules: those of ``policy``

    def decide(self, name: str, origin: tuple[str | None, str], arguments: Mapping[str, Any]
               ) -> PolicyDecision | None:
        """The first rule matching tool ``name`` (from ``origin``: server key or None, original
        name) called with ``arguments``; None when no rule matches."""
        for rule in self.rules:
            if rule.names(name, origin) and all(m.matches(arguments) for m in rule.arguments):
                return rule.decision()
        return None

    def may_ask(self, name: str, origin: tuple[str | None, str]) -> bool:
        """Whether some arguments could make a call of this tool ``ask`` (a listing's mark)."""
        for rule in self.rules:
            if rule.names(name, origin):
                if rule.action == "ask":
                    return True
                if not rule.arguments:  # every call of the tool stops here
                    return False
        return False

    def unmatched(self, names: Sequence[str]) -> list[int]:
        """Indexes of ``policy`` rules whose tool glob matches none of ``names`` (every tool the
        servers offer now, local tools included)."""
        return [rule.index for rule in self.rules[: self.declared]
                if rule.index is not None and not any(rule.names(name, (None, name)) for name in names)]


def rule_warnings(manifest: Manifest) -> list[tuple[tuple[str | int, ...], str]]:
    """``policy`` rules that can match no tool whatever the servers offer, known without starting
    them: a blank or malformed glob, or one whose fixed start names a server the manifest lacks
    (``fss__*`` without a server ``fss``). Each with its path; the rest is checked once the
    servers list their tools (:meth:`Policy.unmatched`)."""
    return tool_glob_findings([(index, rule.tool) for index, rule in enumerate(manifest.policy)],
                              manifest.servers, manifest.agent.tool_separator, bool(manifest.local_tools))


def tool_glob_findings(
    globs: Sequence[tuple[int, str]], servers: Collection[str], separator: str, local_tools: bool
) -> list[tuple[tuple[str | int, ...], str]]:
    """:func:`rule_warnings` over the ``tool`` globs of the rules (by index), the manifest's
    server names, its tool separator and whether it has local tools: also what ``validate``
    reports of a manifest that failed validation elsewhere (read from its document)."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    for index, tool in globs:
        where = ("policy", index, "tool")
        if (defect := glob_defect(tool)) is not None:
            found.append((where, f"'{tool}' {defect}"))
            continue
        fixed = re.split(r"[*?\[]", tool, maxsplit=1)[0]
        key, separated, _ = fixed.partition(separator)
        if separated and key not in servers and not local_tools:
            found.append((where, f"'{tool}' matches no tool: no server is called '{key}'"
                                 f"{did_you_mean(key, servers)}"))
    return found


def _matcher(path: str, match: ArgumentMatchSpec) -> _Matcher:
    regex = re.compile(match.regex) if match.regex is not None else None
    return _Matcher(tuple(path.split(".")), match.glob, regex)


def _values_at(value: Any, path: Sequence[str]) -> Iterator[Any]:
    """The values at ``path`` in ``value``; a list on the way yields what is at the rest of the
    path in each of its items (an argument that is a list: each item)."""
    if isinstance(value, list):
        for item in value:
            yield from _values_at(item, path)
        return
    if not path:
        yield value
        return
    if isinstance(value, Mapping) and path[0] in value:
        yield from _values_at(value[path[0]], path[1:])

