#!/usr/bin/env bash
# Install everything the test suite needs into project folders, then run it.
# Usage: bash scripts/test.sh [pytest args…]
set -euo pipefail
cd "$(dirname "$0")/.."

# System tools of the isolation tests: bubblewrap (sandbox) and docker.io (a daemon the tests start
# on a socket of their own); of the scale-out tests: postgresql and haproxy (started from temporary
# folders by tests/services.py); of the web interface's tests: chromium (driven by Playwright, launched
# by its path: no browser download). apt-get update runs once, and only when something is missing.
missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v dockerd >/dev/null || missing+=(docker.io)
compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || missing+=(postgresql)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v chromium >/dev/null || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
    if command -v apt-get >/dev/null && [ "$(id -u)" -eq 0 ]; then
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
    else
        echo "missing ${missing[*]}: install them (the tests that need them are skipped, saying why)" >&2
    fi
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

# Lint and type checks first (seconds; config in pyproject.toml): a finding fails the run.
.venv/bin/ruff check runner tests bench
.venv/bin/mypy

# Third-party MCP servers used by the interop tests, pinned, in project-controlled folders.
bash tests/thirdparty/install.sh
# The official MCP conformance suite (and the Node.js it needs), for the client conformance test.
bash tests/conformance/install.sh

# Three workers on the 2 cores: a test spends much of its time waiting on server subprocesses, and two
# left the cores a third idle. Whole files to one worker so module fixtures are shared, longest first
# (tests/scheduling.py orders them; xdist's own reordering, by test count, would undo that).
# MCP_RUN_TEST_WORKERS=0 runs in one process.
workers="${MCP_RUN_TEST_WORKERS:-3}"
parallel=()
if [ "$workers" != "0" ]; then
    parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
fi
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider "${parallel[@]}" "$@" || status=$?
# pytest exits 5 when it collected no tests: that is a failure of the suite, not a pass.
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests" >&2
fi
exit "$status"
