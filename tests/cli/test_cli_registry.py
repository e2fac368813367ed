"""The command table: every command module is registered with exactly its commands, commands stay
lazily imported, a misspelled command is an error with a suggestion, and a file still runs. The CLI
runs in this process (``invoke``) but where a fresh process is the point: what it imports, Ctrl-C."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from builders import ROOT, invoke

import runner.cli
from runner.cli import (
    COMMAND_MODULES,
    COMMAND_SUMMARIES,
    FILE_MODULE,
    CommandRegistryError,
    load_command_module,
    main,
)


def test_every_module_of_the_cli_package_defines_exactly_the_commands_the_table_lists() -> None:
    modules = {f"runner.cli.{info.name}" for info in pkgutil.iter_modules(runner.cli.__path__)}
    assert set(COMMAND_MODULES) <= modules and FILE_MODULE in modules
    for module in sorted(COMMAND_MODULES):
        load_command_module(module)
    for module in sorted(modules):
        importlib.import_module(module)
    eager = {"validate", "schema"}  # defined in runner/cli/__init__.py itself
    declared = {name for names in COMMAND_MODULES.values() for name in names}
    assert set(main.commands) == eager | declared
    assert isinstance(importlib.import_module(FILE_MODULE).run_file, click.Command)


def test_a_module_that_defines_other_commands_than_its_entry_fails_at_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "extra_commands.py").write_text(
        "from runner.cli import main\n\n@main.command()\ndef hello() -> None:\n    pass\n\n"
        "@main.command()\ndef forgotten() -> None:\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(runner.cli, "COMMAND_MODULES", {**COMMAND_MODULES, "extra_commands": ("hello",)})
    monkeypatch.setattr(main, "commands", dict(main.commands))
    with pytest.raises(CommandRegistryError, match="forgotten"):
        main.get_command(click.Context(main), "hello")
    sys.modules.pop("extra_commands", None)


def test_help_lists_every_command_from_its_definition() -> None:
    result = invoke("--help")
    assert result.exit_code == 0, result.output
    listed = {line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()}
    declared = {name for names in COMMAND_MODULES.values() for name in names}
    assert listed == declared | {"validate", "schema"}
    assert " run " not in result.stdout


def _run_without_the_sdk_or_langchain(runs: list[tuple[list[str], int]], cwd: Path
                                      ) -> subprocess.CompletedProcess[str]:
    """``mcp-run ARGS`` for each run, in one process that fails if the MCP SDK, LangChain or
    LangGraph got imported, or a run exited otherwise than its code."""
    script = (
        "import sys\nfrom runner.cli import main\n"
        f"for args, code in {runs!r}:\n"
        "    try:\n        main(args)\n"
        "    except SystemExit as exit:\n        assert (exit.code or 0) == code, exit.code\n"
        "heavy = sorted(m for m in sys.modules\n"
        "               if m.split('.')[0] in ('mcp', 'langchain_core', 'langgraph'))\n"
        "print(heavy, file=sys.stderr)\nassert not heavy\n"
    )
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_validate_and_schema_import_neither_the_sdk_nor_langchain() -> None:
    result = _run_without_the_sdk_or_langchain([(["validate", "agent.yaml"], 0), (["schema"], 0)], ROOT)
    assert result.returncode == 0, result.stderr


def test_a_turn_on_an_invalid_manifest_reports_it_before_importing_the_sdk_or_langchain(
        tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("version: 1\nname: bad\nmodel: offline\nservers: {a: {}}\n")
    result = _run_without_the_sdk_or_langchain([(["bad.yaml", "-p", "hi"], 2)], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "bad.yaml:4:" in result.stderr and "1 problem found" in result.stderr


def test_help_lists_the_commands_without_importing_their_modules_the_runtime_or_the_manifest_models() -> None:
    script = (
        "import sys\nfrom runner.cli import COMMAND_MODULES, main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "loaded = sorted(m for m in sys.modules if m in COMMAND_MODULES\n"
        "                or m.split('.')[0] in ('mcp', 'langchain_core', 'langgraph', 'pydantic', 'yaml'))\n"
        "print(loaded, file=sys.stderr)\nassert not loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Call tool NAME with ARGUMENTS" in result.stdout


def test_the_help_summary_of_every_lazy_command_is_its_docstring_summary() -> None:
    for module in sorted(COMMAND_MODULES):
        load_command_module(module)
    for name in sorted(COMMAND_SUMMARIES):
        for limit in (45, 300):
            assert click.utils.make_default_short_help(COMMAND_SUMMARIES[name], limit) == (
                main.commands[name].get_short_help_str(limit)), name
    assert set(COMMAND_SUMMARIES) == {name for names in COMMAND_MODULES.values() for name in names}


@pytest.mark.parametrize(("typed", "suggested"), [("valdiate", "validate"), ("tool", "tools"),
                                                  ("promts", "prompts")])
def test_a_misspelled_command_says_there_is_no_such_command_and_suggests_the_closest(
    typed: str, suggested: str
) -> None:
    result = invoke(typed, "agent.yaml", cwd=ROOT)
    assert result.exit_code == 2
    assert f"no such command '{typed}'" in result.stderr
    assert f"did you mean '{suggested}'" in result.stderr
    assert not re.search(r"\brun\b", result.stderr.replace("mcp-run", ""))


def test_a_wrong_option_after_a_file_never_mentions_an_undocumented_run_command() -> None:
    result = invoke("agent.yaml", "--bogus", cwd=ROOT)
    assert result.exit_code == 2
    assert "Usage: mcp-run FILE [OPTIONS]" in result.stderr
    assert "mcp-run run" not in result.stderr and "--bogus" in result.stderr


def test_a_yaml_path_that_does_not_exist_is_still_read_as_a_manifest(tmp_path: Path) -> None:
    result = invoke("missing.yml", "-p", "hi", cwd=tmp_path)
    assert result.exit_code == 2
    assert "no such command" not in result.stderr and "missing.yml" in result.stderr


def test_an_existing_file_without_a_yaml_suffix_runs_its_agent(tmp_path: Path) -> None:
    (tmp_path / "agent").write_text("version: 1\nname: plain\nmodel: offline\ncheckpointer: memory\n")
    result = invoke("agent", "-p", "hello", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "offline model" in result.stdout


# A Ctrl-C raised while a module is being imported, as it is when pressed during start-up.
_INTERRUPTING_IMPORT = (
    "import sys\n"
    "interrupted_module = sys.argv[1]\n"
    "class Interrupting:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == interrupted_module:\n"
    "            raise KeyboardInterrupt\n"
    "sys.meta_path.insert(0, Interrupting())\n"
    "sys.argv = ['mcp-run', *sys.argv[2:]]\n"
    "from runner.__main__ import main\n"
    "main()\n"
)


@pytest.mark.parametrize("module", ["runner.cli", FILE_MODULE])
def test_ctrl_c_during_start_up_says_interrupted_and_exits_130_without_a_traceback(module: str) -> None:
    result = subprocess.run([sys.executable, "-c", _INTERRUPTING_IMPORT, module, "agent.yaml", "-p", "hi"],
                            capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 130, result.stderr
    assert "interrupted" in result.stderr
    assert "Traceback" not in result.stderr and "Aborted" not in result.stderr


def test_the_console_script_is_the_entry_point_that_handles_ctrl_c() -> None:
    assert 'mcp-run = "runner.__main__:main"' in (ROOT / "pyproject.toml").read_text()
