"""``expect.agents`` of ``mcp-run test`` cases: the runs of the agents of ``agents:`` compared in
the four match modes, each difference said with both lists."""

from __future__ import annotations

import pytest

from runner.evals.cases import ExpectSpec
from runner.evals.matching import Observation, agent_differences, expectation_differences


@pytest.mark.parametrize(
    ("mode", "ran", "passes"),
    [
        ("strict", ["researcher", "writer"], True),
        ("strict", ["writer", "researcher"], False),
        ("strict", ["researcher"], False),
        ("strict", ["researcher", "writer", "writer"], False),
        ("unordered", ["writer", "researcher"], True),
        ("unordered", ["researcher"], False),
        ("unordered", ["researcher", "writer", "editor"], False),
        ("subset", ["writer"], True),
        ("subset", [], True),
        ("subset", ["writer", "writer"], False),
        ("subset", ["writer", "editor"], False),
        ("superset", ["editor", "writer", "researcher"], True),
        ("superset", ["writer"], False),
    ],
)
def test_each_match_mode_compares_the_agent_runs_its_own_way(mode, ran, passes) -> None:
    differences = agent_differences(["researcher", "writer"], ran, mode)
    assert (differences == []) is passes, differences


def test_a_strict_mismatch_names_the_first_differing_run_and_both_lists() -> None:
    assert agent_differences(["researcher", "writer"], ["writer", "researcher"], "strict") == [
        "agent run 1: expected researcher, ran writer "
        "(expected agents [researcher, writer], ran [writer, researcher])"]
    assert agent_differences(["researcher"], [], "strict") == [
        "expected 1 agent runs, got 0 (expected agents [researcher], ran [])"]


def test_missing_and_unexpected_runs_are_named() -> None:
    assert agent_differences(["researcher", "writer"], ["writer"], "superset") == [
        "agent researcher did not run (expected agents [researcher, writer], ran [writer])"]
    assert agent_differences(["writer"], ["writer", "writer"], "subset") == [
        "agent writer ran 2 times, expected 1 (expected agents [writer], ran [writer, writer])"]
    assert agent_differences(["writer"], ["editor"], "subset") == [
        "agent editor ran, not expected (expected agents [writer], ran [editor])"]


def test_agents_are_checked_in_exact_order_unless_the_case_says_otherwise() -> None:
    spec = ExpectSpec.model_validate({"agents": ["researcher", "writer"]})
    assert spec.agents_match == "strict"
    assert expectation_differences(spec, Observation(agents=["writer", "researcher"]))
    relaxed = ExpectSpec.model_validate({"agents": ["researcher", "writer"], "agents_match": "unordered"})
    assert expectation_differences(relaxed, Observation(agents=["writer", "researcher"])) == []
    assert expectation_differences(ExpectSpec(), Observation(agents=["writer"])) == []
