"""Usage and budgets from the command line: `-p` (its exit code at a limit), `--json`, the chat's
line after a turn and `/usage`, the README's example as written, and `validate`'s warning."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from builders import (
    COMMAND_LIMIT,
    ROOT,
    copy_bundled_agent,
    invoke,
    scripted_model,
    server,
    write_manifest,
)

CALCULATE = 'notes__calculate {"expression": "2+3"}'


def usage_turn(text: str, tokens_in: int, tokens_out: int, **more: Any) -> dict[str, Any]:
    return {"text": text, "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}, **more}


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_the_readme_budget_example_runs_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Usage, cost and budgets\n", 1)[1].split("\n## ", 1)[0]
    manifest, commands = re.findall(r"^```(?:yaml|sh)\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    folder = copy_bundled_agent(tmp_path)
    (folder / "budget.yaml").write_text(manifest)
    lines = [line.split("  #", 1)[0].strip() for line in commands.splitlines() if line.startswith("mcp-run ")]
    assert len(lines) == 2
    first_args, second_args = (shlex.split(line.removeprefix("mcp-run ")) for line in lines)  # as bash would
    first = invoke(*first_args, cwd=folder)
    assert first.exit_code == 0, first.stderr
    usage = [event for event in events_of(first.stdout) if event["type"] == "usage"]
    assert len(usage) == 2 and usage[-1]["turn"]["tool_calls"] == 1
    assert usage[-1]["turn"]["cost"] > 0  # the offline model's counts at the manifest's prices
    second = invoke(*second_args, cwd=folder)
    assert second.exit_code == 0, second.stderr
    assert "notes__calculate returned: 5" in second.stdout
    # the refusal the README quotes, from the same agent with no tool call left
    document = yaml.safe_load(manifest)
    document["limits"]["per_turn"]["max_tool_calls"] = 0
    (folder / "budget.yaml").write_text(yaml.safe_dump(document))
    refused = invoke("budget.yaml", "-p", CALCULATE, cwd=folder)
    assert refused.exit_code == 1, refused.stderr
    assert ("I stopped: this turn reached its limit of 0 tool calls (limits.per_turn.max_tool_calls)."
            in refused.stdout)


def test_p_exits_1_at_a_limit_with_a_limit_event_and_the_answer_naming_it(tmp_path: Path) -> None:
    script = [{"tool_calls": [{"name": "demo__add", "args": {"a": 1, "b": 2}}],
               "usage": {"input_tokens": 900, "output_tokens": 200}}]
    write_manifest(tmp_path, {"demo": server("demo")}, model=scripted_model(tmp_path, script),
                   checkpointer="memory", limits={"per_turn": {"max_tokens": 1000}})
    result = invoke("agent.yaml", "-p", "add", "--json", cwd=tmp_path)
    assert result.exit_code == 1, result.stderr
    events = events_of(result.stdout)
    assert [event["type"] for event in events][-2:] == ["limit", "final"]
    assert events[-2]["limit"] == "max_tokens" and events[-2]["spent"] == 1100
    assert events[-1]["reason"] == "limit"
    assert "Traceback" not in result.stderr


def test_the_chat_shows_what_a_turn_spent_and_usage_shows_the_threads_totals(tmp_path: Path) -> None:
    script = [usage_turn("one", 1000, 100, model="openai:gpt-4.1-mini"),
              usage_turn("two", 2000, 200, model="openai:gpt-4.1-mini")]
    write_manifest(tmp_path, {}, model=scripted_model(tmp_path, script), checkpointer="memory")
    lines = "".join(json.dumps({"text": text}) + "\n" for text in ("a", "b", "/usage"))
    result = subprocess.run([sys.executable, "-m", "runner", "agent.yaml", "--json"], input=lines,
                            capture_output=True, text=True, cwd=tmp_path, timeout=COMMAND_LIMIT)
    assert result.returncode == 0, result.stderr
    [totals] = [event for event in events_of(result.stdout) if event["type"] == "usage_totals"]
    assert totals["total"]["total_tokens"] == 3300 and totals["total"]["model_steps"] == 2
    assert totals["total"]["cost"] == round((3000 * 0.4 + 300 * 1.6) / 1e6, 8)
    assert set(totals["agents"]) == {"main"}


def test_the_chat_on_a_terminal_prints_the_turns_usage_after_its_answer(tmp_path: Path) -> None:
    script = [usage_turn("one", 1000, 100, model="ollama:llama3.1")]
    write_manifest(tmp_path, {}, model=scripted_model(tmp_path, script), checkpointer="memory")
    result = subprocess.run([sys.executable, "-m", "runner", "agent.yaml"], input="hello\n/usage\n",
                            capture_output=True, text=True, cwd=tmp_path, timeout=COMMAND_LIMIT)
    assert result.returncode == 0, result.stderr
    assert "turn: 1,100 tokens (1,000 in, 100 out) · cost unknown · 0 tool calls" in result.stdout
    assert re.search(r"thread \w+: 1,100 tokens \(1,000 in, 100 out\) · cost unknown", result.stdout)


def test_validate_warns_at_a_cost_limit_over_a_model_with_no_known_price(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, {}, model="offline", limits={"per_thread": {"max_cost": 1}})
    result = invoke("validate", str(path))
    assert result.exit_code == 0
    assert re.search(r"agent\.yaml:\d+:\d+: limits\.per_thread\.max_cost: warning: no price is known "
                     r"for model 'offline'", result.output), result.output
    priced = write_manifest(tmp_path, {}, model={"id": "offline", "pricing": {
        "input_per_mtok": 1, "output_per_mtok": 2}}, limits={"per_thread": {"max_cost": 1}})
    assert "max_cost" not in invoke("validate", str(priced)).output


def test_validate_locates_a_bad_limit_and_a_bad_price(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, {}, model={"id": "offline", "pricing": {"input_per_mtok": -1,
                                                                             "output_per_mtok": 1}},
                          limits={"per_turn": {"max_tokns": 5}})
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    assert re.search(r"agent\.yaml:\d+:\d+: model\.pricing\.input_per_mtok: .*greater than or equal to 0",
                     result.output), result.output
    assert re.search(r"agent\.yaml:\d+:\d+: limits\.per_turn\.max_tokns: .*max_tokens", result.output), \
        result.output


def test_config_shows_the_limits_and_prices_with_where_each_comes_from(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, {}, model={"id": "offline", "pricing": {
        "input_per_mtok": 1, "output_per_mtok": 2}}, limits={"per_turn": {"max_duration": "2m"}})
    result = invoke("config", str(path))
    assert result.exit_code == 0, result.output
    assert re.search(r"input_per_mtok: 1\.0  # manifest \S*agent\.yaml:\d+:\d+", result.output)
    assert re.search(r"max_duration: 120s  # manifest \S*agent\.yaml:\d+:\d+", result.output)
    assert "max_cost: null  # built-in" in result.output


def rejected_answers_script(folder: Path, *, last: Any) -> None:
    """An agent with ``output: {retries: 1}`` scripted to call a tool (100/10 tokens), answer an
    invalid object (200/20), then ``last`` (300/30)."""
    script = [{"tool_calls": [{"name": "demo__add", "args": {"a": 1, "b": 2}}],
               "usage": {"input_tokens": 100, "output_tokens": 10}},
              {"output": {"n": "three"}, "usage": {"input_tokens": 200, "output_tokens": 20}},
              {**last, "usage": {"input_tokens": 300, "output_tokens": 30}}]
    write_manifest(folder, {"demo": server("demo")}, model=scripted_model(folder, script),
                   checkpointer="memory",
                   output={"schema": {"type": "object", "properties": {"n": {"type": "integer"}},
                                      "required": ["n"]}, "retries": 1})


def test_each_rejected_structured_answer_is_a_step_with_its_own_usage_event_when_the_turn_fails(
        tmp_path: Path) -> None:
    rejected_answers_script(tmp_path, last={"text": "nope"})
    result = invoke("agent.yaml", "-p", "add", "--json", cwd=tmp_path)
    assert result.exit_code == 1, result.stderr
    usage = [event for event in events_of(result.stdout) if event["type"] == "usage"]
    assert [event["step"]["total_tokens"] for event in usage] == [110, 220, 330]
    assert usage[-1]["turn"]["total_tokens"] == 660 and usage[-1]["turn"]["model_steps"] == 3
    assert usage[-1]["thread"]["total_tokens"] == 660


def test_an_answer_accepted_after_a_retry_reports_each_attempt_as_its_own_step(tmp_path: Path) -> None:
    rejected_answers_script(tmp_path, last={"output": {"n": 3}})
    result = invoke("agent.yaml", "-p", "add", "--json", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    usage = [event for event in events_of(result.stdout) if event["type"] == "usage"]
    assert [event["step"]["total_tokens"] for event in usage] == [110, 220, 330]
    assert [event["turn"]["model_steps"] for event in usage] == [1, 2, 3]
    assert usage[-1]["thread"]["total_tokens"] == 660


def test_usage_counts_the_steps_of_a_turn_failed_by_rejected_structured_answers(tmp_path: Path) -> None:
    rejected_answers_script(tmp_path, last={"text": "nope"})
    lines = "".join(json.dumps({"text": text}) + "\n" for text in ("add", "/usage"))
    result = subprocess.run([sys.executable, "-m", "runner", "agent.yaml", "--json"], input=lines,
                            capture_output=True, text=True, cwd=tmp_path, timeout=COMMAND_LIMIT)
    assert "does not match output.schema" in result.stdout, result.stderr
    [totals] = [event for event in events_of(result.stdout) if event["type"] == "usage_totals"]
    assert totals["total"]["total_tokens"] == 660 and totals["total"]["model_steps"] == 3


def test_a_turn_resumed_after_an_approval_keeps_counting_its_totals_from_before_the_question(
        tmp_path: Path) -> None:
    script = [{"tool_calls": [{"name": "demo__add", "args": {"a": 1, "b": 2}}],
               "usage": {"input_tokens": 500, "output_tokens": 50}},
              usage_turn("three", 500, 12)]
    write_manifest(tmp_path, {"demo": server("demo", tools={"approve": ["add"]})},
                   model=scripted_model(tmp_path, script), checkpointer="memory")
    lines = json.dumps({"text": "add"}) + "\n" + json.dumps({"action": "approve"}) + "\n"
    result = subprocess.run([sys.executable, "-m", "runner", "agent.yaml", "--json"], input=lines,
                            capture_output=True, text=True, cwd=tmp_path, timeout=COMMAND_LIMIT)
    assert result.returncode == 0, result.stderr
    events = events_of(result.stdout)
    assert "approval" in [event["type"] for event in events]
    last = [event for event in events if event["type"] == "usage"][-1]
    assert last["thread"]["total_tokens"] == 1062
    assert last["turn"]["total_tokens"] == 1062 and last["turn"]["model_steps"] == 2
    assert last["turn"]["tool_calls"] == 1
