"""``mcp-run test`` over a manifest of several agents: a case expects which agents ran and in what
order (``expect.agents``), a mismatch is reported with both lists, and a name ``agents:`` does not
declare is a located error. Scripted models, the bundled notes server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_teams import call, write_team
from builders import invoke
from evals_support import write_cases

PIPELINE = {
    "researcher": {"description": "Does arithmetic.", "tools": ["notes"]},
    "writer": {"description": "Writes."},
    "pipeline": {"description": "Research, then write.", "chain": ["researcher", "writer"]},
}


def two_runs_of_the_pipeline(folder: Path) -> Path:
    """The main agent calls the pipeline once in each of two cases (run one after the other)."""
    return write_team(
        folder, [call("pipeline", task="6*7"), "Done.", call("pipeline", task="6*7"), "Done."], PIPELINE,
        scripts={"researcher": [call("notes__calculate", expression="6*7"), "42"] * 2,
                 "writer": ["It is 42."] * 2},
        agent={"agents": ["pipeline"]})


CASES = """\
cases:
  - name: in-order
    input: go
    expect: {agents: [pipeline, researcher, writer]}
  - name: wrong-order
    input: go
    expect: {agents: [pipeline, writer, researcher]}
"""

TYPO_CASE = "cases:\n  - name: typo\n    input: go\n    expect: {agents: [pipeline, reseacher]}\n"


def test_a_case_expecting_the_agents_in_the_order_they_ran_passes_and_another_order_fails(
    tmp_path: Path,
) -> None:
    manifest = two_runs_of_the_pipeline(tmp_path)
    write_cases(tmp_path, CASES)
    done = invoke("test", str(manifest), "-j", "1", cwd=tmp_path)
    assert done.exit_code == 1, done.stdout + done.stderr
    assert "2 cases: 1 passed, 1 failed" in done.stdout
    assert ("wrong-order (failed): agent run 2: expected writer, ran researcher (expected agents "
            "[pipeline, writer, researcher], ran [pipeline, researcher, writer])") in done.stdout
    assert "  agents: pipeline, researcher, writer" in done.stdout


def test_the_json_report_lists_the_agent_runs_of_each_case(tmp_path: Path) -> None:
    manifest = two_runs_of_the_pipeline(tmp_path)
    write_cases(tmp_path, CASES)
    done = invoke("test", str(manifest), "-j", "1", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert [case["agents"] for case in report["cases"]] == [["pipeline", "researcher", "writer"]] * 2
    assert [case["status"] for case in report["cases"]] == ["passed", "failed"]


def test_an_expected_agent_the_manifest_does_not_declare_is_a_located_error(tmp_path: Path) -> None:
    manifest = two_runs_of_the_pipeline(tmp_path)
    write_cases(tmp_path, TYPO_CASE)
    done = invoke("test", str(manifest), cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.exit_code == 1  # the case errs, as one naming a tool the agent lacks
    assert "cases.yaml:4:33: cases[0].expect.agents[1]: " in said
    assert "the manifest's agents: has no 'reseacher' (did you mean 'researcher'?)" in said


def test_validate_locates_an_expected_agent_the_manifest_does_not_declare(tmp_path: Path) -> None:
    manifest = two_runs_of_the_pipeline(tmp_path)
    write_cases(tmp_path, TYPO_CASE)
    done = invoke("validate", str(manifest), cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.exit_code == 2, said
    assert "cases.yaml:4:33: cases[0].expect.agents[1]: the manifest's agents: has no 'reseacher' " \
           "(did you mean 'researcher'?)" in said


def test_each_tool_call_of_several_scripted_agents_keeps_its_own_result_in_the_report(tmp_path: Path) -> None:
    # Every scripted model's first call is its turn 0, call 0: the main agent's call of the
    # researcher and the researcher's failing call must still be told apart.
    manifest = write_team(
        tmp_path, [call("researcher", task="divide"), "Done."],
        {"researcher": {"description": "Does arithmetic.", "tools": ["notes"]}},
        scripts={"researcher": [call("notes__calculate", expression="1/0"), "It failed."]},
        agent={"agents": ["researcher"]})
    write_cases(tmp_path, "cases:\n  - name: divides\n    input: go\n"
                          "    expect: {tools: [researcher, notes__calculate], match: strict}\n")
    done = invoke("test", str(manifest), "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    (case,) = report["cases"]
    assert [(c["name"], c["status"]) for c in case["tool_calls"]] == [
        ("researcher", "success"), ("notes__calculate", "error")]
    assert case["status"] == "passed", case["differences"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_every_case_plays_the_scripted_models_from_their_first_turn(tmp_path: Path, jobs: str) -> None:
    # Each script holds one run only: a case that went on from where another left off (or raced
    # it) would find no turn left.
    manifest = write_team(
        tmp_path, [call("pipeline", task="6*7"), "Done."], PIPELINE,
        scripts={"researcher": [call("notes__calculate", expression="6*7"), "42"], "writer": ["It is 42."]},
        agent={"agents": ["pipeline"]})
    write_cases(tmp_path, "cases:\n" + "".join(
        f"  - {{name: run-{n}, input: go, expect: {{agents: [pipeline, researcher, writer]}}}}\n"
        for n in range(3)))
    done = invoke("test", str(manifest), "-j", jobs, cwd=tmp_path)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "3 cases: 3 passed" in done.stdout
