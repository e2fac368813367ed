"""Running cases: each on its own thread, in parallel, over one runtime (one fleet of servers).

    results = await run_suite(Path("agent.yaml"), cases, RunOptions(mode="replay"))

Live runs use the manifest's model and servers; ``record`` does the same and writes each case's
cassette; ``replay`` starts no server and builds no model. ``watch_suite`` runs the cases again
whenever the manifest, a template, a named module or a case file changes, reconciling the
running servers the way watch mode does.
"""

from __future__ import annotations

import fnmatch
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import anyio
from langgraph.types import Command

from runner.agent.reload import reload_runtime
from runner.agent.runtime import Runtime, load_agent
from runner.agent.spending import thread_totals, totals
from runner.agent.turns import stream_turn
from runner.agent.watching import WatchedFiles, watch_changes
from runner.errors import CassetteDrift, CassetteMissing, ManifestError, RunnerError
from runner.evals.case_sessions import EvalSessions, Mode
from runner.evals.cases import ApprovalAnswer, Case
from runner.evals.cassettes import Cassette, Verdict, read_cassette, write_cassette
from runner.evals.judge import grade
from runner.evals.matching import Observation, ObservedCall, expectation_differences
from runner.evals.replay import listing_of, listings_of, replay_servers
from runner.events import ApprovalAsked, FinalAnswer, UsageTotals
from runner.manifest.agents import handoff_tool_names
from runner.models.builtin import scripts_from_the_start

Status = Literal["passed", "failed", "drift", "error"]
DEFAULT_JOBS = 4


@dataclass(frozen=True)
class RunOptions:
    mode: Mode = "live"
    model_id: str | None = None
    jobs: int = DEFAULT_JOBS
    environ: Mapping[str, str] | None = None


@dataclass(frozen=True)
class CaseResult:
    """How one case went; ``differences[0]`` is the first difference the report shows."""

    case: Case
    status: Status
    seconds: float
    observed: Observation = field(default_factory=Observation)
    differences: list[str] = field(default_factory=list)
    verdict: Verdict | None = None

    @property
    def name(self) -> str:
        return self.case.name


def select_cases(cases: list[Case], patterns: str | Sequence[str] | None) -> list[Case]:
    """Cases whose name matches any of ``patterns``: contains it, or matches it as a glob
    (``add-*``). No pattern selects every case."""
    if isinstance(patterns, str):
        patterns = [patterns]
    if not patterns:
        return cases
    return [case for case in cases if any(_matches(case.name, pattern) for pattern in patterns)]


def _matches(name: str, pattern: str) -> bool:
    if any(char in pattern for char in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name


async def run_suite(manifest_path: Path, cases: list[Case], options: RunOptions) -> list[CaseResult]:
    """Start the agent once and run ``cases`` over it."""
    sessions = EvalSessions(options.mode, model_id=options.model_id, environ=options.environ)
    cassettes: dict[str, Cassette | RunnerError] = {}
    extra: dict[str, Any] = {}
    if options.mode == "replay":
        for case in cases:
            try:
                cassettes[case.name] = read_cassette(case.cassette_path, manifest_path)
            except (ManifestError, CassetteMissing) as exc:
                cassettes[case.name] = exc
        found = [c for c in cassettes.values() if isinstance(c, Cassette)]
        extra["open_servers"] = replay_servers(listings_of(found))
    async with load_agent(manifest_path, environ=options.environ, host=sessions, **extra) as runtime:
        return await run_cases(runtime, cases, sessions, jobs=options.jobs, cassettes=cassettes)


async def run_cases(
    runtime: Runtime,
    cases: list[Case],
    sessions: EvalSessions,
    *,
    jobs: int = DEFAULT_JOBS,
    cassettes: Mapping[str, Cassette | RunnerError] | None = None,
) -> list[CaseResult]:
    """Run ``cases`` at most ``jobs`` at a time; results in the order of ``cases``."""
    limiter = anyio.CapacityLimiter(max(1, jobs))
    results: list[CaseResult | None] = [None] * len(cases)

    async def run_one(index: int, case: Case) -> None:
        async with limiter:
            results[index] = await run_case(runtime, case, sessions, (cassettes or {}).get(case.name))

    async with anyio.create_task_group() as group:
        for index, case in enumerate(cases):
            group.start_soon(run_one, index, case)
    return [result for result in results if result is not None]


async def run_case(
    runtime: Runtime, case: Case, sessions: EvalSessions, cassette: Cassette | RunnerError | None
) -> CaseResult:
    began = time.perf_counter()
    if isinstance(cassette, ManifestError):
        return CaseResult(case, "error", 0.0, differences=[str(p) for p in cassette.problems])
    if isinstance(cassette, RunnerError):
        return CaseResult(case, "error", 0.0, differences=[str(cassette)])
    manifest = runtime.manifest  # agents are called as tools, and models hand the conversation over
    offered = {*runtime.catalog.entries, *manifest.agents,
               *handoff_tool_names(manifest.agents, manifest.agent.handoffs)}
    if cassette is not None:  # a tool offered when recorded but gone now is drift, not a typo
        offered.update(name for call in cassette.model_calls for name in call.tools)
    mistakes = case.problems_against(runtime.manifest.prompts.vars, offered, runtime.manifest.agents)
    if mistakes:  # said before running: a typo would otherwise be a silent mismatch
        return CaseResult(case, "error", 0.0, differences=[str(p) for p in mistakes])
    recording: Cassette | None = None
    now = cassette.now if cassette is not None else None
    if sessions.mode == "record":
        # UTC: a zone name would not survive the round trip through the file on another machine.
        now = datetime.now(UTC).replace(microsecond=0)
        listings = {key: listing_of(connection) for key, connection in runtime.fleet.connections.items()
                    if connection.status != "failed"}
        recording = Cassette(case=case.name, now=now, servers=listings)
    thread_id = f"eval-{case.name}-{uuid.uuid4().hex[:8]}"
    run = sessions.start(case, thread_id, cassette or recording, now)
    calls: list[ObservedCall] = []
    finals: list[FinalAnswer] = []  # each final answer as it came: the last one is the case's answer
    agents: list[str] = []  # each run of an agent of agents:, in the order they started
    verdict: Verdict | None = None
    status: Status
    approvals = CaseApprovals(case.spec.approvals)
    try:
        with scripts_from_the_start():  # a scripted model plays each case from its first turn
            for text in case.spec.input:
                run.begin_turn()
                await _run_turn(runtime, text, thread_id, calls, finals, approvals, agents)
        if run.drift is not None:
            raise CassetteDrift(run.drift)
        observed = _observation(calls, finals, agents=agents)
        differences = approvals.differences() + expectation_differences(case.spec.expect, observed)
        if case.spec.judge is not None:
            verdict = await _verdict(runtime, case, cassette, observed)
            if not verdict.passed:
                differences.append(f"the judge failed the case: {verdict.reasoning}")
        status = "failed" if differences else "passed"
    except CassetteDrift as exc:
        status, differences = "drift", [str(exc)]  # the status already says drift
    except RunnerError as exc:
        status, differences = "error", [f"{type(exc).__name__}: {exc}"]
    finally:
        sessions.runs.pop(thread_id, None)
    observed = _observation(calls, finals, run.model_calls, await _spent(runtime, thread_id), agents)
    result = CaseResult(case, status, time.perf_counter() - began, observed, differences, verdict)
    if recording is not None and status in ("passed", "failed"):
        write_cassette(case.cassette_path, recording.model_copy(update={"judge": verdict}), sessions.secrets)
    return result


def _observation(calls: list[ObservedCall], finals: list[FinalAnswer], steps: int = 0,
                 usage: UsageTotals | None = None, agents: list[str] | None = None) -> Observation:
    last = finals[-1] if finals else None
    return Observation(calls, last["text"] if last else "", steps, last.get("output") if last else None,
                       usage, list(agents or []))


async def _spent(runtime: Runtime, thread_id: str) -> UsageTotals | None:
    """What the case's thread spent, from its checkpoint (None: no model step reported any)."""
    state = await runtime.graph.aget_state(runtime.config(thread_id))
    usage = state.values.get("usage")
    return totals(thread_totals(usage)) if usage else None


class CaseApprovals:
    """The case's answers to the approvals asked while it runs, taken in order; without
    ``approvals`` in the case, every call is approved (a case runs unattended)."""

    def __init__(self, answers: list[ApprovalAnswer] | None) -> None:
        self.answers = answers
        self.asked = 0
        self.problems: list[str] = []

    def answer(self, approval: ApprovalAsked) -> ApprovalAnswer:
        """The answer to ``approval``; ``stop`` (the call does not run) when the case has none
        for it, or its answer is about another tool: that is a difference."""
        self.asked += 1
        if self.answers is None:
            return ApprovalAnswer(tool=approval["tool"])
        if self.asked > len(self.answers):
            self.problems.append(f"approval {self.asked} (of {approval['tool']}) is not answered by "
                                 "the case's approvals: the turn was stopped there")
            return ApprovalAnswer(tool=approval["tool"], action="stop")
        answer = self.answers[self.asked - 1]
        if answer.tool != approval["tool"]:
            self.problems.append(f"approval {self.asked} asks about {approval['tool']}; the case "
                                 f"answers one about {answer.tool}: the turn was stopped there")
            return ApprovalAnswer(tool=approval["tool"], action="stop")
        return answer

    def differences(self) -> list[str]:
        unused = len(self.answers or []) - self.asked
        if unused > 0:
            verb = "was" if self.asked == 1 else "were"
            return [*self.problems, f"the case answers {len(self.answers or [])} approvals; "
                    f"{self.asked} {verb} asked"]
        return list(self.problems)


async def _run_turn(runtime: Runtime, text: str, thread_id: str, calls: list[ObservedCall],
                    finals: list[FinalAnswer], approvals: CaseApprovals, agents: list[str]) -> None:
    """One user message, its tool calls, final answers and agent runs added to ``calls``,
    ``finals`` and ``agents`` as they come; each approval answered as ``approvals`` says (an
    edited call is observed with the arguments it ran with)."""
    message: str | Command = text
    positions: dict[str, int] = {}
    while True:
        approval: ApprovalAsked | None = None
        async for event in stream_turn(runtime, message, thread_id=thread_id):
            if event["type"] == "tool_call":
                positions[event["id"]] = len(calls)
                calls.append(ObservedCall(event["name"], dict(event["args"])))
            elif event["type"] == "tool_result" and event["id"] in positions:
                index = positions[event["id"]]
                call = calls[index]
                calls[index] = ObservedCall(call.name, call.args, event["status"] or "success", event["text"])
            elif event["type"] == "final":
                finals.append(event)
            elif event["type"] == "agent":
                agents.append(event["agent"])
            elif event["type"] == "approval":
                approval = event
        if approval is None:
            return
        answer = approvals.answer(approval)
        if answer.action == "stop":  # as Ctrl-C at the question: the turn ends, the call not run
            return
        if answer.args is not None and approval["id"] in positions:
            index = positions[approval["id"]]
            calls[index] = ObservedCall(calls[index].name, dict(answer.args))
        message = Command(resume=answer.resume())


async def _verdict(runtime: Runtime, case: Case, cassette: Cassette | None,
                   observed: Observation) -> Verdict:
    assert case.spec.judge is not None
    if cassette is not None:  # replaying
        if cassette.judge is None:
            raise CassetteDrift("the recording has no judge verdict; record the case again")
        return cassette.judge
    return await grade(case.spec.judge, runtime.manifest.model, runtime.loaded.base_dir,
                       list(case.spec.input), observed)


# --------------------------------------------------------------------------- watch


async def watch_suite(
    manifest_path: Path,
    load_cases: Callable[[], list[Case]],
    case_folders: set[Path],
    options: RunOptions,
    report: Callable[[list[CaseResult] | RunnerError], Any],
    *,
    stop: anyio.Event,
    watching: Callable[[], Any] | None = None,
) -> None:
    """Run the cases, then again after every relevant edit, until ``stop`` is set.

    ``load_cases`` reads the case files again each time; an invalid case file or manifest is
    reported and the last good agent keeps running. ``watching`` is called now and then while
    the files are being watched (tests wait on it before editing).
    """
    sessions = EvalSessions("live", model_id=options.model_id, environ=options.environ)
    async with load_agent(manifest_path, environ=options.environ, host=sessions) as runtime:

        async def run_all() -> None:
            try:
                cases = load_cases()
            except ManifestError as exc:
                report(exc)
                return
            report(await run_cases(runtime, cases, sessions, jobs=options.jobs))

        await run_all()
        while not stop.is_set():
            files = runtime.files
            changes = watch_changes(WatchedFiles(files, case_folders=case_folders),
                                    debounce=runtime.manifest.watch.debounce, stop=stop, on_idle=watching)
            async with aclosing(changes):
                async for changed in changes:
                    if changed & files:
                        try:
                            await reload_runtime(runtime, changed_files=changed)
                        except RunnerError as exc:  # the last good agent keeps running
                            report(exc)
                            continue
                    await run_all()
                    break  # the files to watch may have changed: watch the new set
