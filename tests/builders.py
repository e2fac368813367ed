"""Agents written into a test's folder, and the one way each mechanism runs the CLI on them.

    path = write_manifest(tmp_path, {"demo": server("demo", timeout="2s")}, model="offline")
    folder = copy_bundled_agent(tmp_path)   # agent.yaml, examples/, prompts/, schemas/, evals/
    result = mcp_run("tools", "agent.yaml", cwd=folder)     # the `mcp-run` a user runs, a process
    result = invoke("validate", str(path))                  # the click command, in this process
    with chat_in_a_terminal(folder) as chat: ...            # the chat in a pseudo-terminal

Each suite passes the top-level settings it cares about (model, defaults, checkpointer, ...);
this module adds only ``version``, a ``name`` and the ``servers``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pexpect
import yaml

if TYPE_CHECKING:
    from click.testing import Result

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SERVERS = TESTS / "mcp_servers"
BUNDLED_AGENT = ("agent.yaml", "examples", "prompts", "schemas", "evals")
MCP_RUN = Path(sys.executable).parent / "mcp-run"  # the console script, as installed
COMMAND_LIMIT = 120.0  # seconds a command may take, servers included, on a busy machine


def server(name: str, *args: str, **settings: Any) -> dict[str, Any]:
    """A manifest entry that starts test server ``name`` (``tests/mcp_servers/<name>.py``) over stdio."""
    return {"command": "python", "args": [str(SERVERS / f"{name}.py"), *args], **settings}


def manifest_document(servers: Mapping[str, Any], *, name: str = "test", **top: Any) -> dict[str, Any]:
    """The manifest as a mapping: ``version``, ``name``, then ``top``, then ``servers``."""
    return {"version": 1, "name": name, **top, "servers": dict(servers)}


def write_manifest(folder: Path, servers: Mapping[str, Any], *, name: str = "test", **top: Any) -> Path:
    """``folder/agent.yaml`` declaring ``servers`` and the top-level settings ``top``; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(manifest_document(servers, name=name, **top), sort_keys=False))
    return path


def copy_bundled_agent(folder: Path) -> Path:
    """The bundled agent (manifest, notes server, templates, schema) copied into ``folder``."""
    for entry in BUNDLED_AGENT:
        source = ROOT / entry
        if source.is_dir():
            shutil.copytree(source, folder / entry)
        else:
            shutil.copy(source, folder / entry)
    return folder


def scripted_model(folder: Path, script: list[Any]) -> dict[str, Any]:
    """The ``model`` entry of the scripted model playing ``script`` (written to ``folder/script.yaml``)."""
    (folder / "script.yaml").write_text(yaml.safe_dump(script))
    return {"id": "scripted", "script": "script.yaml"}


def main_agent_serving_the_bundled_one(folder: Path) -> Path:
    """``folder/agent.yaml``: an offline agent whose one server, ``sub``, is the bundled agent of
    ``folder/sub`` served (``python -m runner serve``): composition, as the README shows it."""
    (folder / "sub").mkdir()
    sub = copy_bundled_agent(folder / "sub") / "agent.yaml"
    return write_manifest(folder, {
        "sub": {"command": "python", "args": ["-m", "runner", "serve", str(sub)], "timeout": "60s"},
    }, name="main", model="offline")


def ask_the_sub_agent_to_delete_a_note(chat: pexpect.spawn) -> None:
    """In the chat of :func:`main_agent_serving_the_bundled_one`: the sub-agent is asked to delete
    the note "ghost", and its approval, relayed, is answered up to the question "Allow it?"."""
    asked = json.dumps({"message": '/call notes__delete_note {"title": "ghost"}'})
    chat.sendline(f"sub__ask {asked}")
    chat.expect(r"\[sub\] asks: The agent wants to call the tool notes__delete_note")
    chat.expect(r"\[a\]nswer / \[d\]ecline / \[c\]ancel: ")
    chat.sendline("a")
    chat.expect(r"Allow it\? \(yes or no; required\): ")


def asking_agent(folder: Path, *, legacy: bool, checkpointer: str = "memory", **settings: Any) -> Path:
    """The offline agent of the server that asks the user (``tests/mcp_servers/asking.py``)."""
    asking = server("asking", *(["--legacy"] if legacy else []), **{"timeout": "20s", **settings})
    return write_manifest(folder, {"asking": asking}, name="asking", model="offline",
                          checkpointer=checkpointer)


def mcp_run(*args: str, cwd: Path = ROOT, env: Mapping[str, str | None] | None = None,
            timeout: float = COMMAND_LIMIT) -> subprocess.CompletedProcess[str]:
    """``mcp-run ARGS`` run to its end in ``cwd``, stdin empty; ``env`` changes this process's
    environment (a ``None`` value removes the variable)."""
    environment = {**os.environ, **(env or {})}
    return subprocess.run([str(MCP_RUN), *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          stdin=subprocess.DEVNULL,
                          env={key: value for key, value in environment.items() if value is not None})


def invoke(*args: str, env: Mapping[str, str | None] | None = None, cwd: Path | None = None) -> Result:
    """``mcp-run ARGS`` through click's test runner, in this process (no ``mcp-run`` process is
    started: the import of LangGraph and the SDK is paid once per worker, not per command), in
    ``cwd`` if given. Under pytest, log records (the runner's warnings) go to pytest's log capture,
    not to ``result.stderr``: a test about them runs :func:`mcp_run`."""
    from click.testing import CliRunner

    from runner.cli import main

    with contextlib.chdir(cwd or os.getcwd()):
        return CliRunner(env=env).invoke(main, list(args), prog_name="mcp-run", catch_exceptions=False)


def await_announcement(process: subprocess.Popen[str], pattern: re.Pattern[str], *, limit: float,
                       silent: str, exited: str) -> tuple[re.Match[str], queue.Queue[str]]:
    """The match of ``pattern`` in the first stderr line of ``process`` that has it (``mcp-run serve``
    or ``web`` announcing its address), and the queue its later stderr lines come in (an empty
    line: the end). Fails with ``silent`` when no line comes for ``limit`` seconds, with ``exited``
    and the exit code when the process ends first; both messages carry the lines seen."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_lines, args=(process.stderr, lines), daemon=True).start()
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=limit)
        except queue.Empty:
            raise AssertionError(f"{silent}; stderr: {seen}") from None
        if not line and process.poll() is not None:
            raise AssertionError(f"{exited} with {process.returncode}; stderr: {seen}")
        seen.append(line)
        if match := pattern.search(line):
            return match, lines


def _read_lines(stream: Any, into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put("")  # the end of the output


@contextmanager
def chat_in_a_terminal(agent_dir: Path, *options: str,
                       env: dict[str, str] | None = None) -> Iterator[pexpect.spawn]:
    """The chat of ``agent_dir/agent.yaml`` in a pseudo-terminal, at its first prompt; /exit at the end."""
    chat = pexpect.spawn(sys.executable, ["-m", "runner", "agent.yaml", *options], cwd=str(agent_dir),
                         encoding="utf-8", timeout=60, dimensions=(40, 200), env=env)
    try:
        chat.expect("/help for commands")
        chat.expect("> ")
        yield chat
        chat.sendline("/exit")
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)


class JsonChat:
    """``mcp-run agent.yaml --json`` in ``cwd``: JSON lines in on stdin, events read as they come."""

    def __init__(self, cwd: Path, *options: str) -> None:
        self.process = subprocess.Popen([str(MCP_RUN), "agent.yaml", "--json", *options], cwd=cwd, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.events.put(json.loads(line))

    def send(self, value: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((value if isinstance(value, str) else json.dumps(value)) + "\n")
        self.process.stdin.flush()

    def wait_for(self, kind: str) -> dict[str, Any]:
        while True:
            event = self.events.get(timeout=60)
            self.seen.append(event)
            if event["type"] == kind:
                return event
