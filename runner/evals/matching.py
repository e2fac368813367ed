"""Checks of a finished case: the tool trajectory against ``expect.tools`` in one of the four
match modes (those of LangChain's agentevals), the final answer, tool errors and call counts.

Each check returns the differences it found as sentences; the first one is what the report shows.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from runner.evals.cases import AnswerSpec, ExpectedCall, ExpectSpec, MatchMode, is_regex_matcher
from runner.events import UsageTotals

EXCERPT_CHARS = 200


@dataclass(frozen=True)
class ObservedCall:
    """A tool call the agent made, and how it ended."""

    name: str
    args: dict[str, Any]
    status: str = "success"  # or "error"
    result: str = ""


@dataclass
class Observation:
    """What a case's run did: its tool calls in order, its final answer, its model calls, the
    runs of the agents of ``agents:`` in order."""

    calls: list[ObservedCall] = field(default_factory=list)
    answer: str = ""
    steps: int = 0
    output: dict[str, Any] | None = None  # the answer object, with ``output:`` in the manifest
    usage: UsageTotals | None = None  # what the case's thread spent (None: not known)
    agents: list[str] = field(default_factory=list)  # each run of an agent of agents:, by its name


def call_matches(expected: ExpectedCall, call: ObservedCall) -> bool:
    """Same name, and every argument given in ``expected`` equal (or matching its regex)."""
    if expected.name != call.name:
        return False
    for key, wanted in expected.args.items():
        if key not in call.args:
            return False
        actual = call.args[key]
        if is_regex_matcher(wanted):
            text = actual if isinstance(actual, str) else json.dumps(actual, sort_keys=True)
            if re.search(wanted["matches"], text) is None:
                return False
        elif actual != wanted:
            return False
    return True


def _pairing(expected: Sequence[ExpectedCall], calls: Sequence[ObservedCall]) -> dict[int, int]:
    """A largest pairing of expected calls with distinct observed calls (augmenting paths)."""
    paired_call: dict[int, int] = {}  # observed index -> expected index

    def place(e: int, seen: set[int]) -> bool:
        for c, call in enumerate(calls):
            if c in seen or not call_matches(expected[e], call):
                continue
            seen.add(c)
            if c not in paired_call or place(paired_call[c], seen):
                paired_call[c] = e
                return True
        return False

    for e in range(len(expected)):
        place(e, set())
    return {e: c for c, e in paired_call.items()}


def describe_expected(call: ExpectedCall) -> str:
    if not call.args:
        return call.name
    shown = {k: (f"/{v['matches']}/" if is_regex_matcher(v) else v) for k, v in call.args.items()}
    return f"{call.name} {json.dumps(shown, sort_keys=True, default=str)}"


def describe_call(call: ObservedCall) -> str:
    return f"{call.name} {json.dumps(call.args, sort_keys=True, default=str)}"


def trajectory_differences(
    expected: Sequence[ExpectedCall], calls: Sequence[ObservedCall], mode: MatchMode
) -> list[str]:
    """Why ``calls`` do not match ``expected`` in ``mode`` (empty when they do)."""
    wanted = "[" + ", ".join(describe_expected(c) for c in expected) + "]"
    made = "[" + ", ".join(describe_call(c) for c in calls) + "]"
    if mode == "strict":
        for index, (want, call) in enumerate(zip(expected, calls, strict=False)):
            if not call_matches(want, call):
                return [f"tool call {index + 1}: expected {describe_expected(want)}, "
                        f"got {describe_call(call)} (expected {wanted}, got {made})"]
        if len(expected) != len(calls):
            return [f"expected {len(expected)} tool calls, got {len(calls)} "
                    f"(expected {wanted}, got {made})"]
        return []
    pairing = _pairing(expected, calls)
    unmet = [expected[e] for e in range(len(expected)) if e not in pairing]
    extra = [calls[c] for c in range(len(calls)) if c not in set(pairing.values())]
    differences = []
    if mode in ("unordered", "superset") and unmet:
        differences.append(f"expected tool call {describe_expected(unmet[0])} was not made "
                           f"(expected {wanted}, got {made})")
    if mode in ("unordered", "subset") and extra:
        differences.append(f"unexpected tool call {describe_call(extra[0])} "
                           f"(expected {wanted}, got {made})")
    return differences


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def answer_differences(spec: AnswerSpec, answer: str) -> list[str]:
    shown = f"(answer: {excerpt(answer)!r})"
    differences = []
    for text in spec.contains:
        if text not in answer:
            differences.append(f"the answer does not contain {text!r} {shown}")
    for text in spec.not_contains:
        if text in answer:
            differences.append(f"the answer contains {text!r} {shown}")
    if spec.matches is not None and re.search(spec.matches, answer) is None:
        differences.append(f"the answer does not match /{spec.matches}/ {shown}")
    if spec.json_schema is not None:
        try:
            document = json.loads(answer)
        except json.JSONDecodeError as exc:
            differences.append(f"the answer is not JSON ({exc.msg}) {shown}")
        else:
            validator = jsonschema.validators.validator_for(spec.json_schema)(spec.json_schema)
            error = jsonschema.exceptions.best_match(validator.iter_errors(document))
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path) or "the answer"
                differences.append(f"the answer's JSON fails its schema at {where}: {error.message} {shown}")
    return differences


def expectation_differences(expect: ExpectSpec, observed: Observation) -> list[str]:
    """Every difference between ``expect`` and what the run did, the most telling first."""
    differences: list[str] = []
    if expect.tools is not None:
        differences += trajectory_differences(expect.tools, observed.calls, expect.match)
    if expect.no_tool_errors:
        failed = [c for c in observed.calls if c.status == "error"]
        if failed:
            differences.append(f"tool call {describe_call(failed[0])} failed: {excerpt(failed[0].result)}")
    if expect.max_tool_calls is not None and len(observed.calls) > expect.max_tool_calls:
        differences.append(f"{len(observed.calls)} tool calls made; at most {expect.max_tool_calls} "
                           "expected")
    if expect.answer is not None:
        differences += answer_differences(expect.answer, observed.answer)
    if expect.output is not None:
        differences += output_differences(expect.output, observed.output)
    if expect.agents is not None:
        differences += agent_differences(expect.agents, observed.agents, expect.agents_match)
    failed = [c for c in observed.calls if c.status == "error"]
    if differences and failed and not expect.no_tool_errors:
        # A failed call (an agent whose model could not answer, a server's error) is likely why
        # the rest differs: said first, before "agent writer did not run".
        differences.insert(0, f"tool call {describe_call(failed[0])} failed: {excerpt(failed[0].result)}")
    return differences


def agent_differences(expected: Sequence[str], ran: Sequence[str], mode: MatchMode) -> list[str]:
    """Why the agent runs ``ran`` do not match ``expected`` in ``mode`` (empty when they do)."""
    shown = f"(expected agents [{', '.join(expected)}], ran [{', '.join(ran)}])"
    if mode == "strict":
        for index, (want, name) in enumerate(zip(expected, ran, strict=False)):
            if want != name:
                return [f"agent run {index + 1}: expected {want}, ran {name} {shown}"]
        if len(expected) != len(ran):
            return [f"expected {len(expected)} agent runs, got {len(ran)} {shown}"]
        return []
    wanted, made = Counter(expected), Counter(ran)
    differences = []
    if mode in ("unordered", "superset") and (unmet := list(wanted - made)):
        name = unmet[0]
        differences.append(f"agent {name} did not run {shown}" if name not in made else
                           f"agent {name} ran {made[name]} times, expected {wanted[name]} {shown}")
    if mode in ("unordered", "subset") and (extra := list(made - wanted)):
        name = extra[0]
        differences.append(f"agent {name} ran, not expected {shown}" if name not in wanted else
                           f"agent {name} ran {made[name]} times, expected {wanted[name]} {shown}")
    return differences


def output_differences(expected: dict[str, Any], output: dict[str, Any] | None) -> list[str]:
    """Each field of ``expected`` (a path like ``items.0.name``) that the answer object lacks or
    holds another value at (equal, or matching ``{matches: REGEX}``)."""
    if output is None:
        return ["the answer is no object (expect.output needs 'output:' in the manifest)"]
    shown = f"(output: {excerpt(json.dumps(output, sort_keys=True, default=str))})"
    differences = []
    for path, wanted in expected.items():
        found, value = _at_path(output, path)
        if not found:
            differences.append(f"the output has no {path} {shown}")
        elif is_regex_matcher(wanted):
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            if re.search(wanted["matches"], text) is None:
                differences.append(f"the output's {path} does not match /{wanted['matches']}/ {shown}")
        elif value != wanted or isinstance(value, bool) != isinstance(wanted, bool):
            differences.append(f"the output's {path} is {json.dumps(value, default=str)}, "
                               f"expected {json.dumps(wanted, default=str)} {shown}")
    return differences


def _at_path(value: Any, path: str) -> tuple[bool, Any]:
    """The value at a dotted path (list items by index), and whether there is one."""
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value
