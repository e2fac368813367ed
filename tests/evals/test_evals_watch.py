"""``mcp-run test --watch``: the cases run again after an edit of a case file or of the agent."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import anyio
from evals_support import make_agent, write_cases

from runner.errors import ManifestError
from runner.evals.cases import load_cases
from runner.evals.running import RunOptions, watch_suite

WATCH_LIMIT = 120  # seconds for the whole conversation with the watcher

CASES = """\
cases:
  - name: calculates
    input: 'notes__calculate {"expression": "6*7"}'
    expect: {tools: [notes__calculate], answer: {contains: "%s"}}
"""


async def test_watch_runs_the_cases_again_after_each_edit(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path)
    case_file = write_cases(tmp_path, CASES % "42")
    outcomes_in, outcomes = anyio.create_memory_object_stream[object](10)
    state = {"watching": anyio.Event()}
    stop = anyio.Event()

    async def edit_when_watching(path: Path, text: str) -> object:
        state["watching"] = anyio.Event()
        await state["watching"].wait()
        await anyio.Path(path).write_text(text)
        return await outcomes.receive()

    def statuses(outcome: object) -> list[str]:
        assert isinstance(outcome, list), outcome
        return [result.status for result in outcome]

    async with anyio.create_task_group() as group:
        group.start_soon(partial(
            watch_suite, manifest, lambda: load_cases([case_file]), {case_file.parent}, RunOptions(),
            outcomes_in.send_nowait, stop=stop, watching=lambda: state["watching"].set()))
        with anyio.fail_after(WATCH_LIMIT):
            assert statuses(await outcomes.receive()) == ["passed"]
            # A case file edit: the cases are read again.
            assert statuses(await edit_when_watching(case_file, CASES % "41")) == ["failed"]
            # An invalid case file is reported; the next good edit runs again.
            invalid = await edit_when_watching(case_file, "cases: [{name: x, inptu: 1}]\n")
            assert isinstance(invalid, ManifestError)
            assert statuses(await edit_when_watching(case_file, CASES % "42")) == ["passed"]
            # A manifest edit is reloaded (the tool is filtered out) before the cases run again.
            text = manifest.read_text().replace("approve: [delete_note]",
                                                "approve: [delete_note], except: [calculate]")
            # The case expects that tool: an error said before running, not a failed run.
            assert statuses(await edit_when_watching(manifest, text)) == ["error"]
        stop.set()
