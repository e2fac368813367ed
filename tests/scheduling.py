"""The order test files are handed to the workers: the longest first, the fast tier last.

scripts/test.sh gives whole files to workers (``--dist loadfile``) in collection order
(``--no-loadscope-reorder``). Started last, one long file keeps a worker busy while the others sit
idle, which on two cores made the run minutes longer; started first, it overlaps with the many short
files, and the fast tier's small files fill in at the end. The list is by measured run time, longest
first (a full run's per-file totals); a file missing from it only runs in collection order.
"""

from __future__ import annotations

import pytest
from fast_tier import FAST_FILES, TESTS_DIR

LONGEST_FIRST = (
    "test_bench_smoke.py",
    "auth/test_auth.py",
    "cli/test_chat_editor.py",
    "cli/test_cli_commands.py",
    "test_readme_commands.py",
    "tools/test_hostile_schemas.py",
    "cli/test_closed_output.py",
    "evals/test_evals_cli.py",
    "telemetry/test_telemetry.py",
    "agent/test_team.py",
    "hosting/test_serve_lifecycle.py",
    "tools/test_tools_catalog.py",
    "servers/test_isolation_containers.py",
    "web/test_mcp_apps_page.py",
    "web/test_web_page.py",
    "web/test_mcp_apps_browser.py",
    "cli/test_cli_chat.py",
    "cli/test_agent_cli.py",
    "tools/test_tool_search.py",
    "agent/test_reload.py",
    "evals/test_evals_running.py",
    "cli/test_elicitation_cli.py",
    "hosting/test_serve_malformed.py",
)
_RANK = {name: rank for rank, name in enumerate(LONGEST_FIRST)}


def _file_rank(item: pytest.Item) -> tuple[int, int]:
    try:
        name = item.path.relative_to(TESTS_DIR).as_posix()
    except ValueError:
        return (1, 0)
    if name in _RANK:
        return (0, _RANK[name])
    return (2, 0) if name in FAST_FILES else (1, 0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A stable sort: each file's tests keep their order, and so do the files of one rank.
    items.sort(key=_file_rank)
