"""Every `mcp-run …` command shown in the README and in the bundled agent.yaml's comments runs as
written on the bundled agent (offline model), placeholders filled in; the few that never end on
their own (watch mode) at least parse to an existing command and options. Every chat command the
README shows exists."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import click
import fast_tier
import pytest
from builders import MCP_RUN, copy_bundled_agent

from runner.cli import main
from runner.manifest import CHAT_COMMANDS

ROOT = Path(__file__).resolve().parent.parent

# What a placeholder of the README stands for, on the bundled agent (by command, then for all).
PLACEHOLDERS = {
    "call": {"NAME": "notes__calculate", "JSON": '{"expression": "2+3"}'},
    "prompt": {"NAME": "summary", "k=v…": "style=short"},
    "test": {"[CASE_FILES…]": "evals/notes.yaml"},
    "import": {"FILE": str(ROOT / "tests/configs/claude-desktop/basic.json"), "agent.yaml": "imported.yaml"},
    "auth": {"SERVER": "github"},
    None: {"FILE": "agent.yaml", "TEXT": 'notes__calculate {"expression": "2+3"}', "ID": "t1",
           "NAME": "main"},  # --agent NAME: the bundled agent has only its main one
}


# Sections whose commands other tests run as written, each in the setting its text describes.
RUN_ELSEWHERE = {
    "Coming from Claude Desktop / VS Code / Cursor": "tests/authoring/test_import.py",
    "Shell completion": "test_each_completion_line_prints_a_completion_script below",
    "Logging in to remote servers": "tests/auth/test_auth.py::test_the_readmes_login_commands_run_as_written",
    # Its case file is evals/notes.yaml; its commands run there, --record and --replay included.
    "Testing your agent": "tests/evals/test_evals_cli.py::test_the_readme_example_runs_as_written",
    "Serving": "tests/hosting/test_serve_readme.py; its scale-out recipe tests/hosting/test_scale_out.py",
    "Several agents": ("tests/examples/test_agent_examples.py; its serve command "
                       "tests/hosting/test_serve_agents.py"),
    "Usage, cost and budgets": "tests/cli/test_usage_cli.py::test_the_readme_budget_example_runs_as_written",
    # Its rules are added to the bundled agent, and some of its commands are refused (exit 1).
    "Policy": "tests/cli/test_cli_policy.py::test_the_readme_example_runs_as_written",
    "Context management": "tests/cli/test_context_readme.py",
}
# Commands of the other sections that need what the bundled agent lacks (an http server that asks
# for a login), by their first words; the test named runs them as written.
COMMANDS_RUN_ELSEWHERE = {
    "auth login": "tests/auth/test_auth.py::test_the_readmes_login_commands_run_as_written",
    "auth logout": "tests/auth/test_auth.py::test_the_readmes_login_commands_run_as_written",
    # Served agents (a server waits for its client): the Serving section's own test, and the
    # scale-out recipe (two instances on one PostgreSQL behind HAProxy).
    "serve agent.yaml": "tests/hosting/test_serve_readme.py, tests/hosting/test_scale_out.py",
}


def readme_sections() -> dict[str, str]:
    """README.md's level-two sections by title."""
    parts = re.split(r"^## (.+)\n", (ROOT / "README.md").read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def shown_commands() -> list[str]:
    """The text after `mcp-run ` of each command in README.md (but the sections that other tests run)
    and agent.yaml comments."""
    sections = readme_sections()
    assert set(RUN_ELSEWHERE) <= set(sections)
    readme = "".join(text for title, text in sections.items() if title not in RUN_ELSEWHERE)
    comments = [line for line in (ROOT / "agent.yaml").read_text().splitlines()
                if line.lstrip().startswith("#") and "mcp-run " in line]
    return sorted(set(commands_in(readme)) | {after_mcp_run(line) for line in comments})


def commands_in(text: str) -> list[str]:
    """The text after `mcp-run ` of each command of a README text: in backticks, and each line of
    a code block that has one (without its trailing comment)."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    prose = re.sub(r"^```[a-z]*\n.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    texts = re.findall(r"`([^`\n]*\bmcp-run [^`\n]*)`", prose)
    lines = [line for block in blocks for line in block.splitlines()]
    texts += [line.split("  #", 1)[0] for line in lines if "mcp-run " in line]
    return [after_mcp_run(text) for text in texts]


def after_mcp_run(text: str) -> str:
    return text[text.rindex("mcp-run ") + len("mcp-run "):].strip()


def filled_in(command: str) -> list[str]:
    words, optional = [], False  # words of an optional group ("[-o agent.yaml]") lose their brackets
    for word in shlex.split(command):
        optional = optional or word.startswith("[-")
        words.append(word.strip("[]") if optional else word)
        optional = optional and not word.endswith("]")
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


def runs_elsewhere(args: list[str]) -> bool:
    return " ".join(args[:2]) in COMMANDS_RUN_ELSEWHERE


@pytest.mark.parametrize("command", [c for c in shown_commands()
                                     if not never_ends(filled_in(c)) and not runs_elsewhere(filled_in(c))])
def test_a_shown_command_runs_as_written_on_the_bundled_agent(command: str, agent_dir: Path) -> None:
    result = subprocess.run([str(MCP_RUN), *filled_in(command)], capture_output=True, text=True,
                            timeout=120, cwd=agent_dir, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    args = filled_in(command)
    if "-o" in args:  # the output went to a file
        assert (agent_dir / args[args.index("-o") + 1]).read_text().strip()
    else:
        assert result.stdout.strip()
    if "-p" in filled_in(command) and "--json" not in command:
        assert "returned: " in result.stdout  # a tool was called, not the offline model's help


def test_every_chat_command_the_readme_shows_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("| chat command |", 1)[1].split("\n\n", 1)[0]
    first_cells = [row.split("|")[1] for row in table.splitlines()[2:]]
    shown = {name for cell in first_cells for name in re.findall(r"`/(\w+)", cell)}
    assert shown == set(CHAT_COMMANDS)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_completion_line_prints_a_completion_script(shell: str) -> None:
    section = readme_sections()["Shell completion"]
    line = next(line for line in section.splitlines() if f"={shell}_source mcp-run" in line)
    variable = re.search(r"(_MCP_RUN_COMPLETE=\w+)", line).group(1)
    name, _, value = variable.partition("=")
    environ = {**__import__("os").environ, name: value}
    result = subprocess.run([str(MCP_RUN)], capture_output=True, text=True, timeout=60, env=environ,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert "_MCP_RUN_COMPLETE" in result.stdout and "mcp-run" in result.stdout


def test_the_readmes_fast_tier_command_selects_the_fast_tier() -> None:
    """The quick-feedback command beside `bash scripts/test.sh` names the marker tests/fast_tier.py
    applies, and every file that module lists exists (a moved file would leave the tier silently)."""
    [command] = re.findall(r"`([^`\n]*-m pytest[^`\n]*)`", (ROOT / "README.md").read_text())
    words = shlex.split(command)
    assert words[:3] == [".venv/bin/python", "-m", "pytest"]
    assert words[words.index("-m", 3) + 1] == fast_tier.FAST_MARK
    missing = [name for name in sorted(fast_tier.FAST_FILES) if not (fast_tier.TESTS_DIR / name).is_file()]
    assert not missing, f"tests/fast_tier.py lists files that are not there: {missing}"
