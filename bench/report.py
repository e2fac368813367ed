"""The run as a Markdown table (with the goals) or as JSON with every round's raw numbers."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from bench.harness import CaseResult, Goal, Settings
from bench.stats import Metrics


def ordered(results: list[CaseResult]) -> list[CaseResult]:
    """Rows by their number ("1.", "4a."), then as first declared; each row's cases together, in
    the order the suites declared them (the adapters' paths after mcp-run's)."""
    first_seen: dict[str, int] = {}
    for index, result in enumerate(results):
        first_seen.setdefault(result.case.row, index)
    return sorted(results, key=lambda result: (result.case.row.partition(".")[0],
                                               first_seen[result.case.row]))


def describe(key: str, metrics: Metrics) -> str:
    """A case's median metrics in one cell."""
    if key == "p50_ms":
        text = f"p50 {metrics['p50_ms']:,.2f} ms · p99 {metrics['p99_ms']:,.2f} ms"
        if "in_process_p50_ms" in metrics:  # row 7a: against in-process turns timed between its own
            text += (f" · overhead {metrics['overhead_ms']:,.2f} ms over the in-process p50 of "
                     f"{metrics['in_process_p50_ms']:,.2f} ms timed alongside")
        if "plain_p50_ms" in metrics:  # row 10a: against plain tool-call turns timed between its own
            text += (f" · overhead {metrics['overhead_ms']:,.2f} ms over the plain tool call's turn "
                     f"p50 of {metrics['plain_p50_ms']:,.2f} ms timed alongside")
        return text
    if key == "calls_per_s":
        return f"{metrics['calls_per_s']:,.0f} calls/s"
    if key == "turns_per_s":  # rows 7b, 7c: each call is a whole served turn
        return f"{metrics['turns_per_s']:,.0f} turns/s"
    if key == "overhead_ms":
        text = (f"{metrics['overhead_ms']:,.1f} ms (turn p50 {metrics['turn_p50_ms']:,.1f} − "
                f"tool call p50 {metrics['tool_p50_ms']:,.1f})")
        if "overhead_ratio" in metrics:  # row 12: against the off turns timed in pairs with its own
            text += (f" · {times(metrics['overhead_ratio'])} the {metrics['floor_overhead_ms']:,.1f} ms "
                     "of the off turns timed in pairs with these")
        return text
    if key == "build_ms":
        return (f"build {metrics['build_ms']:,.0f} ms (first {metrics['first_build_ms']:,.0f}) · "
                f"peak RSS {metrics['peak_rss_mb']:,.0f} MB (after imports "
                f"{metrics['baseline_rss_mb']:,.0f} MB) · {metrics['tools']:,.0f} tools")
    if key == "kb_per_turn":  # row 9
        return (f"{metrics['kb_per_turn']:,.2f} kB per turn over {metrics['turns']:,.0f} turns (the "
                f"second half added {metrics['storage_growth']:.2f}× the first half's) · "
                f"{metrics['first_ms']:,.1f} ms per turn over the first tenth, "
                f"{metrics['last_ms']:,.1f} ms over the last")
    if key == "call_p50_ms" and "ceiling_ratio" in metrics:  # row 10b's bound
        return (f"call p50 {metrics['call_p50_ms']:,.2f} ms · p99 {metrics['call_p99_ms']:,.2f} ms · "
                f"timed alongside: in process {metrics['in_process_p50_ms']:,.2f} ms, composed "
                f"{metrics['composed_p50_ms']:,.2f} ms · with the in-process call at this floor, "
                f"at most {times(metrics['ceiling_ratio'])} faster than composed · without a subgraph "
                f"(the tool step calling the model) {metrics['no_subgraph_p50_ms']:,.2f} ms")
    if key == "call_p50_ms":  # row 10b: the call alone, and the processes its setup runs
        return (f"call p50 {metrics['call_p50_ms']:,.2f} ms · p99 {metrics['call_p99_ms']:,.2f} ms · "
                f"{metrics['bench_servers']:.0f} benchmark server process(es), "
                f"{metrics['serve_processes']:.0f} mcp-run serve")
    if key == "kb_per_thread":  # row 13c
        return (f"{metrics['kb_per_thread']:,.1f} kB of resident memory per thread over "
                f"{metrics['threads']:,.0f} threads (+{metrics['rss_growth_mb']:,.1f} MB to "
                f"{metrics['rss_mb']:,.0f} MB) · database {metrics['db_kb_per_thread']:,.1f} kB per thread")
    if key == "kb_per_request":
        return (f"{metrics['kb_per_request']:,.1f} kB per request (largest {metrics['max_kb']:,.1f} kB, "
                f"{metrics['requests']:.0f} requests)")
    text = f"{metrics[key]:,.1f} ms"
    if "build_ms" in metrics and "list_ms" in metrics:
        text += f" (list {metrics['list_ms']:,.1f} + build {metrics['build_ms']:,.1f})"
    if "from_call_start_ms" in metrics:  # row 6c: the ratio is of the first figure
        text += (f" from the announcement (the ratio's); {metrics['from_call_start_ms']:,.1f} ms "
                 "from the call's start")
    return text


def floors(results: list[CaseResult]) -> set[tuple[str, str]]:
    """The (row, path) of every case another case is compared with."""
    return {(result.case.row, result.case.floor) for result in results if result.case.floor}


def ratio_cell(result: CaseResult, summary: Metrics, is_floor: bool) -> str:
    if is_floor:
        return "1.00 (floor)"
    if "ratio" not in summary:
        return "—"
    ratio_goals = [goal for goal in result.case.goals if goal.metric == "ratio" and not goal.percent]
    return shown_value(ratio_goals[0], summary["ratio"]) if ratio_goals else times(summary["ratio"])


def times(ratio: float) -> str:
    """A ratio to its floor; small ones (a share of the floor) with the digits that tell them apart."""
    return f"{ratio:.2f}×" if ratio >= 0.1 else f"{ratio:.4f}×"


def shown_value(goal: Goal, value: float) -> str:
    if goal.percent:
        return f"{value * 100:.2f}% of the floor"
    if goal.metric == "ratio":
        shown = times(value)
        # Rounded to the limit ("1.00×" for 0.996): with the digits that show which side it is on.
        return f"{value:.4f}×" if shown == times(goal.limit) and value != goal.limit else shown
    if goal.metric in ("storage_growth", "overhead_ratio"):  # rows 9 and 12: one against another
        return times(value)
    if goal.metric == "kb_per_thread":  # row 13c
        return f"{value:,.2f} kB"
    return f"{value:,.2f}{' MB' if goal.metric.endswith('_mb') else ' ms'}"


def per_round(goal: Goal, result: CaseResult) -> str:
    """The ratio of each round beside their median: how far apart they are says how much to trust
    a verdict near the limit."""
    if goal.metric == "overhead_ratio" and len(result.rounds) >= 2:  # row 12: its own pairs' ratio
        return f", rounds {' / '.join(shown_value(goal, metrics[goal.metric]) for metrics in result.rounds)}"
    if goal.metric != "ratio" or len(result.ratios) < 2:
        return ""
    return f", rounds {' / '.join(shown_value(goal, ratio) for ratio in result.ratios)}"


def goal_cell(result: CaseResult) -> str:
    cells = []
    for goal, _value, met in result.goal_outcomes():
        mark = "—" if met is None else ("met" if met else "**missed**")
        cells.append(f"{goal.text}: {mark}")
    return "; ".join(cells)


def markdown(results: list[CaseResult], environment: dict[str, Any]) -> str:
    lines = [
        "# mcp-run benchmark",
        "",
        ", ".join(f"{key}: {value}" for key, value in environment.items()),
        "",
        "Medians over rounds; × floor is the median of the per-round ratios to the floor measured "
        "in the same round (throughput: higher is better, everything else: lower is better).",
        "",
        "| row | path | result (median) | × floor | goal |",
        "|---|---|---|---|---|",
    ]
    previous_row = None
    compared_with = floors(results)
    for result in ordered(results):
        summary = result.summary()
        row = result.case.row if result.case.row != previous_row else ""
        previous_row = result.case.row
        lines.append(f"| {row} | {result.case.path} | {describe(result.case.key, summary)} | "
                     f"{ratio_cell(result, summary, (result.case.row, result.case.path) in compared_with)}"
                     f" | {goal_cell(result)} |")
    lines += ["", "## Goals", ""]
    for result in ordered(results):
        for goal, value, met in result.goal_outcomes():
            verdict = "MET" if met else "MISSED"
            shown = "n/a" if value is None else shown_value(goal, value)
            where = f"{result.case.row} / {result.case.path}"
            lines.append(f"- {verdict}: {goal.text} — measured {shown}{per_round(goal, result)} ({where})")
    return "\n".join(lines) + "\n"


def as_json(results: list[CaseResult], environment: dict[str, Any], settings: Settings) -> str:
    document = {
        "environment": environment,
        "settings": asdict(settings),
        "results": [
            {
                "row": result.case.row,
                "path": result.case.path,
                "key": result.case.key,
                "floor": result.case.floor,
                "summary": result.summary(),
                "rounds": result.rounds,
                "ratios": result.ratios,
                "seconds": result.seconds,
                "goals": [
                    {"text": goal.text, "metric": goal.metric, "limit": goal.limit, "better": goal.better,
                     "value": value, "met": met}
                    for goal, value, met in result.goal_outcomes()
                ],
            }
            for result in ordered(results)
        ],
    }
    return json.dumps(document, indent=2) + "\n"
