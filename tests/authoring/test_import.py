"""``mcp-run import``: other tools' MCP configs become valid manifests, secrets stay out of them.

The corpus in ``tests/configs/<format>/`` holds configs written from each tool's documented format
(with unusual but valid entries); each ``X.json`` has the manifest it must become
(``X.expected.yaml``) and the report a person sees (``X.expected.report``). Every secret value in
the corpus contains ``CANARY``, which must never reach any output or written file.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest
from builders import ROOT, TESTS, copy_bundled_agent, invoke

from runner.agent.checks import check_agent
from runner.authoring.formats import detect_format
from runner.authoring.importing import required_variables, validate_text
from runner.authoring.jsonc import parse_jsonc

CONFIGS = TESTS / "configs"
CORPUS = sorted(path.relative_to(CONFIGS).as_posix() for path in CONFIGS.glob("*/*.json"))
CANARY = "CANARY"


@pytest.fixture
def in_configs(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(CONFIGS)
    return CONFIGS


def variables_of(report: str) -> list[str]:
    section = report.partition("(nothing secret was copied):\n")[2]
    return re.findall(r"^  ([A-Z_][A-Z0-9_]*)  ", section, flags=re.MULTILINE)


def test_the_corpus_covers_every_format() -> None:
    assert {name.split("/")[0] for name in CORPUS} == {"claude-desktop", "claude-code", "cursor", "vscode"}


@pytest.mark.parametrize("config", CORPUS)
def test_each_config_becomes_its_expected_manifest_which_validates(config: str, in_configs: Path) -> None:
    result = invoke("import", config)
    assert result.exit_code == 0, result.stderr
    stem = config.removesuffix(".json")
    assert result.stdout == (CONFIGS / f"{stem}.expected.yaml").read_text()
    assert result.stderr == (CONFIGS / f"{stem}.expected.report").read_text()
    assert validate_text(result.stdout, file="agent.yaml").manifest.servers
    # Every variable the manifest needs is one the person is told to set.
    assert set(required_variables(result.stdout)) <= set(variables_of(result.stderr))


@pytest.mark.parametrize("config", CORPUS)
def test_the_format_is_told_from_the_content(config: str) -> None:
    data = parse_jsonc((CONFIGS / config).read_text(), file=config).data
    assert detect_format(data) == config.split("/")[0]


@pytest.mark.parametrize("config", CORPUS)
def test_no_secret_value_reaches_the_output_the_report_or_the_written_manifest(
    config: str, tmp_path: Path
) -> None:
    source = CONFIGS / config
    assert CANARY in source.read_text() or CANARY in (CONFIGS / "cursor/.env").read_text()
    target = tmp_path / "agent.yaml"
    written = invoke("import", str(source), "-o", str(target))
    printed = invoke("import", str(source))
    assert written.exit_code == 0 and printed.exit_code == 0, written.stderr
    for text in (written.stdout, written.stderr, printed.stdout, printed.stderr, target.read_text()):
        assert CANARY not in text


def test_a_secret_is_replaced_by_a_variable_and_listed_by_name() -> None:
    result = invoke("import", str(CONFIGS / "claude-code/literal-secrets.mcp.json"))
    assert "Authorization: Bearer ${LINEAR_TOKEN}" in result.stdout
    assert "api_key=${LINEAR_API_KEY}&team=core" in result.stdout
    assert "Accept: application/json" in result.stdout  # not a secret: kept
    assert variables_of(result.stderr) == ["LINEAR_API_KEY", "LINEAR_TOKEN", "LINEAR_X_API_KEY",
                                           "STRIPE_API_KEY"]


def test_equal_secrets_share_a_variable_and_different_ones_do_not(tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {
        "a": {"command": "x", "env": {"API_KEY": "CANARY-one"}},
        "b": {"command": "x", "env": {"API_KEY": "CANARY-one"}},
        "c": {"command": "x", "env": {"API_KEY": "CANARY-two"}},
    }}))
    result = invoke("import", str(config))
    assert result.stdout.count("API_KEY: ${API_KEY}\n") == 2
    assert "API_KEY: ${API_KEY_2}\n" in result.stdout
    assert CANARY not in result.stdout + result.stderr


def test_server_keys_are_made_valid_and_unique_and_the_mapping_is_reported() -> None:
    result = invoke("import", str(CONFIGS / "claude-code/project.mcp.json"))
    assert "  server 'local_tool' is 'local-tool'\n" in result.stderr
    assert "  server 'local-tool' is 'local-tool-2'\n" in result.stderr
    assert "  server '123 weird.Name!' is 'weird-name'\n" in result.stderr


def test_warnings_are_located_in_the_source_file() -> None:
    result = invoke("import", str(CONFIGS / "vscode/mcp.json"))
    assert re.search(r"vscode/mcp\.json:37:7: servers\.fetch\.dev: VS Code's development mode",
                     result.stderr)


def test_a_forced_format_overrides_detection(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"a": {"command": "echo", "args": ["${HOME}"]}}}')
    desktop = invoke("import", str(config))
    code = invoke("import", str(config), "--format", "claude-code")
    assert "args: ['$${HOME}']" in desktop.stdout  # Claude Desktop expands nothing
    assert "args: ['${HOME}']" in code.stdout


def test_broken_json_is_a_located_error_with_exit_code_2(tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text('{\n  "mcpServers": {\n    "a": {"command": "x" "args": []}\n  }\n}\n')
    result = invoke("import", str(config))
    assert result.exit_code == 2
    assert f"{config}:3:26: JSON syntax: expected ',' or '}}'" in result.stderr


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"mcpServers": ["a"]}', "1:2: mcpServers: expected 'mcpServers' to be an object"),
        ('{"mcpServers": {"a": {"command": "x", "args": "-y"}}}', "1:39: mcpServers.a.args: expected a list"),
        ('{"mcpServers": {"a": 3}}', "1:17: mcpServers.a: expected an object"),
        ('[1, 2]', "1:1: expected a JSON object"),
    ],
)
def test_a_config_of_the_wrong_shape_is_a_located_error(text: str, where: str, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(text)
    result = invoke("import", str(config))
    assert result.exit_code == 2
    assert f"{config}:{where}" in result.stderr


def test_an_existing_output_is_replaced_only_with_force(tmp_path: Path) -> None:
    target = tmp_path / "agent.yaml"
    target.write_text("keep me\n")
    refused = invoke("import", str(CONFIGS / "claude-desktop/basic.json"), "-o", str(target))
    assert refused.exit_code == 2 and target.read_text() == "keep me\n"
    forced = invoke("import", str(CONFIGS / "claude-desktop/basic.json"), "-o", str(target), "--force")
    assert forced.exit_code == 0 and target.read_text().startswith("# yaml-language-server")


def test_merge_adds_servers_and_leaves_every_existing_line_as_it_was(tmp_path: Path) -> None:
    copy_bundled_agent(tmp_path)
    manifest = tmp_path / "agent.yaml"
    before = manifest.read_text().splitlines()
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "notes": {"command": "python", "args": ["-m", "other_notes"]},
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
    }}))
    result = invoke("import", str(config), "-o", str(manifest), "--merge")
    assert result.exit_code == 0, result.stderr
    after = manifest.read_text().splitlines()
    changes = difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes()
    assert [tag for tag, *_ in changes if tag != "equal"] == ["insert"]  # comments included
    (_, _, _, start, end), = [change for change in changes if change[0] == "insert"]
    added = after[start:end]
    assert added == ["  notes-2:", "    command: python", "    args: [-m, other_notes]",
                     "  time:", "    command: uvx", "    args: [mcp-server-time]"]
    assert "  server 'notes' is 'notes-2'" in result.stderr
    assert after.index("  notes-2:") < after.index("prompts:")  # under 'servers:', not at the end
    assert set(check_agent(manifest).manifest.servers) == {"notes", "notes-2", "time"}


def test_merge_turns_an_empty_servers_mapping_into_a_block_keeping_its_comment(tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(
        "version: 1  # the format\nname: a\nservers: {}   # none yet\nagent: {max_steps: 3}\n"
    )
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"t": {"command": "uvx", "args": ["mcp-server-time"]}}}')
    result = invoke("import", str(config), "-o", str(manifest), "--merge")
    assert result.exit_code == 0, result.stderr
    assert manifest.read_text() == (
        "version: 1  # the format\nname: a\nservers:   # none yet\n"
        "  t:\n    command: uvx\n    args: [mcp-server-time]\n"
        "agent: {max_steps: 3}\n"
    )


def test_merge_names_a_server_whose_key_yaml_reads_as_a_boolean_as_it_is_written(tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    manifest.write_text("version: 1\nname: a\nservers:\n  on:\n    command: uvx\n"
                        "    args: [mcp-server-time]\n"
                        "  # off:\n  #   command: uvx\n  #   args: [mcp-server-fetch]\n")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]},
                                                 "fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}}}))
    result = invoke("import", str(config), "-o", str(manifest), "--merge")
    assert result.exit_code == 0, result.stderr
    assert "mcpServers.time: already in the manifest as 'on': skipped" in result.stderr
    assert "mcpServers.fetch: already in the manifest as 'off': skipped" in result.stderr
    assert "True" not in result.stderr and "False" not in result.stderr


def test_merge_refuses_servers_written_in_flow_style(tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    original = "version: 1\nname: a\nservers: {t: {command: x}}\n"
    manifest.write_text(original)
    result = invoke("import", str(CONFIGS / "claude-desktop/basic.json"), "-o", str(manifest), "--merge")
    assert result.exit_code == 2 and f"{manifest}:3:10: servers:" in result.stderr
    assert manifest.read_text() == original


def readme_examples() -> list[tuple[str, str, str]]:
    """(config path, JSON text, shell command) of each example under 'Coming from …'."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Coming from Claude Desktop / VS Code / Cursor\n", 1)[1].split("\n## ", 1)[0]
    chunks = section.split("```json\n")
    examples = []
    for caption, chunk in zip(chunks, chunks[1:], strict=False):
        path = re.findall(r"`([^`\s]+\.json)`", caption.strip().rsplit("\n\n", 1)[-1])[0]
        text, _, rest = chunk.partition("```\n")
        examples.append((path, text, rest.split("```sh\n", 1)[1].split("```", 1)[0]))
    return examples


def test_the_readme_has_one_example_per_format() -> None:
    formats = [detect_format(json.loads(text)) for _, text, _ in readme_examples()]
    assert formats == ["claude-desktop", "claude-code", "vscode", "cursor"]


@pytest.mark.parametrize("index", range(4))
def test_each_readme_example_runs_as_written(index: int, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    path, text, command = readme_examples()[index]
    copy_bundled_agent(tmp_path)
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text(text)
    environ = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-ec", command], cwd=tmp_path, env=environ, capture_output=True,
                            text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    expected = ["notes__calculate returned: 42", "is valid", "GITHUB_TOKEN: UNSET", "is valid"][index]
    assert expected in result.stdout


def test_servers_without_an_equivalent_are_left_out_with_a_located_warning(tmp_path: Path) -> None:
    config = tmp_path / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "both": {"command": "x", "url": "http://localhost:1/mcp"},
        "socket": {"type": "http", "url": "ws://localhost:1/mcp"},
        "empty": {"command": ""},
        "kept": {"command": "x", "env": {"PORT": 8080, "DEBUG": True, "EMPTY": None, "A-B": "x"}},
    }}, indent=1))
    result = invoke("import", str(config))
    assert result.exit_code == 0, result.stderr
    assert f"{config}:3:3: mcpServers.both: both 'command' and 'url'" in result.stderr
    assert f"{config}:9:4: mcpServers.socket.url: only http:// and https:// URLs" in result.stderr
    assert f"{config}:11:3: mcpServers.empty: neither 'command' nor 'url'" in result.stderr
    assert f"{config}:20:5: mcpServers.kept.env.A-B: not a variable name" in result.stderr
    servers = validate_text(result.stdout, file="agent.yaml").manifest.servers
    assert set(servers) == {"kept"}
    assert servers["kept"].env == {"PORT": "8080", "DEBUG": "true", "EMPTY": ""}


def test_merging_the_same_config_twice_adds_nothing_the_second_time(tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    manifest.write_text("version: 1\nname: a\n")
    config = CONFIGS / "claude-desktop/basic.json"
    first = invoke("import", str(config), "-o", str(manifest), "--merge")
    once = manifest.read_text()
    second = invoke("import", str(config), "-o", str(manifest), "--merge")
    assert first.exit_code == 0 and second.exit_code == 0, second.stderr
    assert manifest.read_text() == once
    assert "mcpServers.github: already in the manifest as 'github': skipped" in second.stderr
    assert "0 servers from Claude Desktop" in second.stderr and "set these variables" not in second.stderr


def test_a_repeated_merge_lists_only_the_variables_of_the_servers_it_writes(tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    manifest.write_text("version: 1\nname: a\nservers: {}\n")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "github": {"command": "npx", "args": ["-y", "server-github"],
                   "env": {"GITHUB_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}},
        "api": {"url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
    }}))
    first = invoke("import", str(config), "-o", str(manifest), "--merge")
    assert first.exit_code == 0, first.stderr
    listed = first.stderr.split("set these variables before running", 1)[1]
    assert "GITHUB_TOKEN" in listed and "API_TOKEN" in listed
    again = invoke("import", str(config), "-o", str(manifest), "--merge")
    assert again.exit_code == 0, again.stderr
    assert "already in the manifest" in again.stderr
    assert "set these variables" not in again.stderr


def test_a_claude_desktop_config_with_a_url_server_is_told_by_its_keys_or_its_file_name(
    tmp_path: Path
) -> None:
    servers = {"remote": {"url": "https://example.invalid/mcp"}, "time": {"command": "uvx", "args": ["t"]}}
    assert detect_format({"mcpServers": servers, "globalShortcut": "Ctrl+Space"}) == "claude-desktop"
    assert detect_format({"mcpServers": servers}, "claude_desktop_config.json") == "claude-desktop"
    assert detect_format({"mcpServers": servers}, "servers.json") == "claude-code"
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    guessed = invoke("import", str(config))
    assert guessed.exit_code == 0, guessed.stderr
    assert ("from Claude Desktop into stdout (the format told from the file; mcp-run import --format"
            in guessed.stderr)
    forced = invoke("import", str(config), "--format", "claude-code")
    assert "from Claude Code into stdout\n" in forced.stderr


def test_merging_twice_skips_servers_whose_secrets_were_in_arguments_urls_or_disabled(tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    manifest.write_text("version: 1\nname: a\n")
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {
        "search": {"command": "npx",
                   "args": ["-y", "search-server", "--api-key", "sk-live-0123456789abcdef0123"]},
        "remote": {"url": "https://user:hunter2secret@example.com/mcp?token=abcdef0123456789abcdef"},
        "old": {"command": "uvx", "args": ["old-server"], "disabled": True},
    }}))
    first = invoke("import", str(config), "-o", str(manifest), "--merge")
    assert first.exit_code == 0, first.stderr
    once = manifest.read_text()
    assert "# " in once and "old-server" in once  # the disabled one, commented out
    second = invoke("import", str(config), "-o", str(manifest), "--merge")
    assert second.exit_code == 0, second.stderr
    assert manifest.read_text() == once
    for key in ("search", "remote", "old"):
        assert f"mcpServers.{key}: already in the manifest as '{key}': skipped" in second.stderr
    assert "0 servers from Claude Desktop" in second.stderr and "set these variables" not in second.stderr


def test_a_vscode_settings_json_uses_its_mcp_inputs_and_ignores_unrelated_settings(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({
        "editor.fontSize": 14, "files.autoSave": "afterDelay",
        "mcp": {
            "inputs": [{"id": "api-key", "type": "promptString", "description": "The API key",
                        "password": True}],
            "servers": {"api": {"command": "npx", "args": ["api-server"],
                                "env": {"API_KEY": "${input:api-key}"}}},
        },
    }))
    result = invoke("import", str(settings))
    assert result.exit_code == 0, result.stderr
    assert "API_KEY: ${API_KEY}" in result.stdout
    assert "not declared in 'inputs'" not in result.stderr
    assert "a password VS Code asked for (input 'api-key'): The API key" in result.stderr
    assert "editor.fontSize" not in result.stderr and "files.autoSave" not in result.stderr
