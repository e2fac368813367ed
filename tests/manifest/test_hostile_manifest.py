"""A manifest path that is not a regular file, or a file past the size limit, is refused at once with
a located error: no more than the limit is read (``/dev/zero`` once grew `validate` to 23 GB) and
a FIFO with no writer is never waited on. Each run that a regression would make read without end,
wait without end or grow without bound is a subprocess under a memory limit and a timeout, so it
fails instead of eating the machine; the others (a file of bounded size, values) run in this process
(``invoke``). Values Python refuses to construct (an integer past its digit limit, a date that does
not exist) are a located error or kept as text, never a traceback."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from builders import invoke

from runner.manifest.loading import MAX_BYTES

LIMIT = 60
MEMORY = 2 * 1024**3  # address space: far above what mcp-run needs, far below /dev/zero read whole


def limited_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def mcp_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runner", *args], capture_output=True, text=True,
                          timeout=LIMIT, cwd=cwd, stdin=subprocess.DEVNULL, preexec_fn=limited_memory)


def fifo(folder: Path) -> str:
    os.mkfifo(folder / "agent.yaml")
    return "it is a FIFO (named pipe), not a regular file"


def zeros(folder: Path) -> str:
    (folder / "agent.yaml").symlink_to("/dev/zero")
    return "it is a character device, not a regular file"


def oversized(folder: Path) -> str:
    (folder / "agent.yaml").write_bytes(b"# " + b"x" * MAX_BYTES + b"\n")
    return f"the manifest is larger than the limit of {MAX_BYTES:,} bytes"


@pytest.mark.parametrize("command", ["validate", "config"])
@pytest.mark.parametrize("make", [fifo, zeros])
def test_what_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, command: str, make: object) -> None:
    assert callable(make)
    words = make(tmp_path)
    result = mcp_run(command, "agent.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith("agent.yaml:1:1: "), result.stderr[-2000:]
    assert words in result.stderr


@pytest.mark.parametrize("command", ["validate", "config"])
def test_a_file_past_the_size_limit_is_refused_at_once(tmp_path: Path, command: str) -> None:
    words = oversized(tmp_path)
    result = invoke(command, "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 2, result.output[-2000:]
    assert result.stderr.startswith("agent.yaml:1:1: "), result.output[-2000:]
    assert words in result.stderr


@pytest.mark.parametrize("command", ["validate", "config"])
def test_an_integer_past_pythons_digit_limit_is_a_located_error(tmp_path: Path, command: str) -> None:
    digits = sys.get_int_max_str_digits() + 1
    (tmp_path / "agent.yaml").write_text("version: 1\nname: big\nmodel: offline\nservers: {}\n"
                                         f"agent: {{max_steps: {'9' * digits}}}\n")
    result = invoke(command, "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 2, result.output[-2000:]
    assert result.stderr.startswith(f"agent.yaml:5:20: agent.max_steps: an integer of {digits:,} digits "
                                    "is past the limit"), result.output[-2000:]


def test_a_date_that_does_not_exist_is_kept_as_text(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text("version: 1\nname: dated\nmodel: offline\nservers: {}\n"
                                         "description: 2024-13-45\n")
    result = invoke("validate", "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 0, result.output[-2000:]


@pytest.mark.parametrize(
    ("template", "refused"),
    [
        ("{{ 'x' * 3000000000 }}", "the template would make a text of 3,000,000,000 characters"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
         "the template's loops ran more than the limit of 1,000,000 steps"),
    ],
)
def test_a_system_template_that_would_exhaust_memory_or_time_is_a_located_error(
    tmp_path: Path, template: str, refused: str
) -> None:
    (tmp_path / "agent.yaml").write_text("version: 1\nname: greedy\nmodel: offline\nservers: {}\n"
                                         "prompts: {system: system.md.j2}\n")
    (tmp_path / "system.md.j2").write_text(f"You help.\n{template}\n")
    result = mcp_run("validate", "agent.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith(f"system.md.j2:2:1: prompts.system: {refused}"), result.stderr[-2000:]
