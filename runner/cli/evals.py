"""``mcp-run test FILE [CASE_FILES…]``: run the agent's cases and report them.

Exit codes: 0 every case passed, 1 a case failed (or drifted from its cassette, or could not
run), 2 invalid case files, manifest or arguments.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import anyio
import click

from runner.agent.checks import model_id_problem
from runner.cli import EXIT_FAILURE, EXIT_INVALID, EXIT_OK, main, reports_errors, stderr, stdout
from runner.cli.closed_output import stop_when_output_closes
from runner.errors import ManifestError, RunnerError
from runner.evals.case_sessions import Mode
from runner.evals.cases import (
    CASES_FOLDER,
    Case,
    find_case_files,
    load_cases,
    manifest_case_problems,
    other_manifest_problems,
    shared_name_problems,
    with_manifest_problems,
)
from runner.evals.report import json_report, junit_xml, print_results
from runner.evals.running import DEFAULT_JOBS, CaseResult, RunOptions, run_suite, select_cases, watch_suite
from runner.manifest.loading import load_manifest


@main.command(name="test")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("case_files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("-k", "patterns", metavar="PATTERN", multiple=True,
              help="Only cases whose name contains PATTERN (or matches it as a glob); "
              "repeated, a case matching any of them.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=DEFAULT_JOBS, show_default=True,
              metavar="N", help="Cases run at the same time.")
@click.option("--model", "model_id", metavar="ID", help="Run the cases against this model id instead.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--junit", "junit", type=click.Path(dir_okay=False), help="Write JUnit XML to this file.")
@click.option("--record", is_flag=True, help="Run live and write each case's cassette.")
@click.option("--replay", is_flag=True, help="Run from the cassettes: no model, no servers.")
@click.option("--watch", is_flag=True, help="Run again whenever the agent or a case file changes.")
@reports_errors
def test(file: str, case_files: tuple[str, ...], patterns: tuple[str, ...], jobs: int, model_id: str | None,
         as_json: bool, junit: str | None, record: bool, replay: bool, watch: bool) -> None:
    """Run the cases in evals/ next to FILE (or CASE_FILES) against the agent of FILE."""
    if record and replay:
        raise click.UsageError("--record and --replay exclude each other")
    if watch and (record or replay):
        raise click.UsageError("--watch runs live: it cannot --record or --replay")
    if replay and model_id:
        raise click.UsageError("--replay uses no model: --model does not apply")
    if model_id and (problem := model_id_problem(model_id)):
        raise click.BadParameter(problem, param_hint="'--model'")
    manifest = Path(file)
    paths = [Path(p) for p in case_files] or find_case_files(manifest)
    if not paths:
        others = " (those there name another manifest: 'manifest:')" if find_case_files(
            manifest, every=True) else ""
        stderr.print(f"no case files for {manifest.name}: add YAML files to {manifest.parent / CASES_FOLDER}/"
                     f"{others} or name them", style="red", markup=False)
        sys.exit(EXIT_INVALID)
    mode: Mode = "record" if record else "replay" if replay else "live"
    options = RunOptions(mode=mode, model_id=model_id, jobs=jobs)

    def chosen() -> list[Case]:
        # What the cases expect that the manifest cannot give, before a server starts (read again
        # each time: under --watch the manifest may have changed); with the case files' own problems.
        try:
            every = load_cases(paths)
        except ManifestError as exc:
            try:
                checked = load_manifest(manifest).manifest
            except ManifestError as invalid:  # both are said
                raise ManifestError(exc.problems + invalid.problems) from None
            raise with_manifest_problems(exc, paths, checked) from None
        if problems := other_manifest_problems(manifest, every) + shared_name_problems(manifest, every) \
                + manifest_case_problems(every, load_manifest(manifest).manifest):
            raise ManifestError(problems)
        cases = select_cases(every, patterns)
        if not cases:
            raise ManifestError([])  # reported as "no case matches" by the caller
        return cases

    def show(results: list[CaseResult]) -> None:
        if as_json:
            click.echo(json_report(results))
        else:
            print_results(stdout, results)
        if junit:
            Path(junit).write_bytes(junit_xml(results, suite=manifest.stem))

    try:
        cases = chosen()
    except ManifestError as exc:
        if exc.problems:
            raise
        stderr.print(f"no case matches {' '.join(f'-k {p!r}' for p in patterns)}", style="red", markup=False)
        sys.exit(EXIT_INVALID)
    if watch:
        anyio.run(partial(_watch, manifest, chosen, {p.parent for p in paths}, options, show))
        return
    results = anyio.run(run_suite, manifest, cases, options)
    show(results)
    sys.exit(EXIT_OK if all(r.status == "passed" for r in results) else EXIT_FAILURE)


async def _watch(manifest: Path, chosen: Callable[[], list[Case]], folders: set[Path],
                 options: RunOptions, show: Callable[[list[CaseResult]], None]) -> None:
    def report(outcome: list[CaseResult] | RunnerError) -> None:
        if isinstance(outcome, list):
            show(outcome)
        elif isinstance(outcome, ManifestError):
            for problem in outcome.problems:
                stderr.print(str(problem), markup=False)
            if not outcome.problems:
                stderr.print("no case matches", style="red")
        else:
            stderr.print(f"error: {outcome}", style="red", markup=False)
        stderr.print("watching for changes (Ctrl-C to stop)", style="dim")

    async with stop_when_output_closes() as output:  # nobody reads the results any more: exit 141
        await watch_suite(manifest, chosen, folders, options, report, stop=anyio.Event())
    output.raise_if_closed()
