#!/usr/bin/env bash
# Install the official MCP conformance suite, and the Node.js it needs (>= 22; the machine's may be
# older), pinned in package.json, into tests/conformance/node_modules. No lock file is written.
# Idempotent: a second run with nothing changed does no network work.
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -f node_modules/.installed ] || [ package.json -nt node_modules/.installed ]; then
    npm install --no-package-lock --no-audit --no-fund --loglevel=error
    node_modules/.bin/node --version >/dev/null  # the pinned Node really runs here
    touch node_modules/.installed
fi
