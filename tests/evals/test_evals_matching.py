"""Trajectory match modes, argument matchers and answer checks of ``mcp-run test`` cases."""

from __future__ import annotations

import pytest

from runner.evals.cases import AnswerSpec, ExpectedCall, ExpectSpec
from runner.evals.matching import (
    Observation,
    ObservedCall,
    answer_differences,
    expectation_differences,
    trajectory_differences,
)

ADD = ObservedCall("notes__add_note", {"title": "milk", "text": "2 litres"})
LIST = ObservedCall("notes__list_notes", {})
CALC = ObservedCall("notes__calculate", {"expression": "6*7"})


def expected(*specs: str | dict) -> list[ExpectedCall]:
    return [ExpectedCall.model_validate({"name": s} if isinstance(s, str) else s) for s in specs]


@pytest.mark.parametrize(
    ("mode", "calls", "passes"),
    [
        ("strict", [ADD, LIST], True),
        ("strict", [LIST, ADD], False),
        ("strict", [ADD], False),
        ("strict", [ADD, LIST, CALC], False),
        ("unordered", [LIST, ADD], True),
        ("unordered", [ADD], False),
        ("unordered", [ADD, LIST, CALC], False),
        ("subset", [ADD], True),
        ("subset", [], True),
        ("subset", [ADD, CALC], False),
        ("superset", [CALC, LIST, ADD], True),
        ("superset", [ADD], False),
    ],
)
def test_each_match_mode_compares_the_trajectory_its_own_way(mode, calls, passes) -> None:
    differences = trajectory_differences(expected("notes__add_note", "notes__list_notes"), calls, mode)
    assert (differences == []) is passes, differences


def test_a_strict_mismatch_names_the_first_differing_call_and_both_trajectories() -> None:
    [difference] = trajectory_differences(expected("notes__add_note", "notes__list_notes"),
                                          [LIST, ADD], "strict")
    assert difference.startswith("tool call 1: expected notes__add_note, got notes__list_notes {}")
    assert "expected [notes__add_note, notes__list_notes]" in difference


def test_arguments_match_by_equal_values_for_the_keys_given() -> None:
    assert trajectory_differences(expected({"name": "notes__add_note", "args": {"title": "milk"}}),
                                  [ADD], "strict") == []
    [difference] = trajectory_differences(
        expected({"name": "notes__add_note", "args": {"title": "bread"}}), [ADD], "strict")
    assert 'expected notes__add_note {"title": "bread"}' in difference


def test_arguments_match_a_regex_given_as_matches() -> None:
    wanted = expected({"name": "notes__add_note", "args": {"text": {"matches": r"^\d litres$"}}})
    assert trajectory_differences(wanted, [ADD], "strict") == []
    wrong = expected({"name": "notes__add_note", "args": {"text": {"matches": "^gallons"}}})
    assert trajectory_differences(wrong, [ADD], "strict") != []


def test_unordered_pairs_matchers_with_distinct_calls() -> None:
    # The first matcher accepts both calls; a greedy pairing would starve the second one.
    wanted = expected({"name": "notes__add_note"},
                      {"name": "notes__add_note", "args": {"title": "milk"}})
    other = ObservedCall("notes__add_note", {"title": "eggs"})
    assert trajectory_differences(wanted, [ADD, other], "unordered") == []


@pytest.mark.parametrize(
    ("spec", "answer", "fragment"),
    [
        ({"contains": "42"}, "the answer is 41", "does not contain '42'"),
        ({"not_contains": ["sorry"]}, "sorry, no", "contains 'sorry'"),
        ({"matches": r"\b4\d\b"}, "forty-two", "does not match"),
        ({"json_schema": {"type": "object", "required": ["total"]}}, "not json", "is not JSON"),
        ({"json_schema": {"type": "object", "required": ["total"]}}, '{"sum": 1}', "fails its schema"),
    ],
)
def test_each_answer_check_reports_what_it_missed(spec, answer, fragment) -> None:
    [difference] = answer_differences(AnswerSpec.model_validate(spec), answer)
    assert fragment in difference
    assert answer[:10] in difference  # the answer excerpt is shown


@pytest.mark.parametrize(
    ("spec", "answer"),
    [
        ({"contains": ["42", "six"]}, "six times seven is 42"),
        ({"not_contains": "sorry"}, "42"),
        ({"matches": r"\b4\d\b"}, "it is 42."),
        ({"json_schema": {"type": "object", "required": ["total"]}}, '{"total": 42}'),
    ],
)
def test_answer_checks_pass_a_matching_answer(spec, answer) -> None:
    assert answer_differences(AnswerSpec.model_validate(spec), answer) == []


def test_no_tool_errors_and_max_tool_calls_are_checked() -> None:
    failed = ObservedCall("notes__delete_note", {"title": "x"}, "error", "no note titled 'x'")
    observed = Observation(calls=[ADD, failed], answer="done")
    expect = ExpectSpec(no_tool_errors=True, max_tool_calls=1)
    first, second = expectation_differences(expect, observed)
    assert "notes__delete_note" in first and "no note titled" in first
    assert second == "2 tool calls made; at most 1 expected"
    assert expectation_differences(ExpectSpec(no_tool_errors=True, max_tool_calls=2),
                                   Observation(calls=[ADD, LIST])) == []


def test_a_failed_call_is_said_first_when_an_expected_agent_did_not_run() -> None:
    failed = ObservedCall("pipeline", {"task": "go"}, "error",
                          "ModelError: the scripted model has no turn left")
    observed = Observation(calls=[failed], answer="Sorry.", agents=["pipeline", "researcher"])
    expect = ExpectSpec(agents=["pipeline", "researcher", "writer"], agents_match="unordered")
    first, second = expectation_differences(expect, observed)
    assert first.startswith("tool call pipeline") and "no turn left" in first
    assert second.startswith("agent writer did not run")
    assert expectation_differences(ExpectSpec(agents=["pipeline", "researcher"]), observed) == []
