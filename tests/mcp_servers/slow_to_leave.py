"""The demo server, but slow to leave: once its input ends it takes LINGER seconds before it exits
(as servers that flush, close connections or tear down a large runtime do). It exits by itself
within the grace its client gives it after closing stdin."""

from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LINGER = 1.9  # seconds: with anything more to do before its own exit, a client waiting 2 s gives up

if __name__ == "__main__":
    from mcp_servers import demo
    from mcp_servers._serve import main

    try:
        main(demo.build, sys.argv[1:])
    finally:  # however its input ended (closed, broken)
        time.sleep(LINGER)
