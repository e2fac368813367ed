"""``mcp-run validate`` reports every problem it can locate in one run: the checks of references
(agent names, cycles, handoffs) and of what the agent is built from (templates, other manifests'
files, models) run on the parts of the manifest whose own entries are valid, beside the schema's
problems, not in a later run once those are fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import invoke

SCRIPT = "- text: done\n"

# Problems of three stages at once: the schema's, references' and the build's.
TRIAL = """\
version: 1
name: trial
model: {id: scripted, script: main.yaml}
frobnicate: 1
agent:
  agents: [writer, ghost]
  handoffs: [pipeline]
agents:
  writer:
    description: Writes.
    prompt: "{{ broken"
    agents: [editor]
  editor:
    description: Edits.
    colour: red
    size: 3
    agents: [writer]
  polish:
    loop: {generator: writer, evaluator: editor, max_rounds: 0}
  pipeline:
    chain: [writer, nobody]
    parallel: [writer, editor]
  triage: {router: [writer, polish]}
  research: {file: missing.yaml}
  flow: {chain: [writer, phantom]}
"""


def _validate(folder: Path, text: str) -> tuple[int, list[str]]:
    (folder / "main.yaml").write_text(SCRIPT)
    (folder / "agent.yaml").write_text(text)
    result = invoke("validate", str(folder / "agent.yaml"))
    return result.exit_code, result.stderr.splitlines()


def _located(lines: list[str], where: str, words: str) -> bool:
    return any(f": {where}: " in line and words in line for line in lines)


@pytest.fixture(scope="module")
def trial(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, list[str]]:
    return _validate(tmp_path_factory.mktemp("trial"), TRIAL)


def test_validate_reports_schema_reference_and_build_problems_in_one_run(trial: tuple[int, list[str]]
                                                                         ) -> None:
    code, lines = trial
    assert code == 2
    expected = [
        ("frobnicate", "unknown key 'frobnicate'"),  # the schema's
        ("agents.editor.colour", "unknown key 'colour'"),
        ("agents.editor.size", "unknown key 'size'"),  # two in one entry: the others still checked
        ("agents.polish.loop.max_rounds", "greater than 0"),
        ("agents.pipeline", "chain and parallel cannot be used together"),
        ("agent.agents[1]", "unknown agent 'ghost'"),  # references, beside the schema's problems
        ("agents.flow.chain[1]", "unknown agent 'phantom'"),
        ("agents.writer.prompt", "end of template"),  # the build's, beside both
        ("agents.writer", "has no model of its own"),
        ("agents.research.file", "'missing.yaml' does not exist"),
    ]
    missing = [entry for entry in expected if not _located(lines, *entry)]
    assert not missing, lines
    assert lines[-1] == f"{len(lines) - 1} problems found"


def test_names_of_agents_whose_entries_are_invalid_are_not_reported_as_unknown(
        trial: tuple[int, list[str]]) -> None:
    _, lines = trial
    # editor, polish and pipeline have problems of their own: naming them is no further problem,
    # and neither is handing off to pipeline (whether it could take a conversation is not known).
    assert not [line for line in lines if "unknown agent 'editor'" in line
                or "unknown agent 'polish'" in line or "unknown agent 'pipeline'" in line], lines
    assert not _located(lines, "agent.handoffs[0]", "pipeline"), lines
    # What an invalid entry calls is not checked: 'nobody' is in pipeline's invalid entry.
    assert not [line for line in lines if "'nobody'" in line], lines


def test_a_valid_schema_with_bad_references_still_gets_its_templates_and_files_checked(
        tmp_path: Path) -> None:
    text = TRIAL.replace("frobnicate: 1\n", "").replace("    colour: red\n    size: 3\n", "").replace(
        "max_rounds: 0", "max_rounds: 2").replace("    parallel: [writer, editor]\n", "")
    code, lines = _validate(tmp_path, text)
    assert code == 2
    assert _located(lines, "agents.pipeline.chain[1]", "unknown agent 'nobody'"), lines
    assert _located(lines, "agents.writer.prompt", "end of template"), lines
    assert _located(lines, "agents.research.file", "'missing.yaml' does not exist"), lines
