"""The manifest corpus: every valid file loads; every invalid file reports exactly its expected
problems, each at its line and column, with its path and a message fragment.

Each invalid file starts with ``# expect: LINE:COL PATH FRAGMENT…`` lines.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from builders import ROOT, TESTS

from runner.agent.checks import check_agent
from runner.errors import ManifestError
from runner.manifest import HttpServerSpec, StdioServerSpec, manifest_json_schema
from runner.manifest.loading import load_manifest, parse_manifest

CORPUS = TESTS / "manifests"
VALID = sorted((CORPUS / "valid").glob("*.yaml"))
INVALID = sorted((CORPUS / "invalid").glob("*.yaml"))
EXPECT = re.compile(r"^# expect: (\d+):(\d+) (\S+) ?(.*)$")


def expectations(path: Path) -> list[tuple[int, int, str, str]]:
    found = []
    for line in path.read_text().splitlines():
        if match := EXPECT.match(line):
            found.append((int(match[1]), int(match[2]), match[3], match[4]))
    return found


def test_the_corpus_has_at_least_thirty_invalid_cases() -> None:
    assert len(INVALID) >= 30
    assert all(expectations(path) for path in INVALID)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_manifests_load(path: Path) -> None:
    loaded = load_manifest(path)
    assert loaded.manifest.version == 1


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_manifests_report_each_problem_at_its_place(path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        check_agent(path)  # what `mcp-run validate` runs: loading, then the checks that follow it
    expected = expectations(path)
    problems = caught.value.problems
    got = [(p.line, p.column, p.path or "-") for p in problems]
    assert got == [(line, col, where) for line, col, where, _ in expected], problems
    for problem, (_, _, _, fragment) in zip(problems, expected, strict=True):
        assert problem.file == str(path)
        assert fragment.lower() in problem.message.lower(), problem


def test_the_bundled_agent_manifest_is_valid() -> None:
    loaded = load_manifest(ROOT / "agent.yaml")
    assert loaded.manifest.servers


def test_the_bundled_manifest_points_editors_at_the_schema() -> None:
    first_line = (ROOT / "agent.yaml").read_text().splitlines()[0]
    assert first_line == "# yaml-language-server: $schema=schemas/agent.schema.json"


def test_the_committed_schema_matches_the_model() -> None:
    committed = json.loads((ROOT / "schemas" / "agent.schema.json").read_text())
    assert committed == manifest_json_schema(), "run: mcp-run schema > schemas/agent.schema.json"


def test_the_schema_accepts_the_valid_corpus_and_describes_fields() -> None:
    import jsonschema
    import yaml

    schema = manifest_json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    for path in VALID:
        validator.validate(yaml.safe_load(path.read_text()))
    assert schema["$defs"]["StdioServerSpec"]["properties"]["command"]["description"]


def test_servers_inherit_unset_settings_from_defaults() -> None:
    loaded = parse_manifest(
        "version: 1\nname: a\ndefaults: {timeout: 2m, required: true}\n"
        "servers:\n  a: {command: x}\n  b: {command: y, timeout: 500ms}\n"
    )
    servers = loaded.manifest.servers
    assert servers["a"].timeout == 120.0 and servers["a"].required is True
    assert servers["b"].timeout == 0.5 and servers["b"].startup_timeout == 20.0


def test_transport_is_inferred_and_claude_code_spellings_are_accepted() -> None:
    servers = load_manifest(CORPUS / "valid" / "claude-style.yaml").manifest.servers
    assert isinstance(servers["fs"], StdioServerSpec)
    assert isinstance(servers["remote"], HttpServerSpec) and servers["remote"].transport == "http"
    assert servers["legacy"].transport == "sse"
    assert servers["streamy"].transport == "http"


class TestEnvironmentExpansion:
    def test_variables_expand_in_headers_args_urls_and_env(self) -> None:
        text = (
            "version: 1\nname: a\nservers:\n"
            "  h: {url: 'http://${HOST}:${PORT:-8080}/mcp', headers: {Authorization: 'Bearer ${TOKEN}'}}\n"
            "  s: {command: x, args: ['--root=${ROOT}'], env: {KEY: '${TOKEN}'}}\n"
        )
        environ = {"HOST": "127.0.0.1", "TOKEN": "s3cret", "ROOT": "/data"}
        servers = parse_manifest(text, environ=environ).manifest.servers
        assert servers["h"].url == "http://127.0.0.1:8080/mcp"
        assert servers["h"].headers == {"Authorization": "Bearer s3cret"}
        assert servers["s"].args == ["--root=/data"] and servers["s"].env == {"KEY": "s3cret"}

    def test_a_doubled_dollar_escapes_a_reference(self) -> None:
        text = "version: 1\nname: a\nservers:\n  s: {command: x, args: ['$${HOME}', '$$', '$x']}\n"
        assert parse_manifest(text, environ={}).manifest.servers["s"].args == ["${HOME}", "$$", "$x"]

    @pytest.mark.parametrize(("text", "environ", "expected"), [
        ("${A:-${B}}", {"B": "b"}, "b"),
        ("${A:-${B}}", {"A": "a"}, "a"),
        ("${A:-${B:-x}}", {}, "x"),
        ("${A:-${B:-${C:-deep}}}-${D:-d}", {"C": "c"}, "c-d"),
        ("${A:-pre-${B:-x}-post}", {}, "pre-x-post"),
        ("${A:-$${B}}", {}, "${B}"),
        ("${A:-x}y}", {}, "xy}"),
    ], ids=["inner-set", "outer-set", "inner-default", "three-levels", "around-inner",
            "escaped-inner", "brace-after"])
    def test_nested_defaults_expand_like_a_shell(
        self, text: str, environ: dict[str, str], expected: str
    ) -> None:
        manifest = parse_manifest(f"version: 1\nname: a\ndescription: '{text}'\n", environ=environ)
        assert manifest.manifest.description == expected

    def test_an_unset_variable_in_an_unused_default_is_not_reported(self) -> None:
        text = "version: 1\nname: a\ndescription: '${A:-${UNSET}}'\n"
        assert parse_manifest(text, environ={"A": "set"}).manifest.description == "set"

    def test_an_unset_variable_in_a_used_default_is_located_and_named(self) -> None:
        text = "version: 1\nname: a\ndescription: '${A:-${B:-${INNER}}}'\n"
        with pytest.raises(ManifestError) as caught:
            parse_manifest(text, environ={})
        (problem,) = caught.value.problems
        assert (problem.line, problem.column, problem.path) == (3, 14, "description")
        assert "INNER" in problem.message

    def test_an_unclosed_nested_default_is_a_located_error(self) -> None:
        with pytest.raises(ManifestError, match=r"3:14: description: malformed"):
            parse_manifest("version: 1\nname: a\ndescription: '${A:-${B:-x}'\n", environ={})

    def test_an_empty_default_is_allowed(self) -> None:
        text = "version: 1\nname: 'a${SUFFIX:-}'\n"
        assert parse_manifest(text, environ={}).manifest.name == "a"

    def test_an_unset_variable_is_located_and_named_without_leaking_other_values(self) -> None:
        text = "version: 1\nname: a\nservers:\n  s: {command: x, env: {A: '${SET}-${UNSET}'}}\n"
        with pytest.raises(ManifestError) as caught:
            parse_manifest(text, environ={"SET": "canary-value-123"})
        (problem,) = caught.value.problems
        assert (problem.line, problem.column, problem.path) == (4, 28, "servers.s.env.A")
        assert "UNSET" in problem.message and "canary-value-123" not in str(caught.value)


class TestDocumentLimits:
    def test_binary_input_is_refused_cleanly(self) -> None:
        with pytest.raises(ManifestError, match="not UTF-8"):
            parse_manifest(b"\xff\xfe\x00\x01binary")

    def test_nul_bytes_are_refused(self) -> None:
        with pytest.raises(ManifestError, match="NUL"):
            parse_manifest("version: 1\x00\n")

    def test_a_huge_manifest_is_refused_before_parsing(self) -> None:
        with pytest.raises(ManifestError, match="limit"):
            parse_manifest("#" * (5 * 1024 * 1024))

    def test_deep_nesting_is_refused(self) -> None:
        with pytest.raises(ManifestError, match="deeply"):
            parse_manifest("version: 1\nname: a\nprompts: {vars: " + "[" * 200 + "]" * 200 + "}\n")

    def test_an_alias_bomb_is_refused(self) -> None:
        lines = ["version: 1", "name: a", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        for i in range(1, 9):
            lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
        with pytest.raises(ManifestError, match="more than"):
            parse_manifest("\n".join(lines) + "\n")


class TestCommandLine:
    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "runner", *args], capture_output=True, text=True, timeout=60,
            cwd=ROOT,
        )

    def test_validate_prints_a_one_line_summary_and_exits_zero(self) -> None:
        result = self.run("validate", "tests/manifests/valid/full.yaml")
        assert result.returncode == 0, result.stderr
        assert len(result.stdout.strip().splitlines()) == 1 and "valid" in result.stdout

    def test_validate_prints_every_located_problem_and_exits_two(self) -> None:
        path = CORPUS / "invalid" / "28-fallback-cycle.yaml"
        result = self.run("validate", str(path))
        assert result.returncode == 2
        assert f"{path}:8:15: servers.a.fallback:" in result.stderr
        assert f"{path}:11:15: servers.b.fallback:" in result.stderr
        assert "Traceback" not in result.stderr

    def test_schema_prints_the_committed_schema(self) -> None:
        result = self.run("schema")
        assert result.returncode == 0
        assert json.loads(result.stdout) == manifest_json_schema()


def test_a_missing_script_is_located_at_the_manifest_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: a\nmodel:\n  id: scripted\n  script: turns.yaml\n")
    with pytest.raises(ManifestError) as caught:
        check_agent(path)
    (problem,) = caught.value.problems
    assert (problem.line, problem.column, problem.path) == (5, 11, "model.script")


def test_a_working_directory_is_resolved_against_the_manifests_folder(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "file.txt").write_text("x")
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: a\nservers:\n  s: {command: x, cwd: work}\n")
    assert load_manifest(path).manifest.servers["s"].cwd == "work"
    path.write_text("version: 1\nname: a\nservers:\n  s: {command: x, cwd: file.txt}\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    (problem,) = caught.value.problems
    assert (problem.line, problem.column, problem.path) == (4, 24, "servers.s.cwd")
    assert "'file.txt' is not a folder" in problem.message


def test_checked_agent_warns_from_the_environment_it_is_given(tmp_path: Path) -> None:
    from runner.agent.checks import checked_agent

    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: a\nmodel: anthropic:claude-sonnet-4-5\n")
    (warning,) = checked_agent(path, environ={}).warnings
    assert (warning.line, warning.column, warning.path) == (3, 8, "model")
    assert "ANTHROPIC_API_KEY, which is not set" in warning.message
    assert checked_agent(path, environ={"ANTHROPIC_API_KEY": "set"}).warnings == []


def test_a_containerised_command_is_not_looked_up_on_the_host(tmp_path: Path) -> None:
    from runner.agent.checks import checked_agent

    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: a\nservers:\n  s: {command: /srv/absent-server}\n")
    (warning,) = checked_agent(path, environ={}).warnings
    assert "does not exist" in warning.message
    path.write_text(
        "version: 1\nname: a\nservers:\n  s: {command: /srv/absent-server, container: {image: x}}\n"
    )
    assert checked_agent(path, environ={}).warnings == []


def test_validate_warns_at_its_place_of_each_filter_entry_that_no_name_can_match() -> None:
    import tempfile

    lines = ["version: 1", "name: globs", "model: offline", "servers:", "  s:", "    command: python",
             "    tools:", '      approve: ["  ", "delete_[all", "create_*"]', '      pin: ["[z-a]_*"]',
             '    prompts: {except: ["[!]x"]}']
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "agent.yaml"
        path.write_text("\n".join(lines) + "\n")
        result = subprocess.run([sys.executable, "-m", "runner", "validate", str(path)], capture_output=True,
                                text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"{path}:8:17: servers.s.tools.approve[0]: warning: '  ' is blank, so it matches no tool",
        f"{path}:8:23: servers.s.tools.approve[1]: warning: 'delete_[all' is a malformed glob: its '[' is "
        "never closed, so it matches only a tool whose name has a literal '['",
        f"{path}:9:13: servers.s.tools.pin[0]: warning: '[z-a]_*' is a malformed glob: a [...] in it "
        "matches no character, so it matches no tool",
        f"{path}:10:24: servers.s.prompts.except[0]: warning: '[!]x' is a malformed glob: its '[' is never "
        "closed, so it matches only a prompt whose name has a literal '['",
    ]
