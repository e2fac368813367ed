"""``mcp-run test`` reports what each case spent (tokens, cost), and a case stopped by a budget."""

from __future__ import annotations

import json
import re
from pathlib import Path

from builders import invoke
from evals_support import make_agent, write_cases

MODEL = "{id: offline, pricing: {input_per_mtok: 1000, output_per_mtok: 2000}}"
LIMITS = "limits:\n  per_turn: {max_tool_calls: %d}\n"

CASES = """\
cases:
  - name: adds
    input: 'notes__calculate {"expression": "2+2"}'
    expect: {answer: {contains: "returned: 4"}}
"""


def test_the_report_shows_each_cases_tokens_and_cost_and_the_json_has_its_usage(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path, model=MODEL, extra=LIMITS % 1)
    write_cases(tmp_path, CASES)
    table = invoke("test", str(manifest))
    assert table.exit_code == 0, table.stdout + table.stderr
    row = re.search(r"adds\s+passed\s+2\s+1\s+([\d,]+)\s+\$(\d+\.\d{4})\s", table.stdout)
    assert row is not None, table.stdout
    assert re.search(r"1 case: 1 passed \([\d.]+ s of case time, [\d,]+ tokens, \$\d+\.\d{4}\)", table.stdout)
    done = invoke("test", str(manifest), "--json")
    [case] = json.loads(done.stdout)["cases"]
    usage = case["usage"]
    assert usage["model_steps"] == 2 and usage["tool_calls"] == 1
    assert usage["cost"] == round((usage["input_tokens"] * 1000 + usage["output_tokens"] * 2000) / 1e6, 8)


def test_a_case_whose_turn_hits_a_limit_fails_on_its_expectations_with_the_limit_in_its_answer(
    tmp_path: Path,
) -> None:
    manifest = make_agent(tmp_path, model=MODEL, extra=LIMITS % 0)
    write_cases(tmp_path, CASES)
    done = invoke("test", str(manifest), "--json")
    assert done.exit_code == 1, done.stderr
    [case] = json.loads(done.stdout)["cases"]
    assert case["status"] == "failed"
    assert "limits.per_turn.max_tool_calls" in case["answer"]
    assert case["usage"]["tool_calls"] == 0


def test_a_replayed_case_spends_the_tokens_its_recording_spent(tmp_path: Path) -> None:
    manifest = make_agent(tmp_path, model=MODEL)
    write_cases(tmp_path, CASES)
    recorded = invoke("test", str(manifest), "--record", "--json")
    assert recorded.exit_code == 0, recorded.stdout + recorded.stderr
    [live] = json.loads(recorded.stdout)["cases"]
    assert live["usage"]["total_tokens"] > 0
    replayed = invoke("test", str(manifest), "--replay", "--json")
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr
    [case] = json.loads(replayed.stdout)["cases"]
    assert case["usage"]["total_tokens"] == live["usage"]["total_tokens"]
    assert case["usage"]["input_tokens"] == live["usage"]["input_tokens"]
