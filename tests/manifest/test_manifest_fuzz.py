"""Property-based fuzzing of the loader: whatever the input, loading either succeeds or raises
ManifestError whose every problem has a line, a column and a message; never anything else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from builders import TESTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.errors import ManifestError
from runner.manifest.loading import parse_manifest

CORPUS = sorted((TESTS / "manifests").glob("*/*.yaml"))
FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KEYS = [
    "version", "name", "description", "model", "id", "fallbacks", "params", "base_url",
    "api_key_env", "script", "defaults", "servers", "prompts", "system", "vars", "mcp", "agent",
    "max_steps", "tool_separator", "checkpointer", "watch", "debounce", "paths", "timeout",
    "startup_timeout", "heartbeat", "interval", "stale_after", "restart", "max_attempts",
    "backoff", "max_backoff", "required", "max_output_chars", "fallback", "expose", "tools",
    "only", "except", "filter", "approve", "rename", "timeouts", "command", "args", "env",
    "env_passthrough", "cwd", "url", "headers", "transport", "type", "local_tools", "resources",
    "server", "as", "arguments", "on_fallback", "time", "git", "web", "x-anchor",
]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=True),
    st.sampled_from(["30s", "500ms", "-1s", "2m", "stdio", "http", "sse", "http://127.0.0.1/mcp",
                     "${HOME}", "${UNSET_FUZZ_VAR}", "${UNSET_FUZZ_VAR:-d}", "$${x}", "${",
                     "offline", "scripted", "a:b", "memory", "sqlite:///x.db", "", "é✓"]),
    st.text(max_size=20),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), children, max_size=5),
    ),
    max_leaves=25,
)
DOCUMENTS = st.fixed_dictionaries(
    {"version": st.sampled_from([1, 1, 2, "1"]), "name": st.sampled_from(["a", "", 3])},
    optional={key: VALUES for key in KEYS[2:20]}
    | {"servers": st.dictionaries(st.sampled_from(["time", "git", "Web", "a_b", "x"]),
                                  VALUES, max_size=3)},
)


def assert_loads_or_reports_located_problems(text: str | bytes) -> None:
    try:
        parse_manifest(text, file="fuzz.yaml", environ={"HOME": "/home/fuzz"})
    except ManifestError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.file == "fuzz.yaml"
            assert problem.line >= 1 and problem.column >= 1
            assert problem.message


@FUZZ
@given(st.text(max_size=300) | st.binary(max_size=300))
def test_arbitrary_text_never_escapes_as_anything_but_a_manifest_error(text: str | bytes) -> None:
    assert_loads_or_reports_located_problems(text)


@FUZZ
@given(DOCUMENTS)
def test_structured_random_manifests_load_or_report_located_problems(document: Any) -> None:
    assert_loads_or_reports_located_problems(yaml.safe_dump(document, allow_unicode=True))


@FUZZ
@given(
    st.sampled_from(CORPUS),
    st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(["delete", "insert", "dup"]),
                       st.sampled_from(list(":-[]{}&*!|>'\"#% \t\n$x1"))), min_size=1, max_size=6),
)
def test_mutated_corpus_manifests_load_or_report_located_problems(
    path: Path, edits: list[tuple[int, str, str]]
) -> None:
    text = path.read_text()
    for position, action, char in edits:
        at = position % (len(text) + 1)
        if action == "delete":
            text = text[:at] + text[at + 1:]
        elif action == "insert":
            text = text[:at] + char + text[at:]
        else:
            lines = text.splitlines(keepends=True)
            if lines:
                line = lines[position % len(lines)]
                text = text.replace(line, line + line, 1)
    assert_loads_or_reports_located_problems(text)
