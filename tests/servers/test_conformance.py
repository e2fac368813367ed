"""The official MCP conformance suite, client mode, against the runner's server layer.

Every client scenario of both spec versions runs (tests/conformance/client.py drives
``runner.servers.open_fleet``). A failure not in tests/conformance/baseline.yaml fails the test, and
so does a baselined scenario that now passes: remove its entry. The suite is installed on demand
(tests/conformance/install.sh), so this never skips.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conformance import suite


@pytest.fixture(scope="module")
def scenarios() -> dict[str, tuple[str, ...]]:
    suite.ensure_installed()
    return suite.client_scenarios()


def test_every_non_oauth_client_scenario_belongs_to_a_spec_version_we_run(
    scenarios: dict[str, tuple[str, ...]],
) -> None:
    uncovered = [
        name
        for name, versions in scenarios.items()
        if not name.startswith("auth/") and not set(versions) & set(suite.SPEC_VERSIONS)
    ]
    assert uncovered == [], "add their spec versions to suite.SPEC_VERSIONS"


def test_every_baseline_entry_names_a_scenario_we_run_and_gives_a_one_line_reason(
    scenarios: dict[str, tuple[str, ...]],
) -> None:
    baseline = suite.load_baseline()
    run = {name for name, versions in scenarios.items() if set(versions) & set(suite.SPEC_VERSIONS)}
    assert sorted(set(baseline) - run) == []
    assert [name for name, reason in baseline.items() if not reason or "\n" in reason] == []


@pytest.mark.timeout(300)  # typically under a minute; a hang ends here
def test_the_runner_passes_the_conformance_suite_except_for_its_baseline(
    scenarios: dict[str, tuple[str, ...]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = suite.load_baseline()
    unexpected: list[str] = []
    stale: list[str] = []
    passed = total = 0
    lines = []
    for version in suite.SPEC_VERSIONS:
        names = [name for name, versions in scenarios.items() if version in versions]
        outcomes = suite.run_suite(version, names, tmp_path / version)
        version_passed = sum(outcome.passed for outcome in outcomes.values())
        passed, total = passed + version_passed, total + len(outcomes)
        lines.append(f"conformance {version}: {version_passed} passed / {len(outcomes)} total")
        for outcome in outcomes.values():
            if not outcome.passed and outcome.scenario not in baseline:
                unexpected.append(f"{version} {outcome.scenario}: " + "; ".join(outcome.problems))
            if outcome.passed and outcome.scenario in baseline:
                stale.append(f"{version} {outcome.scenario}")
    lines.append(f"conformance: {passed} passed / {total} total")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert unexpected == [], "failures not in tests/conformance/baseline.yaml"
    assert stale == [], "now passing: remove these from tests/conformance/baseline.yaml"
