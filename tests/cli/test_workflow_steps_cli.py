"""``-p`` on a terminal (no ``--json``) shows on stderr which agents a workflow's steps run, as it
shows an agent called as a tool, each line escaped like any text from a model (issue #34)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from builders import invoke, write_manifest

REVERSED = "\u202e"  # shows the text after it in reverse order


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def pipeline(folder: Path) -> None:
    scripts = {"main": [call("pipeline", task="Write about tea."), "Done."],
               "drafter": [f"Tea is {REVERSED}good."], "editor": ["Tea is very good."]}
    for name, script in scripts.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(script))
    def scripted(about: str, name: str) -> dict[str, Any]:
        return {"description": about, "model": {"id": "scripted", "script": f"{name}.yaml"}}

    write_manifest(folder, {}, model={"id": "scripted", "script": "main.yaml"}, checkpointer="memory",
                   agent={"agents": ["pipeline"]},
                   agents={"drafter": scripted("Drafts.", "drafter"), "editor": scripted("Edits.", "editor"),
                           "pipeline": {"description": "Drafts, edits.", "chain": ["drafter", "editor"]}})


def test_a_one_shot_turn_names_each_agent_a_chain_runs_on_stderr_after_the_call_that_started_it(
        tmp_path: Path) -> None:
    pipeline(tmp_path)
    result = invoke("agent.yaml", "-p", "go", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "Done."
    lines = result.stderr.splitlines()
    called = lines.index('→ pipeline {"task": "Write about tea."}')
    assert lines[called + 1:called + 3] == ['pipeline: → drafter {"task": "Write about tea."}',
                                            'pipeline: → editor {"task": "Tea is \\u202egood."}']
    assert REVERSED not in result.stderr
    # The agent the main model called is shown once, by its call.
    assert not any(line.startswith("main: ") for line in lines), lines
