#!/usr/bin/env bash
# Install everything the test suite needs into project folders, then run it.
# Usage: bash scripts/test.sh [pytest args…]
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

# Third-party MCP servers used by the interop tests, pinned, in project-controlled folders.
bash tests/thirdparty/install.sh
# The official MCP conformance suite (and the Node.js it needs), for the client conformance test.
bash tests/conformance/install.sh

status=0
.venv/bin/python -m pytest -q -p no:cacheprovider "$@" || status=$?
# pytest exits 5 when it collected no tests: that is a failure of the suite, not a pass.
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests" >&2
fi
exit "$status"
