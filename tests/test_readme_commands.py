"""Every `mcp-run …` command shown in the README and in the bundled agent.yaml's comments runs as
written on the bundled agent (offline model), placeholders filled in; the few that never end on
their own (watch mode) at least parse to an existing command and options. Every chat command the
README shows exists."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from test_agent_cli import copy_bundled_agent

from runner.cli import main
from runner.manifest import CHAT_COMMANDS

ROOT = Path(__file__).resolve().parent.parent
MCP_RUN = Path(sys.executable).parent / "mcp-run"

# What a placeholder of the README stands for, on the bundled agent (by command, then for all).
PLACEHOLDERS = {
    "call": {"NAME": "notes__calculate", "JSON": '{"expression": "2+3"}'},
    "prompt": {"NAME": "summary", "k=v…": "style=short"},
    None: {"FILE": "agent.yaml", "TEXT": 'notes__calculate {"expression": "2+3"}', "ID": "t1"},
}


def shown_commands() -> list[str]:
    """The text after `mcp-run ` of each command in README.md and agent.yaml comments."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
    prose = re.sub(r"^```[a-z]*\n.*?^```", "", readme, flags=re.MULTILINE | re.DOTALL)
    texts = re.findall(r"`([^`\n]*\bmcp-run [^`\n]*)`", prose)
    texts += [line for block in blocks for line in block.splitlines() if "mcp-run " in line]
    texts += [line for line in (ROOT / "agent.yaml").read_text().splitlines()
              if line.lstrip().startswith("#") and "mcp-run " in line]
    return sorted({text[text.rindex("mcp-run ") + len("mcp-run "):].strip() for text in texts})


def filled_in(command: str) -> list[str]:
    words = [word.strip("[]") if word.startswith("[-") else word for word in shlex.split(command)]
    names = {**PLACEHOLDERS[None], **PLACEHOLDERS.get(words[0], {})}
    return [names.get(word, word) for word in words]


def never_ends(args: list[str]) -> bool:
    return args[0] == "watch" or "--watch" in args


def test_the_readme_and_agent_yaml_show_commands() -> None:
    commands = shown_commands()
    assert any(command.startswith("agent.yaml -p") for command in commands)
    assert {filled_in(command)[0] for command in commands} >= {"validate", "schema", "tools", "call",
                                                               "prompts", "prompt", "watch"}


@pytest.mark.parametrize("command", shown_commands())
def test_a_shown_command_names_an_existing_command_and_options(command: str) -> None:
    args = filled_in(command)
    context = click.Context(main, info_name="mcp-run", **main.context_settings)
    name, chosen, rest = main.resolve_command(context, args)
    assert chosen is not None and not chosen.hidden
    try:
        chosen.make_context(name, list(rest), parent=context)  # raises on an unknown option
    except click.exceptions.Exit as done:  # -h printed the help
        assert done.exit_code == 0


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_bundled_agent(tmp_path_factory.mktemp("bundled"))


@pytest.mark.parametrize("command", [c for c in shown_commands() if not never_ends(filled_in(c))])
def test_a_shown_command_runs_as_written_on_the_bundled_agent(command: str, agent_dir: Path) -> None:
    result = subprocess.run([str(MCP_RUN), *filled_in(command)], capture_output=True, text=True,
                            timeout=120, cwd=agent_dir, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    if "-p" in filled_in(command) and "--json" not in command:
        assert "returned: " in result.stdout  # a tool was called, not the offline model's help


def test_every_chat_command_the_readme_shows_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("| chat command |", 1)[1].split("\n\n", 1)[0]
    first_cells = [row.split("|")[1] for row in table.splitlines()[2:]]
    shown = {name for cell in first_cells for name in re.findall(r"`/(\w+)", cell)}
    assert shown == set(CHAT_COMMANDS)
