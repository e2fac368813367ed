"""``mcp-run test`` as a command: exit codes, the table and first difference, --json, --junit
(checked against the rules of the JUnit XML schema CI servers read), -k, the bundled agent's
cases in replay, and the README's example as written."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from builders import invoke
from evals_support import ROOT, make_agent, write_cases


def test_the_bundled_agents_cases_pass_in_replay() -> None:
    done = invoke("test", "agent.yaml", "--replay", cwd=ROOT)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert re.search(r"3 cases: 3 passed", done.stdout)


CASES = """\
cases:
  - name: adds
    input: 'notes__calculate {"expression": "2+2"}'
    expect: {tools: [notes__calculate], answer: {contains: "4"}}
  - name: multiplies-wrongly
    input: 'notes__calculate {"expression": "6*7"}'
    expect: {answer: {contains: "41"}}
"""


def test_a_failing_case_exits_1_and_shows_its_first_difference(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, CASES)
    done = invoke("test", str(manifest))
    assert done.exit_code == 1, done.stderr
    assert re.search(r"adds\s+passed\s+2\s+1", done.stdout)
    assert re.search(r"multiplies-wrongly\s+failed\s+2\s+1", done.stdout)
    assert ("multiplies-wrongly (failed): the answer does not contain '41' "
            "(answer: 'notes__calculate returned: 42')") in done.stdout
    assert 'tool calls: notes__calculate {"expression": "6*7"}' in done.stdout
    assert "2 cases: 1 passed, 1 failed" in done.stdout


def test_k_selects_cases_and_all_passing_exits_0(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, CASES)
    done = invoke("test", str(manifest), "-k", "add*", "-j", "1")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "multiplies" not in done.stdout
    nothing = invoke("test", str(manifest), "-k", "nothing-like-this")
    assert nothing.exit_code == 2 and "no case matches -k 'nothing-like-this'" in nothing.stderr


def test_invalid_case_files_exit_2_with_every_located_problem(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    bad = write_cases(tmp_path, "cases:\n  - name: x\n    inptu: hi\n")
    done = invoke("test", str(manifest))
    assert done.exit_code == 2
    assert f"{bad}:3:5: cases[0].inptu: unknown key 'inptu' (did you mean 'input'?)" in done.stderr
    assert f"{bad}:2:5: cases[0].input: missing required key" in done.stderr


OUTPUT_CASE = "cases:\n  - name: sums\n    input: hi\n    expect:\n      output: {total: 4}\n"


def test_a_case_expecting_an_answer_object_without_output_in_the_manifest_is_invalid(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    cases = write_cases(tmp_path, OUTPUT_CASE)
    done = invoke("test", str(manifest))
    assert done.exit_code == 2, done.stdout + done.stderr
    assert (f"{cases}:5:7: cases[0].expect.output: expect.output checks the answer object, but the "
            "manifest has no 'output:'") in done.stderr
    assert not done.stdout.strip()  # no case ran


TYPO_AND_OUTPUT_CASES = ("cases:\n  - name: typo\n    input: hi\n    expect:\n      answer: {matchs: x}\n"
                         "  - name: sums\n    input: hi\n    expect:\n      output: {total: 4}\n")


def test_test_reports_a_case_typo_and_an_answer_object_the_manifest_has_not_in_one_run(
        tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    cases = write_cases(tmp_path, TYPO_AND_OUTPUT_CASES)
    done = invoke("test", str(manifest))
    assert done.exit_code == 2, done.stdout + done.stderr
    assert f"{cases}:5:16: cases[0].expect.answer.matchs: unknown key 'matchs'" in done.stderr
    assert f"{cases}:9:7: cases[1].expect.output: expect.output checks the answer object" in done.stderr


def test_validate_reports_a_case_typo_and_an_answer_object_the_manifest_has_not_in_one_run(
        tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    cases = write_cases(tmp_path, TYPO_AND_OUTPUT_CASES)
    done = invoke("validate", str(manifest))
    assert done.exit_code == 2, done.output
    assert f"{cases}:5:16: cases[0].expect.answer.matchs: unknown key 'matchs'" in done.output
    assert f"{cases}:9:7: cases[1].expect.output: expect.output checks the answer object" in done.output


def test_validate_reports_a_case_that_expects_an_answer_object_the_manifest_has_not(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    cases = write_cases(tmp_path, OUTPUT_CASE)
    done = invoke("validate", str(manifest))
    assert done.exit_code == 2, done.output
    assert f"{cases}:5:7: cases[0].expect.output: expect.output checks the answer object" in done.output
    write_cases(tmp_path, "cases:\n  - name: x\n    inptu: hi\n")
    assert "cases[0].inptu: unknown key 'inptu'" in invoke("validate", str(manifest)).output


def test_conflicting_options_exit_2(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, CASES)
    assert invoke("test", str(manifest), "--record", "--replay").exit_code == 2
    assert invoke("test", str(manifest), "--watch", "--replay").exit_code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    alone = invoke("test", str(make_agent(empty)))
    assert alone.exit_code == 2 and "no case files" in alone.stderr


def test_json_output_lists_each_case_with_its_trajectory(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    case_file = write_cases(tmp_path, CASES)
    done = invoke("test", str(manifest), str(case_file), "--json")
    assert done.exit_code == 1
    report = json.loads(done.stdout)
    assert report["totals"] == {"passed": 1, "failed": 1, "drift": 0, "error": 0}
    adds = report["cases"][0]
    assert adds["name"] == "adds" and adds["status"] == "passed" and adds["steps"] == 2
    assert adds["tool_calls"] == [{"name": "notes__calculate", "args": {"expression": "2+2"},
                                   "status": "success"}]
    assert report["cases"][1]["differences"][0].startswith("the answer does not contain '41'")


# The rules of the JUnit XML schema that Jenkins, GitLab and GitHub reporters read (junit-10.xsd):
# each element's allowed attributes (required ones marked) and children.
JUNIT = {
    "testsuites": ({"name": False, "tests": False, "failures": False, "errors": False,
                    "disabled": False, "time": False}, {"testsuite"}),
    "testsuite": ({"name": True, "tests": True, "failures": False, "errors": False, "skipped": False,
                   "disabled": False, "time": False, "timestamp": False, "hostname": False,
                   "id": False, "package": False}, {"properties", "testcase", "system-out",
                                                    "system-err"}),
    "testcase": ({"name": True, "classname": False, "time": False, "assertions": False,
                  "status": False}, {"skipped", "error", "failure", "system-out", "system-err"}),
    "failure": ({"message": False, "type": False}, set()),
    "error": ({"message": False, "type": False}, set()),
    "system-out": ({}, set()),
}
INTEGER, DECIMAL = re.compile(r"^\d+$"), re.compile(r"^\d+(\.\d+)?$")


def check_junit(element: ET.Element) -> None:
    allowed, children = JUNIT[element.tag]
    assert set(element.attrib) <= set(allowed), (element.tag, element.attrib)
    assert {name for name, required in allowed.items() if required} <= set(element.attrib)
    for name in ("tests", "failures", "errors", "skipped", "disabled"):
        if name in element.attrib:
            assert INTEGER.match(element.attrib[name]), (element.tag, name)
    if "time" in element.attrib:
        assert DECIMAL.match(element.attrib["time"])
    if "timestamp" in element.attrib:
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$", element.attrib["timestamp"])
    for child in element:
        assert child.tag in children, (element.tag, child.tag)
        check_junit(child)
    if element.tag == "testcase":
        assert len([c for c in element if c.tag in ("failure", "error", "skipped")]) <= 1


def test_junit_xml_follows_the_schema_ci_servers_read(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, CASES)
    junit = tmp_path / "out" / "junit.xml"
    junit.parent.mkdir()
    done = invoke("test", str(manifest), "--junit", str(junit))
    assert done.exit_code == 1
    root = ET.fromstring(junit.read_bytes())
    assert root.tag == "testsuites"
    check_junit(root)
    [suite] = root
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    adds, wrong = suite.findall("testcase")
    assert adds.get("name") == "adds" and adds.get("classname") == "agent.cases" and len(adds) == 0
    failure = wrong.find("failure")
    assert failure is not None and failure.get("type") == "failed"
    assert failure.get("message", "").startswith("the answer does not contain '41'")


def test_drift_is_a_junit_error_not_a_failure(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, CASES)
    assert invoke("test", str(manifest), "--record").exit_code == 1
    template = tmp_path / "system.md.j2"
    template.write_text(template.read_text().replace("Use the tools", "Prefer the tools"))
    junit = tmp_path / "junit.xml"
    done = invoke("test", str(manifest), "--replay", "--junit", str(junit))
    assert done.exit_code == 1
    assert "adds (drift): prompt changed" in done.stdout
    root = ET.fromstring(junit.read_bytes())
    check_junit(root)
    assert [case.find("error").get("type") for case in root.iter("testcase")] == ["drift", "drift"]


def readme_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Testing your agent", 1)[1].split("\n## ", 1)[0]


def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    section = readme_section()
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.DOTALL)
    [case_file] = [body for lang, body in blocks if lang == "yaml"]
    commands = [line for lang, body in blocks if lang == "sh" for line in body.splitlines()
                if line.startswith("mcp-run test")]
    assert case_file == (ROOT / "evals" / "notes.yaml").read_text()  # the bundled agent's cases
    for name in ("agent.yaml", "prompts", "examples"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    write_cases(tmp_path, case_file, "notes.yaml")
    assert len(commands) >= 3
    for command in commands:
        done = invoke(*command.split("#")[0].split()[1:], cwd=tmp_path)
        assert done.exit_code == 0, (command, done.stdout, done.stderr)
    assert (tmp_path / "evals" / "cassettes").is_dir()


@pytest.mark.parametrize("row", ["`mcp-run test FILE [CASE_FILES…]`"])
def test_the_commands_table_lists_the_test_command(row: str) -> None:
    assert row in (ROOT / "README.md").read_text()


def test_junit_xml_stays_well_formed_when_an_answer_holds_control_characters(tmp_path: Path) -> None:
    from runner.evals.cases import load_cases
    from runner.evals.matching import Observation
    from runner.evals.report import junit_xml
    from runner.evals.running import CaseResult

    [case] = load_cases([write_cases(tmp_path, "cases: [{name: odd, input: hi}]\n")])
    result = CaseResult(case, "failed", 0.5, Observation(answer="bell \x07 escape \x1b[31m"),
                        ["the answer does not contain 'x' (answer: '\x1b[31m')"])
    root = ET.fromstring(junit_xml([result], suite="agent"))
    check_junit(root)
    assert root.find("testsuite/testcase/system-out").text == "bell \ufffd escape \ufffd[31m"


def test_repeated_k_runs_the_cases_matching_any_of_them() -> None:
    done = invoke("test", "agent.yaml", "--replay", "-k", "calc", "-k", "explains", cwd=ROOT)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "calculates" in done.stdout and "explains-without-a-tool" in done.stdout
    assert "reports-a-failed-delete" not in done.stdout
    assert re.search(r"2 cases: 2 passed", done.stdout)


def test_an_unknown_model_id_is_invalid_input_with_a_suggestion(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, CASES)
    built_in = invoke("test", str(manifest), "--model", "ofline")
    assert built_in.exit_code == 2, built_in.stdout + built_in.stderr
    assert "'--model': model 'ofline' (did you mean 'offline'?) names no provider" in built_in.stderr
    provider = invoke("test", str(manifest), "--model", "opnai:gpt-4o")
    assert provider.exit_code == 2
    assert "'--model': unknown model provider 'opnai' (did you mean 'openai'?)" in provider.stderr



def test_a_case_file_naming_its_manifest_is_checked_and_run_for_that_manifest_only(tmp_path: Path) -> None:
    # Two manifests share one evals/ folder: the cases of a file naming one are not the other's.
    manifest = make_agent(tmp_path)
    other = tmp_path / "other.yaml"
    shutil.copy(manifest, other)
    cases = write_cases(tmp_path, "manifest: other.yaml\n" + OUTPUT_CASE)
    assert invoke("validate", str(manifest)).exit_code == 0
    done = invoke("validate", str(other))
    assert done.exit_code == 2, done.output
    assert f"{cases}:6:7: cases[0].expect.output: expect.output checks the answer object" in done.output
    said = invoke("test", str(manifest))
    assert said.exit_code == 2 and "(those there name another manifest: 'manifest:')" in said.stderr


def test_a_case_file_naming_a_manifest_the_folder_has_not_is_a_located_error(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    cases = write_cases(tmp_path, "manifest: agnet.yaml\ncases:\n  - {name: hi, input: hi}\n")
    done = invoke("validate", str(manifest))
    assert done.exit_code == 2, done.output
    assert (f"{cases}:1:11: manifest: no manifest 'agnet.yaml' in {tmp_path} (did you mean "
            "'agent.yaml'?)") in done.output


def test_a_case_name_another_manifest_s_case_file_uses_is_a_located_error(tmp_path: Path) -> None:
    # Their cassettes would be one file: evals/cassettes/hi.yaml.
    manifest = make_agent(tmp_path)
    shutil.copy(manifest, tmp_path / "other.yaml")
    theirs = write_cases(tmp_path, "manifest: other.yaml\ncases:\n  - {name: hi, input: hi}\n", "theirs.yaml")
    mine = write_cases(tmp_path, "manifest: agent.yaml\ncases:\n  - {name: hi, input: hi}\n", "mine.yaml")
    for command in ("validate", "test"):
        done = invoke(command, str(manifest))
        assert done.exit_code == 2, done.output
        assert f"{mine}:3:12: cases[0].name: case name 'hi' is used in {theirs} too" in done.output


def test_a_case_file_of_another_manifest_given_by_name_is_a_located_error(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    shutil.copy(manifest, tmp_path / "other.yaml")
    theirs = write_cases(tmp_path, "manifest: other.yaml\ncases:\n  - {name: hi, input: hi}\n")
    done = invoke("test", str(manifest), str(theirs))
    assert done.exit_code == 2, done.output
    assert (f"{theirs}:1:11: manifest: the cases of this file are for other.yaml, not agent.yaml: run "
            "`mcp-run test other.yaml`") in done.output
