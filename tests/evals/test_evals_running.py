"""Running cases over one agent: live runs, parallel cases, the judge, --model, record and replay
(equality, no servers, secrets, drift)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import NamedTuple

import anyio
import pytest
import yaml
from builders import ROOT, TESTS
from evals_support import RUN_LIMIT, cases_of, make_agent, run, write_cases

from runner.agent.reload import forget_modules, reload_runtime
from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn
from runner.evals.case_sessions import EvalSessions
from runner.evals.cassettes import Secrets
from runner.evals.running import CaseResult, run_cases
from runner.evals.saving import save_case

CASES = """\
cases:
  - name: calculates
    input: 'notes__calculate {"expression": "6*7"}'
    expect:
      tools: [{name: notes__calculate, args: {expression: "6*7"}}]
      match: strict
      answer: {contains: "42"}
  - name: saves-a-note
    input: ['notes__add_note {"title": "milk", "text": "2 litres"}', notes__list_notes]
    expect:
      tools: [notes__list_notes, {name: notes__add_note, args: {title: {matches: "^mil"}}}]
      match: unordered
      answer: {contains: milk}
      no_tool_errors: true
  - name: deletes-after-approval
    input: 'notes__delete_note {"title": "nothing"}'
    expect:
      tools: [notes__delete_note]
      answer: {contains: failed}
"""


async def test_cases_pass_live_against_the_real_server(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, CASES)
    results = await run(manifest)
    assert {name: r.status for name, r in results.items()} == dict.fromkeys(
        ("calculates", "saves-a-note", "deletes-after-approval"), "passed"), results
    saved = results["saves-a-note"]
    assert saved.observed.steps == 4 and [c.name for c in saved.observed.calls] == [
        "notes__add_note", "notes__list_notes"]
    assert results["deletes-after-approval"].observed.calls[0].status == "error"


async def test_a_wrong_expectation_fails_with_the_first_difference(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, """\
cases:
  - name: wrong-tool
    input: 'notes__calculate {"expression": "1+1"}'
    expect:
      tools: [notes__list_notes]
      match: strict
      answer: {contains: "3"}
""")
    result = (await run(manifest))["wrong-tool"]
    assert result.status == "failed"
    assert result.differences[0].startswith(
        'tool call 1: expected notes__list_notes, got notes__calculate {"expression": "1+1"}')
    assert "does not contain '3'" in result.differences[1]


RENDEZVOUS = '''\
import asyncio

waiting = 0
everyone_here = asyncio.Event()


async def rendezvous(count: int) -> str:
    """Return once `count` calls are waiting at the same time."""
    global waiting
    waiting += 1
    if waiting >= count:
        everyone_here.set()
    await asyncio.wait_for(everyone_here.wait(), 30)
    return f"met {count}"
'''


async def test_cases_run_in_parallel_each_on_its_own_thread(tmp_path: Path) -> None:
    # Each case's tool call returns only when all four are in flight together: a run that is not
    # parallel times out in the tool and fails the case.
    (tmp_path / "meeting_point.py").write_text(RENDEZVOUS)
    manifest = make_agent(tmp_path, extra="local_tools: ['meeting_point:rendezvous']\n")
    write_cases(tmp_path, "cases:\n" + "".join(f"""\
  - name: case-{n}
    input: ['rendezvous {{"count": 4}}', 'notes__calculate {{"expression": "{n}*10"}}']
    expect:
      tools: [rendezvous, {{name: notes__calculate, args: {{expression: "{n}*10"}}}}]
      match: strict
      answer: {{contains: "{n * 10}"}}
      no_tool_errors: true
""" for n in range(1, 5)))
    results = await run(manifest, jobs=4)
    assert [r.status for r in results.values()] == ["passed"] * 4, [r.differences for r in results.values()]


async def test_the_judge_grades_with_its_model_and_its_reasoning_is_reported(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    (tmp_path / "judge-yes.yaml").write_text("- '{\"pass\": true, \"reasoning\": \"It gave 42.\"}'\n")
    (tmp_path / "judge-no.yaml").write_text(
        "- 'Verdict: {\"pass\": false, \"reasoning\": \"It never greeted the user.\"}'\n")
    write_cases(tmp_path, """\
cases:
  - name: judged-good
    input: 'notes__calculate {"expression": "6*7"}'
    judge: {criteria: The answer is 42., model: {id: scripted, script: judge-yes.yaml}}
  - name: judged-bad
    input: 'notes__calculate {"expression": "6*7"}'
    judge: {criteria: The agent greets the user., model: {id: scripted, script: judge-no.yaml}}
""")
    results = await run(manifest)
    good, bad = results["judged-good"], results["judged-bad"]
    assert good.status == "passed" and good.verdict is not None
    assert good.verdict.reasoning == "It gave 42."
    assert bad.status == "failed"
    assert bad.differences == ["the judge failed the case: It never greeted the user."]


async def test_a_case_judged_by_the_offline_model_is_an_error_that_says_to_give_the_judge_a_model(
    tmp_path: Path,
) -> None:
    manifest = make_agent(tmp_path)  # the offline model: the judge's default
    write_cases(tmp_path, """\
cases:
  - name: judged-offline
    input: 'notes__calculate {"expression": "6*7"}'
    judge: {criteria: The answer is 42.}
""")
    result = (await run(manifest))["judged-offline"]
    assert result.status == "error"
    assert result.differences == [
        "ModelError: the offline model cannot judge a conversation: give the case's judge a model "
        "(judge: {criteria: ..., model: PROVIDER:MODEL}), or run it with --replay from a cassette "
        "recorded with one"]


async def test_model_option_runs_the_cases_against_another_model(tmp_path: Path) -> None:
    (tmp_path / "turns.yaml").write_text("- I am the scripted model.\n")
    manifest = make_agent(tmp_path, model="{id: scripted, script: turns.yaml}")
    write_cases(tmp_path, """\
cases:
  - name: which-model
    input: hello
    expect: {answer: {contains: offline model}}
""")
    assert (await run(manifest))["which-model"].status == "failed"
    assert (await run(manifest, model_id="offline"))["which-model"].status == "passed"


async def test_a_case_stops_at_its_own_max_steps(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, """\
cases:
  - name: short
    input: 'notes__calculate {"expression": "1+1"}'
    max_steps: 1
    expect: {answer: {contains: "2"}}
""")
    result = (await run(manifest))["short"]
    assert result.status == "failed" and result.observed.steps == 1
    assert "max_steps" in result.observed.answer


# --------------------------------------------------------------------------- record and replay


class Recording(NamedTuple):
    folder: Path
    results: dict[str, CaseResult]


@pytest.fixture(scope="module")
async def recording(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Recording]:
    """A folder whose agent ran CASES with --record (cassettes in evals/cassettes), and what that
    run saw; recorded once for the tests that change a copy of it and replay: none changes this one."""
    folder = tmp_path_factory.mktemp("recorded")
    manifest = make_agent(folder)
    write_cases(folder, CASES)
    yield Recording(folder, await run(manifest, "record"))


def copy_of(recording: Recording, folder: Path) -> Path:
    """The recorded agent copied into ``folder``, its manifest's paths made ``folder``'s; its manifest."""
    shutil.copytree(recording.folder, folder, dirs_exist_ok=True)
    manifest = folder / "agent.yaml"
    manifest.write_text(manifest.read_text().replace(str(recording.folder), str(folder)))
    return manifest


def observed(results: dict) -> dict:
    return {name: (r.status, r.observed.calls, r.observed.answer, r.observed.steps)
            for name, r in results.items()}


async def test_replay_gives_what_the_recording_saw_without_servers(
    tmp_path: Path, recording: Recording,
) -> None:
    manifest = copy_of(recording, tmp_path)
    assert sorted(p.name for p in (tmp_path / "evals" / "cassettes").iterdir()) == [
        "calculates.yaml", "deletes-after-approval.yaml", "saves-a-note.yaml"]
    # A server that cannot start would stop a live run (required: true), and a model with no
    # turn left would fail its first call: a replay starts no server and calls no model.
    (tmp_path / "no-turns.yaml").write_text("[]\n")
    manifest.write_text(manifest.read_text()
                        .replace("command: python", "command: /nonexistent/python")
                        .replace("model: offline", "model: {id: scripted, script: no-turns.yaml}"))
    (tmp_path / "notes.json").unlink()
    replayed = await run(manifest, "replay")
    assert observed(replayed) == observed(recording.results)
    assert all(r.status == "passed" for r in replayed.values())
    assert not (tmp_path / "notes.json").exists()  # no tool ran


async def test_cassettes_hold_no_value_of_the_variables_the_manifest_references(tmp_path: Path) -> None:
    secret = "s3cr3t-token-value"
    manifest = make_agent(tmp_path, extra="  vars: {token: '${NOTES_TOKEN}'}\n")
    (tmp_path / "system.md.j2").write_text("Token: {{ vars.token }}. Tools: {{ tools | length }}.")
    write_cases(tmp_path, f"""\
cases:
  - name: secretive
    input: 'notes__add_note {{"title": "{secret}"}}'
    expect: {{tools: [notes__add_note]}}
""")
    environ = {"NOTES_TOKEN": secret, "PATH": "/usr/bin:/bin"}
    assert (await run(manifest, "record", environ=environ))["secretive"].status == "passed"
    text = (tmp_path / "evals" / "cassettes" / "secretive.yaml").read_text()
    assert secret not in text
    assert "${NOTES_TOKEN}" in text
    assert (await run(manifest, "replay", environ=environ))["secretive"].status == "passed"


async def test_the_judge_verdict_is_replayed_without_its_model(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    (tmp_path / "judge.yaml").write_text("- '{\"pass\": true, \"reasoning\": \"Correct.\"}'\n")
    write_cases(tmp_path, """\
cases:
  - name: judged
    input: 'notes__calculate {"expression": "6*7"}'
    judge: {criteria: The answer is 42., model: {id: scripted, script: judge.yaml}}
""")
    assert (await run(manifest, "record"))["judged"].status == "passed"
    (tmp_path / "judge.yaml").unlink()
    replayed = (await run(manifest, "replay"))["judged"]
    assert replayed.status == "passed" and replayed.verdict is not None
    assert replayed.verdict.reasoning == "Correct."


async def test_a_changed_prompt_is_reported_as_drift_not_as_a_wrong_answer(
    tmp_path: Path, recording: Recording,
) -> None:
    manifest = copy_of(recording, tmp_path)
    template = tmp_path / "system.md.j2"
    template.write_text(template.read_text().replace("Use the tools below", "Use the tools listed"))
    results = await run(manifest, "replay")
    for result in results.values():
        assert result.status == "drift"
        assert result.differences[0].startswith("prompt changed: the system prompt differs")
        assert "'Use the tools listed" in result.differences[0]


async def test_a_tool_gone_from_the_manifest_is_reported_as_drift(
    tmp_path: Path, recording: Recording,
) -> None:
    manifest = copy_of(recording, tmp_path)
    manifest.write_text(manifest.read_text().replace("approve: [delete_note]",
                                                     "approve: [delete_note], except: [calculate]"))
    result = (await run(manifest, "replay"))["calculates"]
    assert result.status == "drift"
    assert result.differences == ["tool gone: notes__calculate (offered when recorded, not now)"]


async def test_a_changed_tool_schema_is_reported_as_drift(tmp_path: Path) -> None:
    module = tmp_path / "shouting.py"
    module.write_text('def shout(text: str) -> str:\n    """Upper-case text."""\n    return text.upper()\n')
    manifest = make_agent(tmp_path, extra="local_tools: ['shouting:shout']\n")
    write_cases(tmp_path, """\
cases:
  - name: shouts
    input: 'shout {"text": "hi"}'
    expect: {tools: [shout], answer: {contains: HI}}
""")
    assert (await run(manifest, "record"))["shouts"].status == "passed"
    module.write_text('def shout(text: str, times: int = 1) -> str:\n    """Upper-case text."""\n'
                      '    return text.upper() * times\n')
    forget_modules({module})  # as a new process would, read the module again
    result = (await run(manifest, "replay"))["shouts"]
    assert result.status == "drift"
    assert result.differences == ["schema changed: shout"]


async def test_a_missing_cassette_is_an_error_that_says_how_to_record_this_manifest(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, CASES)
    result = (await run(manifest, "replay"))["calculates"]
    assert result.status == "error"
    cassette = tmp_path / "evals" / "cassettes" / "calculates.yaml"
    assert result.differences == [  # no line:col: the file does not exist
        f"{cassette}: no cassette: record one with `mcp-run test {manifest} --record -k calculates`"]


async def test_a_case_with_new_input_is_drift_in_replay(tmp_path: Path, recording: Recording) -> None:
    manifest = copy_of(recording, tmp_path)
    cases = tmp_path / "evals" / "cases.yaml"
    cases.write_text(cases.read_text().replace('"6*7"}\'', '"6*8"}\''))
    result = (await run(manifest, "replay"))["calculates"]
    assert result.status == "drift"
    assert "conversation before model call 1 differs" in result.differences[0]


def test_cassettes_are_readable_yaml(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "evals" / "cassettes" / "calculates.yaml")
                          .read_text())
    assert data["case"] == "calculates"
    assert data["tool_calls"] == [{"name": "notes__calculate", "args": {"expression": "6*7"},
                                   "content": "42", "error": False}]
    assert data["model_calls"][0]["system"].startswith("You are notes-assistant.")


async def test_a_saved_chat_thread_runs_as_a_case_and_catches_a_broken_prompt(tmp_path: Path) -> None:
    # The whole loop without Python: chat, /save, record, break the prompt, see it, fix it.
    manifest = make_agent(tmp_path)
    with anyio.fail_after(60):
        async with load_agent(manifest) as runtime:
            for text in ('notes__add_note {"title": "milk"}', "notes__list_notes"):
                async for _ in stream_turn(runtime, text):
                    pass
            state = await runtime.graph.aget_state(runtime.config())
    saved = save_case(manifest, "groceries", state.values["messages"], Secrets({}))
    case = yaml.safe_load(saved.read_text())["cases"][0]
    assert case["input"] == ['notes__add_note {"title": "milk"}', "notes__list_notes"]
    assert case["expect"]["tools"] == [{"name": "notes__add_note", "args": {"title": "milk"}},
                                       {"name": "notes__list_notes"}]
    assert (await run(manifest, "record"))["groceries"].status == "passed"
    template = tmp_path / "system.md.j2"
    good = template.read_text()
    template.write_text(good.replace("{% for tool in tools %}", "{% for tool in tools[:1] %}"))
    broken = (await run(manifest, "replay"))["groceries"]
    assert broken.status == "drift" and "prompt changed" in broken.differences[0]
    template.write_text(good)
    assert (await run(manifest, "replay"))["groceries"].status == "passed"


async def test_a_case_s_vars_override_the_manifest_s_for_that_case_only(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path, extra="  vars: {tone: plain}\n")
    (tmp_path / "system.md.j2").write_text("Speak in a {{ vars.tone }} tone.")
    write_cases(tmp_path, """\
cases:
  - name: pirate
    input: hello
    vars: {tone: pirate}
  - name: plain
    input: hello
""")
    await run(manifest, "record", jobs=2)
    cassettes = tmp_path / "evals" / "cassettes"
    systems = {name: yaml.safe_load((cassettes / f"{name}.yaml").read_text())["model_calls"][0]["system"]
               for name in ("pirate", "plain")}
    assert systems == {"pirate": "Speak in a pirate tone.", "plain": "Speak in a plain tone."}


async def test_a_mistyped_tool_or_var_of_a_case_is_a_located_error_before_it_runs(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path, extra="  vars: {tone: plain}\n")
    (tmp_path / "system.md.j2").write_text("Speak in a {{ vars.tone }} tone.")
    cases = write_cases(tmp_path, """\
cases:
  - name: typos
    input: 'notes__calculate {"expression": "6*7"}'
    vars: {tonee: pirate}
    expect:
      tools: [{name: notes__calcualte}]
""")
    result = (await run(manifest))["typos"]
    assert result.status == "error" and result.observed.steps == 0
    assert result.differences == [
        f"{cases}:4:12: cases[0].vars.tonee: prompts.vars has no 'tonee' (did you mean 'tone'?); "
        "a case can only override the vars the manifest declares",
        f"{cases}:6:22: cases[0].expect.tools[0].name: the agent offers no tool 'notes__calcualte' "
        "(did you mean 'notes__calculate'?)",
    ]


async def test_after_a_reload_cases_still_run_with_the_evals_model_template_and_memory(
    tmp_path: Path
) -> None:
    manifest = make_agent(tmp_path, extra="  vars: {tone: plain}\n")
    (tmp_path / "system.md.j2").write_text("Speak in a {{ vars.tone }} tone.")
    write_cases(tmp_path, "cases:\n  - name: pirate\n    input: hello\n    vars: {tone: pirate}\n")
    sessions = EvalSessions("record")
    with anyio.fail_after(RUN_LIMIT):
        async with load_agent(manifest, host=sessions) as runtime:
            manifest.write_text(manifest.read_text().replace("Keeps notes", "Keeps notes well"))
            await reload_runtime(runtime, changed_files={manifest})
            [result] = await run_cases(runtime, cases_of(manifest), sessions)
            checkpointer = runtime.manifest.checkpointer
    assert result.status == "passed" and checkpointer == "memory"
    cassette = yaml.safe_load((tmp_path / "evals" / "cassettes" / "pirate.yaml").read_text())
    assert cassette["model_calls"][0]["system"] == "Speak in a pirate tone."


async def test_a_server_asking_for_input_during_a_case_is_declined_without_waiting(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    asking = TESTS / "mcp_servers" / "asking.py"
    manifest.write_text(manifest.read_text().replace(
        "prompts:\n", f'  asking:\n    command: python\n    args: ["{asking}"]\nprompts:\n'))
    write_cases(tmp_path, """\
cases:
  - name: books
    input: asking__book
    expect:
      tools: [asking__book]
      answer: {contains: "not booked: the user chose decline"}
""")
    results = await run(manifest)
    assert results["books"].status == "passed", results


async def test_approvals_are_answered_as_the_case_says_and_a_mismatch_is_a_difference(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    write_cases(tmp_path, """\
cases:
  - name: answered
    input: ['notes__add_note {"title": "milk"}', 'notes__delete_note {"title": "milk"}',
            'notes__delete_note {"title": "milk"}', 'notes__delete_note {"title": "ghost"}']
    approvals:
      - {tool: notes__delete_note, action: stop}
      - {tool: notes__delete_note, action: deny, reason: keep it}
      - {tool: notes__delete_note, action: edit, args: {title: milk}}
    expect:
      tools: [notes__add_note, {name: notes__delete_note, args: {title: milk}},
              {name: notes__delete_note, args: {title: milk}},
              {name: notes__delete_note, args: {title: milk}}]
      match: strict
      answer: {contains: "deleted note 'milk'"}
  - name: mismatched
    input: 'notes__delete_note {"title": "milk"}'
    approvals: [notes__add_note, notes__delete_note]
  - name: unanswered
    input: ['notes__delete_note {"title": "milk"}', 'notes__delete_note {"title": "milk"}']
    approvals: [{tool: notes__delete_note, action: deny}]
""")
    results = await run(manifest, jobs=1)
    answered = results["answered"]
    assert answered.status == "passed", answered.differences
    statuses = [(call.status, call.result) for call in answered.observed.calls]
    assert statuses[1] == ("success", "")  # stopped at the question: it never ran
    assert statuses[2][0] == "error" and "keep it" in statuses[2][1]
    assert statuses[3] == ("success", "deleted note 'milk'")  # edited: ghost became milk
    mismatched = results["mismatched"]
    assert mismatched.status == "failed" and mismatched.differences[:2] == [
        "approval 1 asks about notes__delete_note; the case answers one about notes__add_note: "
        "the turn was stopped there", "the case answers 2 approvals; 1 was asked"]
    unanswered = results["unanswered"]
    assert unanswered.status == "failed" and unanswered.differences == [
        "approval 2 (of notes__delete_note) is not answered by the case's approvals: the turn was "
        "stopped there"]
