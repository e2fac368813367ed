"""The README's "Context management" example runs as written, offline, on the bundled notes
server: its shell block, then ``/context`` in the chat on the same thread, as the README shows it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from builders import COMMAND_LIMIT, MCP_RUN, ROOT, copy_bundled_agent


def section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("\n## Context management\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.timeout(COMMAND_LIMIT * 3)  # six runs of mcp-run, each starting the notes server
def test_the_readmes_context_example_runs_as_written(tmp_path: Path) -> None:
    folder = copy_bundled_agent(tmp_path)
    script = re.search(r"^```bash\n(.*?)^```", section(), re.MULTILINE | re.DOTALL)
    assert script is not None
    environment = {**os.environ, "PATH": f"{MCP_RUN.parent}{os.pathsep}{os.environ['PATH']}"}
    ran = subprocess.run(["bash", "-eo", "pipefail", "-c", script[1]], cwd=folder, env=environment,
                         capture_output=True, text=True, timeout=COMMAND_LIMIT * 2,
                         stdin=subprocess.DEVNULL)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    answers = [line for line in ran.stdout.splitlines() if not line.startswith("{")]
    assert answers == [f"notes__calculate returned: {n * n}" for n in (1, 2, 3)]
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    assert len(events) == 2  # the last command's, grepped: its two model steps
    assert all(e["type"] == "context" and e["action"] == "trim" and e["limit"] == 550 and e["tokens"] <= 550
               and e["whole"] > 550 and e["left_out"] > 0 for e in events)
    chat = subprocess.run([str(MCP_RUN), "long.yaml", "--thread", "long"], cwd=folder, input="/context\n",
                          capture_output=True, text=True, timeout=COMMAND_LIMIT)
    assert chat.returncode == 0, chat.stdout + chat.stderr
    shown = re.search(r"^> /context\n(context: .*)$", section(), re.MULTILINE)
    assert shown is not None
    # The same line, whatever the counts (they follow the notes server's tool descriptions).
    pattern = re.sub(r"\d[\d,]*", r"\\d[\\d,]*", re.escape(shown[1]))
    line = re.search(pattern, chat.stdout)
    assert line is not None, chat.stdout
    assert "of 16 messages sent" in line[0]
