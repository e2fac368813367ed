"""``mcp-run init``: a starter folder that validates and runs offline as written, never clobbering."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from builders import ROOT, TESTS, invoke

from runner.agent.checks import check_agent
from runner.manifest import manifest_json_schema

CONFIGS = TESTS / "configs"
STARTER = {"agent.yaml", "agent.schema.json", "prompts/system.md.j2", ".gitignore"}


def run_agent(manifest: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runner", str(manifest), "-p", prompt],
                          capture_output=True, text=True, timeout=120, cwd=manifest.parent,
                          stdin=subprocess.DEVNULL)


def files_in(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}


def test_the_starter_validates_and_answers_offline_without_servers(tmp_path: Path) -> None:
    folder = tmp_path / "my-agent"
    result = invoke("init", str(folder))
    assert result.exit_code == 0, result.stderr
    assert files_in(folder) == STARTER
    loaded = check_agent(folder / "agent.yaml")
    assert loaded.manifest.name == "my-agent" and loaded.manifest.model.id == "offline"
    text = (folder / "agent.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=agent.schema.json\n")
    assert json.loads((folder / "agent.schema.json").read_text()) == manifest_json_schema()
    assert (folder / ".gitignore").read_text().splitlines()[-1] == ".mcp-run/"
    answer = run_agent(folder / "agent.yaml", "hello")
    assert answer.returncode == 0, answer.stderr
    assert "This is the offline model" in answer.stdout


def test_a_server_given_on_the_command_line_is_called_by_the_starter(tmp_path: Path) -> None:
    notes = ROOT / "examples" / "notes_server.py"
    result = invoke("init", str(tmp_path), "--server", f"notes=python {notes}")
    assert result.exit_code == 0, result.stderr
    assert check_agent(tmp_path / "agent.yaml").manifest.servers["notes"].args == [str(notes)]
    answer = run_agent(tmp_path / "agent.yaml", 'notes__calculate {"expression": "6*7"}')
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == "notes__calculate returned: 42"


def test_existing_files_are_never_overwritten_without_force_and_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text("mine\n")
    refused = invoke("init", str(tmp_path))
    assert refused.exit_code == 2
    assert f"{tmp_path / 'agent.yaml'}:1:1: already exists; --force replaces it" in refused.stderr
    assert files_in(tmp_path) == {"agent.yaml"} and (tmp_path / "agent.yaml").read_text() == "mine\n"
    forced = invoke("init", str(tmp_path), "--force")
    assert forced.exit_code == 0 and check_agent(tmp_path / "agent.yaml").manifest.version == 1


def test_an_existing_gitignore_is_added_to_once_and_keeps_its_lines(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("node_modules/")
    assert invoke("init", str(tmp_path)).exit_code == 0
    assert invoke("init", str(tmp_path), "--force").exit_code == 0
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    assert lines[0] == "node_modules/" and lines.count(".mcp-run/") == 1


def test_from_imports_servers_with_secrets_as_variables(tmp_path: Path) -> None:
    result = invoke("init", str(tmp_path), "--from", str(CONFIGS / "claude-desktop/basic.json"),
                     "--server", "github=echo taken")
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "agent.yaml").read_text()
    assert "GITHUB_PERSONAL_ACCESS_TOKEN: ${GITHUB_PERSONAL_ACCESS_TOKEN}" in text
    assert "  server 'github' is 'github-2'" in result.stderr
    assert all("CANARY" not in (tmp_path / name).read_text() for name in files_in(tmp_path))
    environ = {"GITHUB_PERSONAL_ACCESS_TOKEN": "x", "BRAVE_API_KEY": "y"}
    servers = check_agent(tmp_path / "agent.yaml", environ=environ).manifest.servers
    assert set(servers) == {"github", "github-2", "filesystem", "time", "brave-search"}


def test_the_next_step_after_an_import_says_to_set_its_variables_first_and_only_then(tmp_path: Path) -> None:
    imported = invoke("init", str(tmp_path / "a"), "--from", str(CONFIGS / "claude-desktop/basic.json"))
    assert imported.exit_code == 0, imported.stderr
    assert ("next: set BRAVE_API_KEY, GITHUB_PERSONAL_ACCESS_TOKEN, then run mcp-run "
            f"{tmp_path / 'a' / 'agent.yaml'}" in imported.stdout)
    plain = invoke("init", str(tmp_path / "b"))
    assert f"next: mcp-run {tmp_path / 'b' / 'agent.yaml'} -p 'hello'" in plain.stdout


def test_the_model_flag_chooses_the_model(tmp_path: Path) -> None:
    assert invoke("init", str(tmp_path), "--model", "openai:gpt-4.1-mini").exit_code == 0
    assert check_agent(tmp_path / "agent.yaml").manifest.model.id == "openai:gpt-4.1-mini"


def test_the_next_step_for_a_provider_model_says_first_to_install_its_package_and_set_its_key(
        tmp_path: Path) -> None:
    result = invoke("init", str(tmp_path), "--model", "groq:llama-3.1-8b-instant",
                    env={"GROQ_API_KEY": None})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == ("first: model 'groq:llama-3.1-8b-instant' needs the langchain-groq package, which "
                        "is not installed: pip install langchain-groq")
    assert lines[2].startswith("first: model 'groq:llama-3.1-8b-instant' reads its API key from GROQ_API_KEY")
    assert lines[3].startswith("next: mcp-run ")


def test_a_model_of_no_known_provider_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    result = invoke("init", str(tmp_path), "--model", "nosuch:model")
    assert result.exit_code == 2 and "unknown model provider 'nosuch'" in result.stderr
    assert files_in(tmp_path) == set()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("notes", "expected NAME=COMMAND"),
        ("Notes=python x.py", "server keys become tool name prefixes"),
        ("notes=", "expected NAME=COMMAND"),
        ("notes=python 'unclosed", "No closing quotation"),
    ],
)
def test_a_malformed_server_option_is_refused_with_exit_code_2(
    option: str, message: str, tmp_path: Path
) -> None:
    result = invoke("init", str(tmp_path), "--server", option)
    assert result.exit_code == 2 and message in result.stderr
    assert files_in(tmp_path) == set()


def test_every_mcp_run_command_in_the_starters_comments_runs(tmp_path: Path) -> None:
    import re
    import shlex

    folder = tmp_path / "starter"
    assert invoke("init", str(folder)).exit_code == 0
    comments = [line for line in (folder / "agent.yaml").read_text().splitlines()
                if line.lstrip().startswith("#")]
    commands = [match.group(0).strip() for line in comments
                for match in re.finditer(r"mcp-run [^`()]*?(?=\s{2,}|\)|`|$)", line)]
    assert any("import" in command for command in commands), commands
    filled = {"FILE": str(CONFIGS / "claude-desktop/basic.json")}
    for command in commands:
        words = [filled.get(word, word) for word in shlex.split(command)[1:]]
        result = subprocess.run([sys.executable, "-m", "runner", *words], capture_output=True, text=True,
                                timeout=120, cwd=folder, stdin=subprocess.DEVNULL)
        assert result.returncode == 0, (command, result.stderr)
