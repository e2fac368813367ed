#!/usr/bin/env bash
# Install the pinned third-party MCP servers into folders this project controls:
#   tests/thirdparty/node_modules  (npm servers)
#   tests/thirdparty/.venv         (PyPI servers, apart from the runner's own environment)
#   tests/thirdparty/.venv-mcp1    (servers built on mcp 1.x, with mcp<2: mcp-proxy, mcp-server-sqlite)
# Idempotent: a second run with nothing changed does no network work.
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -f node_modules/.installed ] || [ package.json -nt node_modules/.installed ]; then
    npm install --no-package-lock --no-audit --no-fund --loglevel=error
    touch node_modules/.installed
fi

install_venv() {  # install_venv FOLDER REQUIREMENTS
    if [ ! -f "$1/.installed" ] || [ "$2" -nt "$1/.installed" ]; then
        python3 -m venv "$1"
        "$1/bin/python" -m pip install --quiet --disable-pip-version-check -r "$2"
        touch "$1/.installed"
    fi
}
install_venv .venv requirements.txt
install_venv .venv-mcp1 requirements-mcp1.txt
