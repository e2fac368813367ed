"""Case files: a corpus of invalid files (each problem located like the manifest's, all at once),
the committed JSON Schema, discovery in evals/, and cases written from a chat thread."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from builders import ROOT, TESTS
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from runner.errors import CaseSaveError, ManifestError
from runner.evals.cases import CaseSpec, evals_json_schema, find_case_files, load_cases
from runner.evals.cassettes import Secrets
from runner.evals.saving import ChatTrajectory, approval_entry, case_from_thread, save_case, saved_case

CORPUS = TESTS / "evals"
INVALID = sorted((CORPUS / "invalid").glob("*.yaml"))
VALID = sorted((CORPUS / "valid").glob("*.yaml"))
EXPECT = re.compile(r"^# expect: (\d+):(\d+) (\S+) ?(.*)$")


def expectations(path: Path) -> list[tuple[int, int, str, str]]:
    return [(int(m[1]), int(m[2]), m[3], m[4])
            for line in path.read_text().splitlines() if (m := EXPECT.match(line))]


def test_the_corpus_covers_many_kinds_of_invalid_case_files() -> None:
    assert len(INVALID) >= 15
    assert all(expectations(path) for path in INVALID)


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_case_files_report_each_problem_at_its_place(path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        load_cases([path])
    expected = expectations(path)
    problems = caught.value.problems
    assert [(p.line, p.column, p.path or "-") for p in problems] == [
        (line, column, where) for line, column, where, _ in expected], problems
    for problem, (_, _, _, fragment) in zip(problems, expected, strict=True):
        assert problem.file == str(path)
        assert fragment.lower() in problem.message.lower(), problem


def test_problems_of_several_files_are_reported_together() -> None:
    with pytest.raises(ManifestError) as caught:
        load_cases(INVALID[:3])
    assert {p.file for p in caught.value.problems} == {str(p) for p in INVALID[:3]}


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_case_files_load_and_the_schema_accepts_them(path: Path) -> None:
    import jsonschema

    assert load_cases([path])
    jsonschema.Draft202012Validator(evals_json_schema()).validate(yaml.safe_load(path.read_text()))


def test_the_committed_case_schema_matches_the_models() -> None:
    committed = json.loads((ROOT / "schemas" / "evals.schema.json").read_text())
    assert committed == evals_json_schema(), (
        "run: python -c 'import json; from runner.evals.cases import evals_json_schema as s; "
        "print(json.dumps(s(), indent=2))' > schemas/evals.schema.json")


def test_case_files_are_found_in_evals_next_to_the_manifest(tmp_path: Path) -> None:
    (tmp_path / "evals" / "cassettes").mkdir(parents=True)
    for name in ("b.yaml", "a.yml", "notes.txt", "cassettes/c.yaml"):
        (tmp_path / "evals" / name).write_text("cases: []\n")
    found = find_case_files(tmp_path / "agent.yaml")
    assert [p.name for p in found] == ["a.yml", "b.yaml"]


def test_a_manifest_s_case_files_are_those_naming_it_or_no_manifest(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    for manifest in ("agent.yaml", "other.yaml"):
        (tmp_path / manifest).write_text("version: 1\n")
    for name, named in (("all", ""), ("mine", "manifest: agent.yaml\n"), ("theirs", "manifest: other.yaml\n"),
                        ("typo", "manifest: agnet.yaml\n")):  # a typo is loaded, to be reported
        (tmp_path / "evals" / f"{name}.yaml").write_text(named + "cases: []\n")
    assert [p.stem for p in find_case_files(tmp_path / "agent.yaml")] == ["all", "mine", "typo"]
    assert [p.stem for p in find_case_files(tmp_path / "other.yaml")] == ["all", "theirs", "typo"]


THREAD = [
    HumanMessage("remember milk"),
    AIMessage("", tool_calls=[{"name": "notes__add_note", "args": {"title": "milk"}, "id": "1"}]),
    ToolMessage("saved note 'milk'", tool_call_id="1", name="notes__add_note"),
    AIMessage("Saved the note 'milk'.\nAnything else?"),
    HumanMessage("list them"),
    AIMessage("", tool_calls=[{"name": "notes__list_notes", "args": {}, "id": "2"}]),
    ToolMessage('["milk"]', tool_call_id="2", name="notes__list_notes"),
    AIMessage("You have one note: milk."),
]


NO_SECRETS = Secrets({})


def a_manifest(folder: Path) -> Path:
    """``folder/agent.yaml``: a saved case names its manifest, which is beside its evals/ folder."""
    path = folder / "agent.yaml"
    path.write_text("version: 1\nname: notes\nmodel: offline\n")
    return path


def test_a_thread_becomes_a_case_with_its_turns_trajectory_and_answer_excerpt() -> None:
    assert case_from_thread("groceries", THREAD, NO_SECRETS) == {
        "name": "groceries",
        "input": ["remember milk", "list them"],
        "expect": {
            "tools": [{"name": "notes__add_note", "args": {"title": "milk"}},
                      {"name": "notes__list_notes"}],
            "match": "unordered",
            "answer": {"contains": "You have one note: milk."},
        },
    }


def test_a_chat_s_trajectory_gives_the_saved_case_every_agent_s_calls_with_edits_and_the_agent_runs() -> None:
    seen = ChatTrajectory()
    for text in ("remember milk", "list them"):
        seen.begin_turn(text)
    seen.observe({"type": "tool_call", "name": "researcher", "args": {"task": "milk?"}, "id": "a"})
    seen.observe({"type": "agent", "agent": "researcher", "caller": "main", "task": "milk?", "call": "a"})
    seen.observe({"type": "tool_call", "name": "notes__add_note", "args": {"title": "mlk"}, "id": "b",
                  "agent": "researcher"})
    seen.edited("b", {"title": "milk"})  # an approval's edit: the call ran with these
    expect = case_from_thread("groceries", THREAD, NO_SECRETS, trajectory=seen)["expect"]
    assert expect["tools"] == [{"name": "researcher", "args": {"task": "milk?"}},
                               {"name": "notes__add_note", "args": {"title": "milk"}}]
    assert (expect["match"], expect["agents"], expect["agents_match"]) == ("unordered", ["researcher"],
                                                                           "unordered")


def test_a_prompt_command_s_user_messages_are_turns_the_chat_saw() -> None:
    seen = ChatTrajectory()
    seen.begin_turn([HumanMessage("remember milk"), AIMessage("Noted."), HumanMessage("list them")])
    assert seen.turns == 2
    expect = case_from_thread("groceries", THREAD, NO_SECRETS, trajectory=seen)["expect"]
    assert (expect["tools"], expect["match"]) == ([], "unordered")  # no turn unseen: none from the thread


def test_a_thread_resumed_in_the_chat_saves_the_unseen_turns_calls_and_expects_at_least_them() -> None:
    seen = ChatTrajectory()
    seen.begin_turn("list them")  # the second turn only: the first ran in another process
    seen.observe({"type": "tool_call", "name": "notes__list_notes", "args": {}, "id": "2"})
    expect = case_from_thread("groceries", THREAD, NO_SECRETS, trajectory=seen)["expect"]
    assert expect["tools"] == [{"name": "notes__add_note", "args": {"title": "milk"}},
                               {"name": "notes__list_notes"}]
    assert expect["match"] == "superset"  # the first turn's agents' calls, if any, are unknown


def test_a_saved_case_is_a_valid_case_file_and_is_never_overwritten(tmp_path: Path) -> None:
    manifest = a_manifest(tmp_path)
    path = save_case(manifest, "groceries", THREAD, NO_SECRETS)
    assert path == tmp_path / "evals" / "groceries.yaml"
    assert yaml.safe_load(path.read_text())["manifest"] == "agent.yaml"  # its cases are that manifest's
    case = saved_case(path)
    assert case.name == "groceries" and case.spec.expect.match == "unordered"
    with pytest.raises(CaseSaveError, match="already exists"):
        save_case(manifest, "groceries", THREAD, NO_SECRETS)
    with pytest.raises(CaseSaveError, match="cannot name a case"):
        save_case(manifest, "Bad Name", THREAD, NO_SECRETS)
    with pytest.raises(CaseSaveError, match="no user message"):
        save_case(manifest, "empty", [], NO_SECRETS)


def test_a_saved_case_writes_secrets_as_variables_and_literal_references_escaped_and_reads_back_whole(
    tmp_path: Path,
) -> None:
    canary = "CANARYcase0123456789"
    thread = [
        HumanMessage("look up ${HOME} for " + canary),
        AIMessage("", tool_calls=[{"name": "vault__get", "args": {"key": canary, "n": 1}, "id": "1"}]),
        ToolMessage(canary, tool_call_id="1", name="vault__get"),
        AIMessage("The value the vault holds for the key is " + canary + " and more."),
    ]
    secrets = Secrets({"MCP_RUN_TEST_CANARY": canary})
    path = save_case(a_manifest(tmp_path), "vault", thread, secrets)
    text = path.read_text()
    assert canary not in text
    assert "contains: The value the vault holds for the key is" in text  # not a cut-open ${…}
    case = load_cases([path], environ={"MCP_RUN_TEST_CANARY": canary, "HOME": "/nowhere"})[0]
    assert case.spec.input == ["look up ${HOME} for " + canary]
    assert case.spec.expect.tools[0].args == {"key": canary, "n": 1}
    written = case_from_thread("vault", thread[:3] + [AIMessage("It is " + canary + ".")], secrets)
    assert written["expect"]["answer"] == {"contains": "It is ${MCP_RUN_TEST_CANARY}."}


def test_a_saved_case_points_at_the_schema_only_where_the_schema_file_is(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    without = save_case(plain / "agent.yaml", "groceries", THREAD, NO_SECRETS)
    assert "yaml-language-server" not in without.read_text()
    (tmp_path / "repo" / "schemas").mkdir(parents=True)
    (tmp_path / "repo" / "schemas" / "evals.schema.json").write_text("{}")
    with_schema = save_case(tmp_path / "repo" / "agent.yaml", "groceries", THREAD, NO_SECRETS)
    assert with_schema.read_text().startswith(
        "# yaml-language-server: $schema=../schemas/evals.schema.json\n")


def test_saving_refuses_a_case_name_another_case_file_already_uses(tmp_path: Path) -> None:
    manifest = a_manifest(tmp_path)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "math.yaml").write_text(
        "cases:\n  - name: adds\n    input: one\n  - name: calculates\n    input: two\n")
    (tmp_path / "evals" / "broken.yaml").write_text("cases: [\n")  # unreadable: names nothing
    with pytest.raises(CaseSaveError, match=r"'calculates' is already in .*math\.yaml"):
        save_case(manifest, "calculates", THREAD, NO_SECRETS)
    assert not (tmp_path / "evals" / "calculates.yaml").exists()
    saved = save_case(manifest, "calculates-again", THREAD, NO_SECRETS)  # a name no file uses is saved
    assert load_cases([tmp_path / "evals" / "math.yaml", saved])


def test_a_thread_saved_with_its_approval_answers_replays_them_as_given() -> None:
    answers = [approval_entry("notes__delete_note", None),
               approval_entry("notes__delete_note", {"action": "deny", "reason": "keep it"}),
               approval_entry("notes__delete_note", {"action": "edit", "args": {"title": "eggs"}}),
               approval_entry("notes__delete_note", {"action": "approve"})]
    case = case_from_thread("pantry", THREAD, NO_SECRETS, answers)
    assert case["approvals"] == [
        {"tool": "notes__delete_note", "action": "stop"},
        {"tool": "notes__delete_note", "action": "deny", "reason": "keep it"},
        {"tool": "notes__delete_note", "action": "edit", "args": {"title": "eggs"}},
        {"tool": "notes__delete_note", "action": "approve"},
    ]
    assert "approvals" not in case_from_thread("pantry", THREAD, NO_SECRETS)  # none asked: none written
    spec = CaseSpec.model_validate(case)
    assert [answer.resume() for answer in spec.approvals or []][1:] == [
        {"action": "deny", "reason": "keep it"}, {"action": "edit", "args": {"title": "eggs"}},
        {"action": "approve"}]
