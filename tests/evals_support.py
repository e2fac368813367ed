"""A small agent in a temporary folder for the ``mcp-run test`` tests: the bundled notes server
over stdio, the offline model, the bundled system template."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio

from runner.evals.cases import Case, find_case_files, load_cases
from runner.evals.running import CaseResult, RunOptions, run_suite

ROOT = Path(__file__).resolve().parent.parent
RUN_LIMIT = 90  # seconds: a whole suite, servers included, on a busy machine


def make_agent(folder: Path, *, model: str = "offline", extra: str = "", tools: str = "") -> Path:
    shutil.copy(ROOT / "prompts" / "system.md.j2", folder / "system.md.j2")
    manifest = folder / "agent.yaml"
    manifest.write_text(f"""\
version: 1
name: notes-assistant
description: Keeps notes and does arithmetic.
model: {model}
servers:
  notes:
    command: python
    args: ["{ROOT / 'examples' / 'notes_server.py'}"]
    env: {{NOTES_FILE: "{folder / 'notes.json'}"}}
    required: true
    tools: {{approve: [delete_note]{tools}}}
prompts:
  system: system.md.j2
{extra}""")
    return manifest


def write_cases(folder: Path, text: str, name: str = "cases.yaml") -> Path:
    (folder / "evals").mkdir(exist_ok=True)
    path = folder / "evals" / name
    path.write_text(text)
    return path


def cases_of(manifest: Path) -> list[Case]:
    return load_cases(find_case_files(manifest))


async def run(manifest: Path, mode: str = "live", **options: object) -> dict[str, CaseResult]:
    with anyio.fail_after(RUN_LIMIT):
        results = await run_suite(manifest, cases_of(manifest), RunOptions(mode=mode, **options))
    return {result.name: result for result in results}
