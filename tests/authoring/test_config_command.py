"""``mcp-run config``: the effective manifest, where each value comes from, variables by name only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import invoke
from click.testing import Result

from runner.cli import main

MANIFEST = """\
version: 1
name: effective
x-common: &common
  timeout: 5s
  env_passthrough: [LANG]
defaults:
  startup_timeout: 12s
  restart: {max_attempts: 2}
servers:
  api:
    url: ${MCP_RUN_TEST_URL:-http://localhost:9000}/mcp
    headers:
      Authorization: Bearer ${MCP_RUN_TEST_TOKEN}
      X-Static: CANARYliteral0000000000000000
      Accept: application/json
  local:
    <<: *common
    type: stdio
    command: python
    args: [server.py, "$${LITERAL}", "postgresql://app:CANARYpw@localhost/db", sk-CANARY1234567890abcdef]
    env:
      TZ: UTC
      DB_PASSWORD: CANARYpw
      API_TOKEN: ${MCP_RUN_TEST_TOKEN}
      CACHE: ${MCP_RUN_TEST_MISSING}
      SALT: ${MCP_RUN_TEST_SALT:-CANARYdefault}
"""
SET = {"MCP_RUN_TEST_TOKEN": "CANARYset", "MCP_RUN_TEST_URL": None, "MCP_RUN_TEST_MISSING": None,
       "MCP_RUN_TEST_SALT": None}


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "effective.yaml"
    path.write_text(MANIFEST)
    return path


def config(*args: str) -> Result:
    return invoke("config", *args, env=SET)


def lines_of(result: Result, server: str) -> dict[str, str]:
    """'key: value  # source' lines of one server's block, by key (first occurrence)."""
    lines, inside = {}, False
    for line in result.stdout.splitlines():
        if line.startswith("  ") and not line.startswith("    "):
            inside = line.strip() == f"{server}:"
        elif inside and line.startswith("    ") and not line.startswith("     "):
            key = line.strip().split(":", 1)[0]
            lines.setdefault(key, line.strip())
    return lines


def test_each_value_says_whether_it_came_from_the_server_defaults_or_built_in(manifest: Path) -> None:
    result = config(str(manifest))
    assert result.exit_code == 0, result.stderr
    api, local = lines_of(result, "api"), lines_of(result, "local")
    assert api["timeout"] == "timeout: 30s  # built-in"
    assert api["startup_timeout"] == f"startup_timeout: 12s  # defaults {manifest}:7:20"
    assert local["command"] == f"command: python  # server {manifest}:19:14"
    assert local["transport"] == f"transport: stdio  # server {manifest}:18:11"  # written as 'type'
    assert "max_attempts: 2  # defaults" in result.stdout and "backoff: 1s  # built-in" in result.stdout


def test_values_merged_from_an_anchor_point_at_the_anchor(manifest: Path) -> None:
    local = lines_of(config(str(manifest)), "local")
    assert local["timeout"] == f"timeout: 5s  # server via << {manifest}:4:12"
    assert local["env_passthrough"] == f"env_passthrough: [LANG]  # server via << {manifest}:5:20"


def test_variables_are_shown_by_name_with_whether_they_are_set_and_never_their_values(manifest: Path) -> None:
    result = config(str(manifest))
    assert "Authorization: Bearer ${MCP_RUN_TEST_TOKEN}" in result.stdout
    assert "url: ${MCP_RUN_TEST_URL:-http://localhost:9000}/mcp" in result.stdout
    assert "CACHE: ${MCP_RUN_TEST_MISSING}" in result.stdout
    assert "#   MCP_RUN_TEST_TOKEN: set — servers.api.headers.Authorization, servers.local.env.API_TOKEN" \
        in result.stdout
    assert "#   MCP_RUN_TEST_MISSING: UNSET — servers.local.env.CACHE" in result.stdout
    assert "#   MCP_RUN_TEST_URL: unset, default used — servers.api.url" in result.stdout
    assert "CANARY" not in result.stdout + result.stderr


def test_literal_secrets_are_hidden_and_harmless_values_shown(manifest: Path) -> None:
    result = config(str(manifest))
    assert "X-Static: (hidden)" in result.stdout and "DB_PASSWORD: (hidden)" in result.stdout
    assert "SALT: ${MCP_RUN_TEST_SALT:-…}" in result.stdout
    assert "Accept: application/json" in result.stdout and "TZ: UTC" in result.stdout
    assert "args: [server.py, '$${LITERAL}', 'postgresql://app:(hidden)@localhost/db', (hidden)]" \
        in result.stdout


def test_json_output_has_values_sources_and_variables(manifest: Path) -> None:
    result = config(str(manifest), "--json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    local = document["manifest"]["servers"]["local"]
    assert local["timeout"] == 5.0 and local["startup_timeout"] == 12.0
    assert document["sources"]["servers.local.timeout"] == {
        "from": "server", "at": f"{manifest}:4:12", "merged": True}
    assert document["sources"]["servers.api.startup_timeout"]["from"] == "defaults"
    assert document["sources"]["servers.api.heartbeat.interval"] == {"from": "built-in", "at": None,
                                                                     "merged": False}
    assert {v["name"]: (v["set"], v["has_default"]) for v in document["variables"]} == {
        "MCP_RUN_TEST_TOKEN": (True, False), "MCP_RUN_TEST_MISSING": (False, False),
        "MCP_RUN_TEST_URL": (False, True), "MCP_RUN_TEST_SALT": (False, True)}
    assert "CANARY" not in result.stdout


def test_one_server_can_be_shown_alone(manifest: Path) -> None:
    result = config(str(manifest), "--server", "api")
    assert "  api:" in result.stdout and "  local:" not in result.stdout
    assert "MCP_RUN_TEST_MISSING" not in result.stdout
    document = json.loads(config(str(manifest), "--server", "api", "--json").stdout)
    assert document["sources"] and all(path.startswith("servers.api.") for path in document["sources"])
    assert [v["name"] for v in document["variables"]] == ["MCP_RUN_TEST_TOKEN", "MCP_RUN_TEST_URL"]
    unknown = config(str(manifest), "--server", "nope")
    assert unknown.exit_code == 2 and "no server 'nope'" in unknown.stderr


def test_an_invalid_manifest_is_a_located_error_with_exit_code_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\nname: bad\nservers:\n  a:\n    command: x\n    timeout: soon\n")
    result = config(str(path))
    assert result.exit_code == 2
    assert f"{path}:6:14: servers.a.timeout:" in result.stderr


# ------------------------------------------------------------------------------- shell completion


def complete(words: str, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What bash completion offers for the command line ``words`` (the cursor at its end)."""
    monkeypatch.chdir(cwd)
    parts = words.split(" ")
    env = {"_MCP_RUN_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)}
    result = invoke(env=env)
    return result.stdout.splitlines()


def test_completion_offers_commands_and_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert complete("mcp-run i", tmp_path, monkeypatch) == ["plain,import", "plain,init"]
    assert complete("mcp-run con", tmp_path, monkeypatch) == ["plain,config"]
    assert complete("mcp-run import x.json --f", tmp_path, monkeypatch) == ["plain,--force", "plain,--format"]
    assert complete("mcp-run import x.json --format ", tmp_path, monkeypatch) == [
        "plain,claude-code", "plain,claude-desktop", "plain,cursor", "plain,vscode"]


def test_completion_offers_manifests_for_config_and_json_configs_for_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("agent.yaml", "other.yml", "mcp.json", "notes.txt"):
        (tmp_path / name).write_text("")
    (tmp_path / "sub").mkdir()
    assert complete("mcp-run config ", tmp_path, monkeypatch) == ["plain,agent.yaml", "plain,other.yml",
                                                                  "dir,sub/"]
    assert complete("mcp-run import ", tmp_path, monkeypatch) == ["plain,mcp.json", "dir,sub/"]


def test_the_first_word_completes_to_manifest_files_and_folders_beside_the_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("agent.yaml", "agenda.txt", "sandbox.yml"):
        (tmp_path / name).write_text("")
    (tmp_path / "agents").mkdir()
    assert complete("mcp-run ag", tmp_path, monkeypatch) == ["plain,agent.yaml", "dir,agents/"]
    assert complete("mcp-run s", tmp_path, monkeypatch) == [
        "plain,schema", "plain,serve", "plain,sandbox.yml"]
    (tmp_path / "agents" / "main.yaml").write_text("")
    assert complete("mcp-run agents/", tmp_path, monkeypatch) == ["plain,agents/main.yaml"]


def test_completion_offers_server_keys_of_the_manifest_without_starting_anything(
    manifest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert complete(f"mcp-run config {manifest.name} --server ", manifest.parent, monkeypatch) == [
        "plain,api", "plain,local"]
    assert complete(f"mcp-run config {manifest.name} --server l", manifest.parent, monkeypatch) == [
        "plain,local"]


def test_tool_names_are_completed_from_what_the_manifest_names(tmp_path: Path) -> None:
    import click

    from runner.cli.authoring import complete_tool

    path = tmp_path / "agent.yaml"
    path.write_text("servers:\n  time:\n    command: x\n    tools:\n      only: [get_time, 'list_*']\n"
                    "      rename: {get_time: now, convert: convert_time}\n  plain: {command: y}\n")
    context = click.Context(main, info_name="mcp-run")
    context.params["file"] = str(path)
    assert [item.value for item in complete_tool(context, main.params[0], "")] == ["convert_time", "now"]
    path.write_text("servers:\n  time:\n    command: x\n    tools: {only: [get_time]}\n")
    assert [item.value for item in complete_tool(context, main.params[0], "ti")] == ["time__get_time"]


def test_broken_yaml_is_a_located_error_with_exit_code_2(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("version: 1\nname: [\n")
    result = config(str(path))
    assert result.exit_code == 2 and f"{path}:3:1: YAML syntax:" in result.stderr


def test_an_alias_bomb_stops_with_a_located_error_instead_of_expanding(tmp_path: Path) -> None:
    levels = ['x-0: &l0 ["x","x","x","x","x","x","x","x","x","x"]']
    levels += [f"x-{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 7)]
    path = tmp_path / "bomb.yaml"
    path.write_text("version: 1\nname: bomb\n" + "\n".join(levels) + "\nprompts:\n  vars: {v: *l6}\n")
    result = config(str(path))
    assert result.exit_code == 2 and "more than 100,000 values" in result.stderr


def test_nested_and_plain_defaults_and_escapes_are_shown_as_written_each_entry_with_its_source(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: 1\nname: t\nservers:\n  notes:\n    command: python\n    env:\n"
        "      NOTES_FILE: ${MCP_RUN_TEST_A:-${MCP_RUN_TEST_B:-x.json}}\n"
        "      PLAIN: ${MCP_RUN_TEST_C:-.mcp-run/notes.json}\n"
        "      API_KEY: ${MCP_RUN_TEST_D:-CANARYsk-abcdefghijklmnopqrstuvwxyz}\n"
        '      LITERAL: "$${NOT_A_VARIABLE}"\n'
    )
    result = invoke("config", str(path), env={"MCP_RUN_TEST_A": None, "MCP_RUN_TEST_B": "set",
                                             "MCP_RUN_TEST_C": None, "MCP_RUN_TEST_D": None})
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert f"NOTES_FILE: ${{MCP_RUN_TEST_A:-${{MCP_RUN_TEST_B:-x.json}}}}  # server {path}:7:19" in out
    assert f"PLAIN: ${{MCP_RUN_TEST_C:-.mcp-run/notes.json}}  # server {path}:8:14" in out
    assert "API_KEY: ${MCP_RUN_TEST_D:-…}" in out and "CANARY" not in out
    assert "LITERAL: $${NOT_A_VARIABLE}" in out
    assert "#   MCP_RUN_TEST_B: set — servers.notes.env.NOTES_FILE" in out
    assert "#   MCP_RUN_TEST_A: unset, default used" in out
    assert "NOT_A_VARIABLE:" not in out.split("# variables")[1]


def test_passwords_and_secret_query_values_of_urls_are_hidden_beside_their_harmless_parts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "urls.yaml"
    path.write_text(
        "version: 1\nname: urls\nservers:\n"
        "  literal:\n    url: https://ann:CANARYpw@example.invalid/mcp?token=CANARYtok&page=2\n"
        "  mixed:\n"
        "    url: https://ann:CANARYpw@${MCP_RUN_TEST_HOST:-example.invalid}/mcp?key=${MCP_RUN_TEST_TOKEN}\n"
    )
    result = config(str(path))
    assert result.exit_code == 0, result.stderr
    assert lines_of(result, "literal")["url"].startswith(
        "url: https://ann:(hidden)@example.invalid/mcp?token=(hidden)&page=2  # server")
    assert lines_of(result, "mixed")["url"].startswith(
        "url: https://ann:(hidden)@${MCP_RUN_TEST_HOST:-example.invalid}/mcp?key=${MCP_RUN_TEST_TOKEN}"
        "  # server")
    assert "CANARY" not in result.stdout + result.stderr


@pytest.mark.parametrize(("model", "said"), [
    ("offline", "max_tokens: null  # built-in: no limit ('offline' has no input window in LangChain's "
                "model profiles)"),
    ("openai:gpt-4.1-mini", "max_tokens: null  # built-in: 890439 tokens, 85% of the 1047576-token input "
                            "window LangChain's model profile gives 'openai:gpt-4.1-mini'"),
])
def test_an_unset_context_limit_says_what_it_is_for_the_model(tmp_path: Path, model: str, said: str) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(f"version: 1\nname: a\nmodel: {model}\ncontext: {{strategy: summarize}}\n")
    result = config(str(path))
    assert result.exit_code == 0, result.stderr
    assert f"  {said}\n" in result.stdout
    assert f"  strategy: summarize  # manifest {path}:4:21\n" in result.stdout
    sources = json.loads(config(str(path), "--json").stdout)["sources"]
    assert sources["context.max_tokens"]["note"] == said.split("# built-in: ", 1)[1]


def test_a_set_context_limit_is_shown_as_the_manifests_own(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: a\ncontext:\n  max_tokens: 8000\n")
    result = config(str(path))
    assert f"  max_tokens: 8000  # manifest {path}:4:15\n" in result.stdout


def test_an_agent_from_another_file_shows_which_file_and_where_it_is_named(tmp_path: Path) -> None:
    from builders import ROOT

    path = ROOT / "examples" / "agents" / "team.yaml"
    result = invoke("config", str(path))
    assert result.exit_code == 0, result.output
    line = next(n for n, text in enumerate(path.read_text().splitlines(), start=1) if "{file:" in text)
    assert f"file: parts/researcher.yaml  # manifest {path}:{line}:" in result.output


def test_a_manifest_validate_refuses_is_refused_with_every_located_problem_and_exit_code_2(
        tmp_path: Path) -> None:
    (tmp_path / "main.yaml").write_text("- text: done\n")
    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\nname: bad\nmodel: {id: scripted, script: main.yaml}\nagents:\n"
                    "  writer: {description: Writes., prompt: '{{ broken'}\n"
                    "  research: {file: missing.yaml}\n")
    result = config(str(path))
    assert result.exit_code == 2, result.output
    assert f"{path}:5:1: agents.writer: this agent has no model of its own" in result.stderr
    assert f"{path}:5:" in result.stderr
    assert "agents.writer.prompt: unexpected end of template" in result.stderr
    assert f"{path}:6:20: agents.research.file: manifest 'missing.yaml' does not exist" in result.stderr
    assert result.stdout == ""


def test_a_value_an_unset_variable_stands_in_is_shown_as_unset_not_refused(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: a\nmodel: ${MCP_RUN_TEST_MISSING}\n")
    result = config(str(path))
    assert result.exit_code == 0, result.output
    assert "#   MCP_RUN_TEST_MISSING: UNSET — model" in result.stdout


def test_an_agent_from_another_file_shows_the_values_and_servers_it_takes_from_that_file() -> None:
    from builders import ROOT

    path = ROOT / "examples" / "agents" / "team.yaml"
    other = ROOT / "examples" / "agents" / "parts" / "researcher.yaml"
    result = invoke("config", str(path))
    assert result.exit_code == 0, result.output
    lines = other.read_text().splitlines()

    def at(words: str) -> str:
        return f"{other}:{next(n for n, text in enumerate(lines, start=1) if words in text)}:"

    out = result.stdout
    description = "Finds facts and does arithmetic with the notes server."
    assert f"    description: {description}  # manifest {at('description:')}" in out
    assert f"      script: researcher-turns.yaml  # manifest {at('researcher-turns.yaml')}" in out
    assert f"    max_steps: 4  # manifest {at('max_steps')}" in out
    assert "    tools: [notes]  # manifest" in out
    # Its notes server joins the one fleet, and runs in that file's folder.
    assert f"    command: python  # server {at('command: python')}" in out
    assert f"    cwd: parts  # built-in: the folder of {other}" in out
    assert "servers: {}" not in out
    alone = invoke("config", str(path), "--server", "notes")
    assert alone.exit_code == 0 and f"# server {at('command: python')}" in alone.stdout


def test_an_unset_variable_of_an_included_file_is_shown_as_unset_with_that_files_server(
        tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    other = tmp_path / "parts" / "helper.yaml"
    other.write_text("version: 1\nname: helper\ndescription: Helps.\nservers:\n  api:\n"
                     "    url: https://example.com/mcp\n"
                     "    headers: {Authorization: 'Bearer ${MCP_RUN_TEST_MISSING}'}\n")
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: main\nagent: {agents: [helper]}\n"
                    "agents:\n  helper: {file: parts/helper.yaml}\n")
    result = config(str(path))
    assert result.exit_code == 0, result.output
    assert f"    url: https://example.com/mcp  # server {other}:6:10" in result.stdout
    assert "#   MCP_RUN_TEST_MISSING: UNSET — servers.api.headers.Authorization" in result.stdout
