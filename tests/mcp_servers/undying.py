"""The demo server, but one that outlives the end of its input: once stdin closes it ignores SIGTERM
and keeps running, however its input ended (like servers that never watch stdin). Only SIGKILL ends it."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LINGER = 300.0  # seconds it stays after its input ends: far beyond any test's wait

if __name__ == "__main__":
    from mcp_servers import demo
    from mcp_servers._serve import main

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        main(demo.build, sys.argv[1:])
    finally:  # however its input ended (closed, broken)
        time.sleep(LINGER)
