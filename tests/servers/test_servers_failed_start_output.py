"""A required server that cannot start is reported in one located line: nothing else reaches
stderr, not even asyncio's complaints about children spawned while start-up was being cancelled."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

RUNS = 4
SPAWNING = 12  # servers still spawning when the required one fails


def test_a_failed_required_start_prints_only_the_located_error(tmp_path: Path) -> None:
    servers: dict[str, dict] = {"broken": {"command": "mcp-run-no-such-command", "required": True}}
    for index in range(SPAWNING):
        servers[f"idle{index}"] = {"command": "python", "args": ["-c", "import time; time.sleep(30)"]}
    document = {"version": 1, "name": "failing", "model": "offline", "servers": servers}
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(document))
    for _ in range(RUNS):
        result = subprocess.run([sys.executable, "-m", "runner", "call", "agent.yaml", "anything"],
                                capture_output=True, text=True, timeout=120, cwd=tmp_path,
                                stdin=subprocess.DEVNULL)
        assert result.returncode == 1
        assert result.stderr.strip().splitlines() == [
            "error: broken: command not found: 'mcp-run-no-such-command'"
        ], result.stderr
