"""Run the official MCP conformance suite in client mode against ``client.py``; read its results.

The suite (npm ``@modelcontextprotocol/conformance``, pinned in ``package.json``) starts one test
server per scenario, runs the client under test with the server's URL, and writes
``<out>/<scenario>-<timestamp>/{checks.json,stdout.txt,stderr.txt}`` for each scenario.

A scenario passes here when its checks hold no FAILURE and no WARNING (the suite's own rule), at
least one check succeeded, and the client exited 0 (unless the scenario expects the client to
fail). The last two are stricter than the suite's ``--suite`` mode, which ignores the client's exit
status: a client that failed after the handshake would otherwise pass ``initialize``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from conformance.client import EXIT_MARKER

HERE = Path(__file__).resolve().parent
NODE = HERE / "node_modules" / ".bin" / "node"
SUITE_CLI = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = HERE / "baseline.yaml"
CLIENT = HERE / "client.py"

# The spec versions whose client scenarios include non-OAuth ones (the others are OAuth only).
SPEC_VERSIONS = ("2025-06-18", "2025-11-25")
SCENARIO_TIMEOUT_MS = 30_000  # the suite kills a client after this long
SUITE_TIMEOUT = 90.0  # one run of the suite's CLI (a client gets SCENARIO_TIMEOUT_MS of it)
INSTALL_TIMEOUT = 300.0
# Scenarios in which the suite accepts a failing client (``allowClientError`` in the suite 0.1.16).
CLIENT_ERROR_ALLOWED = frozenset({"auth/scope-retry-limit", "auth/resource-mismatch"})
_RESULT_DIR = re.compile(r"^(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
_LISTED = re.compile(r"^\s+- (?P<scenario>\S+) \[(?P<versions>[^\]]*)\]$")


@dataclass(frozen=True)
class Outcome:
    """One scenario's result; ``problems`` is empty when it passed."""

    scenario: str
    problems: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.problems


def ensure_installed() -> None:
    """Run install.sh when the pinned suite or Node is missing (or package.json is newer)."""
    marker = HERE / "node_modules" / ".installed"
    if marker.exists() and marker.stat().st_mtime >= (HERE / "package.json").stat().st_mtime:
        return
    subprocess.run(["bash", str(HERE / "install.sh")], check=True, timeout=INSTALL_TIMEOUT)


def _suite(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run the suite's CLI with the pinned Node; on timeout its whole process group is killed."""
    env = {**os.environ, "NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1"}
    process = subprocess.Popen(
        [str(NODE), str(SUITE_CLI), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # the clients it starts are in this group too
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, output, "")


def client_scenarios() -> dict[str, tuple[str, ...]]:
    """Every client scenario of the suite with the spec versions it belongs to."""
    listing = _suite("list", "--client", timeout=60).stdout
    found = {}
    for line in listing.splitlines():
        if match := _LISTED.match(line):
            found[match["scenario"]] = tuple(v.strip() for v in match["versions"].split(","))
    if not found:
        raise RuntimeError(f"the suite listed no client scenarios:\n{listing}")
    return found


def run_suite(spec_version: str, scenarios: list[str], out_dir: Path) -> dict[str, Outcome]:
    """Run ``scenarios`` (client scenarios of ``spec_version``); the outcome of each.

    The OAuth scenarios run together (the suite runs a suite's scenarios in parallel); the others
    one at a time, so that the timing checks (sse-retry) do not measure a machine busy with a dozen
    clients starting at once.
    """
    for name in scenarios:
        if not name.startswith("auth/"):
            _run_client("--scenario", name, out_dir=out_dir)
    if any(name.startswith("auth/") for name in scenarios):
        _run_client("--suite", "auth", "--spec-version", spec_version, out_dir=out_dir)
    results = {}
    for checks_file in out_dir.rglob("checks.json"):
        match = _RESULT_DIR.match(checks_file.parent.relative_to(out_dir).as_posix())
        if match:
            results[match["scenario"]] = judge(match["scenario"], checks_file.parent)
    return {
        name: results.get(name, Outcome(name, ("the suite wrote no result for it",))) for name in scenarios
    }


def _run_client(*selection: str, out_dir: Path) -> None:
    if " " in sys.executable or " " in str(CLIENT):  # the suite splits the command on spaces
        raise RuntimeError("the suite cannot run a client whose path contains a space")
    run = _suite(
        "client",
        "--command",
        f"{sys.executable} {CLIENT}",
        *selection,
        "--timeout",
        str(SCENARIO_TIMEOUT_MS),
        "-o",
        str(out_dir),
        timeout=SUITE_TIMEOUT,
    )
    if "Results saved to" not in run.stdout:
        raise RuntimeError(f"the suite did not run {selection} (exit {run.returncode}):\n{run.stdout}")


def judge(scenario: str, result_dir: Path) -> Outcome:
    """The outcome recorded in one scenario's result folder."""
    checks = json.loads((result_dir / "checks.json").read_text())
    problems = [
        f"{check['status']} {check['id']}: {check.get('errorMessage') or check.get('description', '')}"
        for check in checks
        if check["status"] in ("FAILURE", "WARNING")
    ]
    if not any(check["status"] == "SUCCESS" for check in checks):
        problems.append("no check succeeded")
    status = client_exit_status(result_dir / "stderr.txt")
    if status != 0 and scenario not in CLIENT_ERROR_ALLOWED:
        problems.append(f"the client exited with status {status}: {last_error(result_dir / 'stderr.txt')}")
    return Outcome(scenario, tuple(problems))


def client_exit_status(stderr_file: Path) -> int | None:
    """The status client.py logged last; None when it logged none (killed, crashed)."""
    lines = stderr_file.read_text().splitlines() if stderr_file.exists() else []
    for line in reversed(lines):
        if EXIT_MARKER in line:
            return int(line.rsplit(EXIT_MARKER, 1)[1])
    return None


def last_error(stderr_file: Path) -> str:
    lines = stderr_file.read_text().splitlines() if stderr_file.exists() else []
    errors = [line for line in lines if " ERROR " in line or line.startswith("Traceback")]
    return errors[-1] if errors else "(no error logged)"


def load_baseline() -> dict[str, str]:
    """Expected failures: scenario name -> the one-line reason it fails."""
    data = yaml.safe_load(BASELINE.read_text()) or {}
    expected = data.get("expected_failures") or {}
    if not isinstance(expected, dict):
        raise ValueError("baseline.yaml: expected_failures must map scenario names to reasons")
    return {str(name): str(reason or "").strip() for name, reason in expected.items()}
