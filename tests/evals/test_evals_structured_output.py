"""`mcp-run test` on an agent with ``output:``: a case expects fields of the answer object (a path
and its value, or a regex), and a case file with a bad expectation is a located error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evals_support import cases_of, make_agent, run, write_cases
from langchain_core.messages import AIMessage, HumanMessage

from runner.agent.structured import OUTPUT_KEY
from runner.errors import ManifestError
from runner.evals.cases import CaseSpec
from runner.evals.cassettes import Secrets
from runner.evals.saving import case_from_thread

OUTPUT = """\
output:
  schema:
    type: object
    properties:
      summary: {type: string}
      checked: {type: boolean}
      parts: {type: array, items: {type: string}, minItems: 1}
    required: [summary, checked, parts]
"""
CASES = """\
cases:
  - name: answers-with-an-object
    input: 'notes__calculate {"expression": "6*7"}'
    expect:
      output:
        summary: {matches: "returned: 42$"}
        checked: false
        parts.0: "notes__calculate returned: 42"
  - name: expects-another-value
    input: 'notes__calculate {"expression": "6*7"}'
    expect:
      output: {checked: true, parts.3: x}
"""


async def test_a_case_expects_fields_of_the_answer_object(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path, extra=OUTPUT)
    write_cases(tmp_path, CASES)
    results = await run(manifest)
    passed, failed = results["answers-with-an-object"], results["expects-another-value"]
    assert passed.status == "passed", passed.differences
    assert passed.observed.output == {"summary": "notes__calculate returned: 42", "checked": False,
                                      "parts": ["notes__calculate returned: 42"]}
    assert failed.status == "failed"
    assert failed.differences[0].startswith("the output's checked is false, expected true (output: ")
    assert failed.differences[1].startswith("the output has no parts.3 (output: ")


async def test_expecting_an_object_of_an_agent_without_output_fails_and_says_why(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, "cases:\n  - name: no-object\n    input: hello\n    expect: {output: {a: 1}}\n")
    result = (await run(manifest))["no-object"]
    assert result.status == "failed"
    assert result.differences == ["the answer is no object (expect.output needs 'output:' in the manifest)"]


def test_a_bad_regex_in_an_output_expectation_is_located(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path, extra=OUTPUT)
    path = write_cases(tmp_path, "cases:\n  - name: bad\n    input: hi\n    expect:\n"
                                 "      output: {summary: {matches: '('}}\n")
    with pytest.raises(ManifestError) as bad:
        cases_of(manifest)
    [problem] = bad.value.problems
    assert (problem.file, problem.line, problem.path) == (str(path), 5, "cases[0].expect.output")
    assert "not a valid regular expression" in problem.message


async def test_a_recorded_case_replays_its_answer_object_without_the_model(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path, extra=OUTPUT)
    write_cases(tmp_path, CASES.split("  - name: expects-another-value")[0])
    recorded = (await run(manifest, "record"))["answers-with-an-object"]
    (tmp_path / "no-turns.yaml").write_text("[]\n")  # a model with no turn left fails its first call
    scripted = "model: {id: scripted, script: no-turns.yaml}"
    manifest.write_text(manifest.read_text().replace("model: offline", scripted))
    replayed = (await run(manifest, "replay"))["answers-with-an-object"]
    assert replayed.status == "passed", replayed.differences
    assert replayed.observed.output == recorded.observed.output


async def test_a_case_stopped_at_its_max_steps_says_so_instead_of_failing_on_the_schema(
        tmp_path: Path) -> None:
    manifest = make_agent(tmp_path, extra=OUTPUT)
    write_cases(tmp_path, "cases:\n  - name: short\n    input: 'notes__calculate {\"expression\": \"1+1\"}'\n"
                          "    max_steps: 1\n    expect: {output: {checked: false}}\n")
    result = (await run(manifest))["short"]
    assert result.status == "failed" and result.observed.steps == 1
    assert "max_steps" in result.observed.answer and result.observed.output is None


def test_a_thread_saved_from_the_chat_expects_the_fields_of_its_answer_object() -> None:
    answer = {"summary": "sunny ${not a var}", "days": [{"high": 18}], "ok": True}
    thread = [HumanMessage("forecast?"), AIMessage(content=json.dumps(answer),
                                                   response_metadata={OUTPUT_KEY: answer})]
    case = case_from_thread("forecast", thread, Secrets({}))
    assert case["expect"]["output"] == {"summary": "sunny $${not a var}", "days.0.high": 18, "ok": True}
    assert "answer" not in case["expect"]
    CaseSpec.model_validate(case)
