"""Results for people (a table and each failure's first difference), for programs (JSON) and for
CI servers (JUnit XML, the format Jenkins, GitLab and GitHub test reporters read)."""

from __future__ import annotations

import json
import re
import socket
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from runner.evals.matching import describe_call, excerpt
from runner.evals.running import CaseResult

STYLES = {"passed": "green", "failed": "red", "drift": "yellow", "error": "red"}
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    """Text XML can hold: a model's or a tool's control characters would make the file invalid."""
    return _NOT_XML.sub("\ufffd", text)


def totals(results: list[CaseResult]) -> dict[str, int]:
    counts = Counter(result.status for result in results)
    return {status: counts.get(status, 0) for status in ("passed", "failed", "drift", "error")}


def summary_line(results: list[CaseResult]) -> str:
    counts = totals(results)
    parts = [f"{count} {status}" for status, count in counts.items() if count]
    seconds = sum(result.seconds for result in results)
    return f"{len(results)} case{'s' if len(results) != 1 else ''}: {', '.join(parts) or 'none run'}" \
           f" ({seconds:.2f} s of case time{spent_summary(results)})"


def spent_summary(results: list[CaseResult]) -> str:
    """``, 2,310 tokens, $0.0010``: what the cases' models reported; cost unknown when a case's
    was (never a guess)."""
    spent = [result.observed.usage for result in results if result.observed.usage is not None]
    if not spent:
        return ""
    tokens = sum(usage["total_tokens"] for usage in spent)
    costs = [usage["cost"] for usage in spent]
    known = all(cost is not None for cost in costs) and not any(usage["unpriced_steps"] for usage in spent)
    money = f"${sum(cost or 0 for cost in costs):.4f}" if known else "cost unknown"
    return f", {tokens:,} tokens, {money}"


def _cost_cell(result: CaseResult) -> str:
    usage = result.observed.usage
    if usage is None:
        return ""
    if usage["cost"] is None:
        return "unknown"
    return f"${usage['cost']:.4f}" + ("+?" if usage["unpriced_steps"] else "")


def print_results(console: Console, results: list[CaseResult]) -> None:
    """The table, then the first difference of each case that did not pass."""
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    numbers = ("steps", "tool calls", "tokens", "cost", "time")
    for column in ("case", "result", *numbers):
        table.add_column(column, justify="right" if column in numbers else "left")
    for result in results:
        usage = result.observed.usage
        table.add_row(Text(result.name), Text(result.status, style=STYLES[result.status]),
                      str(result.observed.steps), str(len(result.observed.calls)),
                      "" if usage is None else f"{usage['total_tokens']:,}", _cost_cell(result),
                      f"{result.seconds:.2f}s")
    console.print(table)
    for result in results:
        if result.status == "passed" and result.verdict is None:
            continue
        if result.status != "passed":
            console.print(Text(f"\n{result.name} ({result.status}): ", style=STYLES[result.status])
                          + Text(result.differences[0] if result.differences else ""))
            if result.status == "failed":
                made = ", ".join(describe_call(call) for call in result.observed.calls) or "none"
                console.print(Text(f"  tool calls: {made}"))
                if result.observed.agents:
                    console.print(Text(f"  agents: {', '.join(result.observed.agents)}"))
                console.print(Text(f"  answer: {excerpt(result.observed.answer)!r}"))
        if result.verdict is not None:
            verdict = "pass" if result.verdict.passed else "fail"
            console.print(Text(f"  judge ({result.name}): {verdict}: {result.verdict.reasoning}"))
    console.print(Text(summary_line(results)), style="bold")


def results_json(results: list[CaseResult]) -> dict[str, Any]:
    return {
        "totals": totals(results),
        "cases": [
            {
                "name": result.name,
                "file": str(result.case.file),
                "status": result.status,
                "seconds": round(result.seconds, 3),
                "steps": result.observed.steps,
                "tool_calls": [
                    {"name": call.name, "args": call.args, "status": call.status}
                    for call in result.observed.calls
                ],
                "answer": result.observed.answer,
                "agents": result.observed.agents,
                "usage": result.observed.usage,
                "differences": result.differences,
                "judge": None if result.verdict is None else
                {"passed": result.verdict.passed, "reasoning": result.verdict.reasoning},
            }
            for result in results
        ],
    }


def json_report(results: list[CaseResult]) -> str:
    return json.dumps(results_json(results), indent=2, default=str)


def junit_xml(results: list[CaseResult], *, suite: str) -> bytes:
    """One ``testsuite`` in a ``testsuites`` root; a failed check is a ``failure``, drift and
    runtime problems are ``error``s (the case could not be judged)."""
    counts = totals(results)
    seconds = f"{sum(result.seconds for result in results):.3f}"
    failures, errors = str(counts["failed"]), str(counts["drift"] + counts["error"])
    root = ET.Element("testsuites", name="mcp-run test", tests=str(len(results)), failures=failures,
                      errors=errors, time=seconds)
    element = ET.SubElement(root, "testsuite", name=suite, tests=str(len(results)), failures=failures,
                            errors=errors, skipped="0", time=seconds,
                            timestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
                            hostname=socket.gethostname() or "localhost")
    for result in results:
        case = ET.SubElement(element, "testcase", name=result.name,  # a case name is plain
                             classname=f"{suite}.{Path(result.case.file).stem}",
                             time=f"{result.seconds:.3f}")
        if result.status == "passed":
            continue
        tag = "failure" if result.status == "failed" else "error"
        first = result.differences[0] if result.differences else result.status
        detail = ET.SubElement(case, tag, message=_xml(first), type=result.status)
        detail.text = _xml("\n".join(result.differences))
        output = ET.SubElement(case, "system-out")
        output.text = _xml(result.observed.answer)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
