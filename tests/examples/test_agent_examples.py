"""The several-agents examples run offline as the README shows them (``examples/agents/``)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from builders import ROOT, mcp_run

EXAMPLES = ROOT / "examples" / "agents"
README_COMMAND = re.compile(r"^mcp-run (examples/agents/\w+\.yaml) -p \"([^\"]+)\"", re.MULTILINE)


def readme_commands() -> list[tuple[str, str]]:
    return README_COMMAND.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def test_the_readme_shows_each_example_once() -> None:
    shown = sorted(path for path, _ in readme_commands())
    assert shown == sorted(f"examples/agents/{p.name}" for p in EXAMPLES.glob("*.yaml"))


def test_the_readme_counts_the_examples_it_shows() -> None:
    counted = re.search(r"^(\w+) examples run offline", (ROOT / "README.md").read_text(encoding="utf-8"),
                        re.MULTILINE)
    assert counted is not None
    numbers = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    assert numbers.index(counted[1].lower()) + 1 == len(readme_commands())


EXPECTED = {
    "research.yaml": ({"researcher": "6*7 is 42.", "writer": "Filed the note 'six times seven'."},
                      ["researcher", "writer"]),
    "router.yaml": ({"desk": "The duplicate charge is refunded; it shows in 3 to 5 days."},
                    ["desk", "billing"]),
    "fanout.yaml": ({"board": "Adopt it for new services only."},
                    ["board", "chair", "economist", "optimist", "skeptic"]),
    "loop.yaml": ({"polish": "Warm bread, warmer mornings."},
                  ["polish", "copywriter", "editor", "copywriter", "editor"]),
    "team.yaml": ({"researcher": "6*7 is 42."}, ["researcher"]),
    "handoff.yaml": ({"handoff_to_billing": "main handed the conversation to billing."}, []),
}
HANDOFFS = {"handoff.yaml": [("main", "billing", "billing")]}  # from, to, and who answers


@pytest.mark.parametrize(("path", "text"), readme_commands(), ids=lambda value: Path(value).stem)
def test_each_example_runs_its_agents_as_the_readme_says(tmp_path: Path, path: str, text: str) -> None:
    # A copy, so the notes the research example files stay out of the repository.
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    result = mcp_run(path, "-p", text, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    answers, agents = EXPECTED[Path(path).name]
    main_results = {e["name"]: e["text"] for e in events if e["type"] == "tool_result" and "agent" not in e}
    assert main_results == answers
    started = [e["agent"] for e in events if e["type"] == "agent"]
    assert started == agents if Path(path).name != "fanout.yaml" else sorted(started) == agents
    assert events[-1]["type"] == "final"
    handed = [(e["from"], e["to"], events[-1].get("agent")) for e in events if e["type"] == "handoff"]
    assert handed == HANDOFFS.get(Path(path).name, [])
