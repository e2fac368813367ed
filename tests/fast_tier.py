"""The fast tier, ``pytest -m fast``: quick feedback while editing, under a minute on 2 cores.

Its tests are those of the files listed in FAST_FILES, files whose tests start no process and no
network service. A listed test that starts one anyway (a subprocess, a fork, a listening socket)
is stopped at that call and fails, so the tier cannot silently grow slow: move the test, or take
its file off the list. With ``-m fast`` the other files are not even collected (importing them is
most of the time collection takes).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent
FAST_MARK = "fast"
FAST_FILES = frozenset({
    "test_errors_tree.py",
    "test_redaction.py",
    "test_import_contract.py",
    "agent/test_graph.py",
    "agent/test_handoffs_graph.py",
    "agent/test_team_overheads.py",
    "agent/test_structured_answers.py",
    "agent/test_context_window.py",
    "authoring/test_config_command.py",
    "cli/test_chat_forms.py",
    "cli/test_chat_status.py",
    "cli/test_chat_view.py",
    "cli/test_turn_media.py",
    "cli/test_validate_every_problem.py",
    "evals/test_evals_cases.py",
    "manifest/test_model_calls_spec.py",
    "models/test_retry_rules.py",
    "evals/test_evals_matching.py",
    "evals/test_evals_agent_matching.py",
    "hosting/test_callers_parts.py",
    "models/test_pricing.py",
    "prompts/test_prompts_commands.py",
    "prompts/test_prompts_messages.py",
    "prompts/test_prompts_system.py",
    "servers/test_servers_flood_limits.py",
    "servers/test_servers_listings.py",
    "servers/test_servers_translation.py",
    "tools/test_tools_arguments.py",
    "tools/test_tools_asking.py",
    "tools/test_tools_content.py",
    "tools/test_tools_naming.py",
    "store/test_sqlite_growth.py",
    "tools/test_tools_policy.py",
    "tools/test_tools_ranking.py",
    "tools/test_tools_schemas.py",
    "hosting/test_a2a_answers.py",
    "web/test_web_gate.py",
    "web/test_web_turn_response.py",
    "web/test_web_history.py",
    "web/test_mcp_apps_parts.py",
    "agent/test_agent_models.py",
})


class ProcessStarted(RuntimeError):
    """A test of the fast tier started a process or a network service."""


def _in_fast_tier(path: Path) -> bool:
    try:
        return path.resolve().relative_to(TESTS_DIR).as_posix() in FAST_FILES
    except ValueError:
        return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if config.getoption("markexpr") != FAST_MARK or not collection_path.is_file():
        return None
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return not _in_fast_tier(collection_path)
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _in_fast_tier(item.path):
            item.add_marker(FAST_MARK)


@pytest.fixture(autouse=True)
def starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In the fast tier, starting a process or listening on a socket raises and fails the test."""
    if request.node.get_closest_marker(FAST_MARK) is None:
        yield
        return
    attempts: list[str] = []

    def refuse(what: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            attempts.append(what)
            raise ProcessStarted(f"the fast tier starts no {what} (tests/fast_tier.py)")
        return refused

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse("process"))
    monkeypatch.setattr(os, "fork", refuse("process"))
    monkeypatch.setattr(os, "posix_spawn", refuse("process"))
    monkeypatch.setattr(os, "posix_spawnp", refuse("process"))
    monkeypatch.setattr(socket.socket, "listen", refuse("network service"))
    yield
    if attempts:
        pytest.fail(f"a test of the fast tier started a {attempts[0]}: take its file off "
                    "FAST_FILES in tests/fast_tier.py, or make it start none")
