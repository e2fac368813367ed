#!/usr/bin/env bash
# Install the pinned third-party MCP servers into folders this project controls:
#   tests/thirdparty/node_modules  (npm servers)
#   tests/thirdparty/.venv         (PyPI servers, apart from the runner's own environment)
# Idempotent: a second run with nothing changed does no network work.
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -f node_modules/.installed ] || [ package.json -nt node_modules/.installed ]; then
    npm install --no-package-lock --no-audit --no-fund --loglevel=error
    touch node_modules/.installed
fi

if [ ! -f .venv/.installed ] || [ requirements.txt -nt .venv/.installed ]; then
    python3 -m venv .venv
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
    touch .venv/.installed
fi

# An MCP server over websocket: the SDK 1.x still ships one (2.x dropped it), in its own venv.
if [ ! -f .venv-ws/.installed ] || [ requirements-ws.txt -nt .venv-ws/.installed ]; then
    python3 -m venv .venv-ws
    .venv-ws/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-ws.txt
    touch .venv-ws/.installed
fi
