"""``mcp-run validate`` end to end, on what a manifest can make the runner execute or read:
system prompt templates (sandboxed, confined to the manifest's folder) and import paths
(``filter``, ``on_fallback``, ``local_tools`` - code that runs, like a stdio command). The commands run
in this process (``invoke``) but for those importing the user's modules, which would stay imported
(and their folders on ``sys.path``) in the test worker: those run ``mcp-run``."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from builders import invoke, mcp_run

SECRET = f"TOP-SECRET-{uuid.uuid4().hex}"
# Inline system prompts that reach for Python internals (classic template-injection payloads).
INTERNALS = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ lipsum.__globals__['os'].environ }}",
    "{{ vars.__class__.__init__.__globals__ }}",
    "{{ self.__init__.__globals__ }}",
    "{{ ().__class__.__base__.__subclasses__() }}",
    "{{ agent.name.format.__self__.__class__ }}",
]
# Template files that try to read outside the manifest's folder.
OUTSIDE = {
    "parent": "x\n{% include '../secret.txt' %}\n",
    "absolute": "x\n{% include '{secret}' %}\n",
    "deep-parent": "x\n{% include 'prompts/../../secret.txt' %}\n",
    "symlink": "x\n{% include 'prompts/link.txt' %}\n",
    "variable": "x\n{% include vars.part %}\n",
}


def agent_folder(root: Path, system: str, *, file_text: str | None = None) -> Path:
    """A manifest folder below ``root``, with a secret file beside it (outside the folder)."""
    folder = root / "agent"
    (folder / "prompts").mkdir(parents=True)
    (root / "secret.txt").write_text(SECRET)
    os.symlink(root / "secret.txt", folder / "prompts" / "link.txt")
    if file_text is not None:
        text = file_text.replace("{secret}", str(root / "secret.txt"))
        (folder / "prompts" / "system.md.j2").write_text(text)
    (folder / "agent.yaml").write_text(
        "version: 1\nname: sandbox\nprompts:\n"
        f"  system: {json.dumps(system)}\n"
        "  vars: {part: ../secret.txt}\n"
    )
    return folder


def validate_all(folders: dict[str, Path]) -> dict[str, tuple[int, str]]:
    """``mcp-run validate agent.yaml`` in every folder: (exit code, all output)."""
    runs = {name: invoke("validate", "agent.yaml", cwd=folder) for name, folder in folders.items()}
    return {name: (run.exit_code, run.stdout + run.stderr) for name, run in runs.items()}


def test_templates_reaching_for_python_internals_are_located_errors(tmp_path: Path) -> None:
    folders = {payload: agent_folder(tmp_path / str(index), payload)
               for index, payload in enumerate(INTERNALS)}
    for payload, (code, output) in validate_all(folders).items():
        assert code == 2, (payload, output)
        assert output.startswith("agent.yaml:4:11: prompts.system: "), (payload, output)
        assert "Traceback" not in output and SECRET not in output, payload


def test_templates_cannot_read_files_outside_the_manifests_folder(tmp_path: Path) -> None:
    folders = {name: agent_folder(tmp_path / name, "prompts/system.md.j2", file_text=text)
               for name, text in OUTSIDE.items()}
    for name, (code, output) in validate_all(folders).items():
        assert code == 2, (name, output)
        assert output.startswith("prompts/system.md.j2:2:1: prompts.system: "), (name, output)
        assert "Traceback" not in output and SECRET not in output, name


IMPORTS_MANIFEST = """\
version: 1
name: imports
local_tools:
  - missing_module_xyz:tool
  - hooks_mod:not_there
  - hooks_mod:VALUE
  - broken_mod:tool
  - side_effect_mod:tool
servers:
  s:
    command: x
    on_fallback: hooks_mod:nope
    tools:
      filter: missing_filter_mod:keep
"""


def test_import_paths_that_do_not_resolve_are_located_errors_and_importing_runs_code(
    tmp_path: Path,
) -> None:
    (tmp_path / "agent.yaml").write_text(IMPORTS_MANIFEST)
    (tmp_path / "hooks_mod.py").write_text("VALUE = 3\n")
    (tmp_path / "broken_mod.py").write_text("raise RuntimeError('broken at import')\n")
    (tmp_path / "side_effect_mod.py").write_text(
        "from pathlib import Path\nPath(__file__).with_name('imported.marker').write_text('ran')\n"
        "def tool() -> str:\n    return 'ok'\n"
    )
    result = mcp_run("validate", "agent.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    problems = [line for line in result.stderr.splitlines() if line.startswith("agent.yaml:")]
    assert [problem.split(": ")[0:2] for problem in problems] == [
        ["agent.yaml:4:5", "local_tools[0]"],
        ["agent.yaml:5:5", "local_tools[1]"],
        ["agent.yaml:6:5", "local_tools[2]"],
        ["agent.yaml:7:5", "local_tools[3]"],
        ["agent.yaml:12:18", "servers.s.on_fallback"],
        ["agent.yaml:14:15", "servers.s.tools.filter"],
    ]
    assert "6 problems found" in result.stderr
    # Naming a module runs it (like a stdio command): validate imported side_effect_mod.
    assert (tmp_path / "imported.marker").read_text() == "ran"


@pytest.mark.parametrize("body", ["import sys\nsys.exit(3)\n",
                                  "def __getattr__(name):\n    raise ValueError(name)\n"],
                         ids=["sys-exit-at-import", "getattr-raises"])
def test_a_module_that_misbehaves_while_imported_is_a_located_error(tmp_path: Path, body: str) -> None:
    (tmp_path / "agent.yaml").write_text("version: 1\nname: imports\nlocal_tools: [odd_mod:tool]\n")
    (tmp_path / "odd_mod.py").write_text(body)
    result = mcp_run("validate", "agent.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("agent.yaml:3:") and "Traceback" not in result.stderr


def test_an_unknown_model_provider_is_a_located_error_listing_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text("version: 1\nname: models\nmodel: foo:bar\n")
    result = invoke("validate", "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 2
    first = result.stderr.splitlines()[0]
    assert first.startswith("agent.yaml:3:8: model: unknown model provider 'foo': use provider:model")
    assert all(name in first for name in ("anthropic", "openai", "ollama", "'offline'", "'scripted'"))


WARNINGS_MANIFEST = """\
version: 1
name: warnings
model:
  id: openai:gpt-4.1-mini
  fallbacks: [groq:llama-3.1-8b-instant, offline]
servers:
  absent: {command: absent-tool}
  present: {command: present-tool}
  own-path: {command: other-tool, env: {PATH: other}}
  interpreter: {command: python}
  script: {command: ./serve.sh}
  missing-script: {command: bin/nothing.sh}
"""


def test_what_may_be_installed_before_the_run_is_a_located_warning_and_validate_passes(
    tmp_path: Path,
) -> None:
    (tmp_path / "agent.yaml").write_text(WARNINGS_MANIFEST)
    for folder, name in (("bin", "present-tool"), ("other", "other-tool")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text("#!/bin/sh\n")
        (tmp_path / folder / name).chmod(0o755)
    (tmp_path / "serve.sh").write_text("#!/bin/sh\n")  # not executable
    env = {"PATH": str(tmp_path / "bin"), "OPENAI_API_KEY": "", "GROQ_API_KEY": ""}
    result = invoke("validate", "agent.yaml", cwd=tmp_path, env=env)
    assert result.exit_code == 0, result.output
    assert "'warnings' is valid" in result.stdout
    assert result.stderr.splitlines() == [
        "agent.yaml:4:7: model.id: warning: model 'openai:gpt-4.1-mini' reads its API key from "
        "OPENAI_API_KEY, which is not set: export OPENAI_API_KEY=… (or name another variable with "
        "model.api_key_env)",
        "agent.yaml:5:15: model.fallbacks[0]: warning: model 'groq:llama-3.1-8b-instant' needs the "
        "langchain-groq package, which is not installed: pip install langchain-groq",
        "agent.yaml:5:15: model.fallbacks[0]: warning: model 'groq:llama-3.1-8b-instant' reads its "
        "API key from GROQ_API_KEY, which is not set: export GROQ_API_KEY=…",
        "agent.yaml:7:21: servers.absent.command: warning: command 'absent-tool' is not found on "
        "PATH, so the server cannot start as things are (fine if it is installed before the run)",
        "agent.yaml:11:21: servers.script.command: warning: command './serve.sh' is not an "
        "executable file, so the server cannot start as things are (fine if it is installed "
        "before the run)",
        "agent.yaml:12:29: servers.missing-script.command: warning: command 'bin/nothing.sh' does "
        "not exist, so the server cannot start as things are (fine if it is installed before the "
        "run)",
    ]


def test_a_working_directory_that_does_not_exist_fails_validate(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text(
        "version: 1\nname: folders\nservers:\n  s: {command: python, cwd: data}\n")
    result = invoke("validate", "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "agent.yaml:4:29: servers.s.cwd: working directory 'data' does not exist")


def test_a_container_engine_or_bubblewrap_not_installed_is_a_located_warning(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text(
        "version: 1\nname: isolated\nservers:\n"
        "  boxed: {command: python, container: {image: 'python:3.12-slim'}}\n"
        "  podded: {command: python, container: {image: 'python:3.12-slim', engine: podman}}\n"
        "  sandboxed: {command: python, sandbox: {}}\n")
    (tmp_path / "bin").mkdir()  # a PATH without docker, podman or bwrap
    result = invoke("validate", "agent.yaml", cwd=tmp_path, env={"PATH": str(tmp_path / "bin")})
    assert result.exit_code == 0, result.output
    later = "so the server cannot start as things are (fine if it is installed before the run)"
    assert result.stderr.splitlines() == [
        f"agent.yaml:4:39: servers.boxed.container: warning: no container engine is installed (neither "
        f"docker nor podman is on PATH), {later}",
        f"agent.yaml:5:40: servers.podded.container: warning: container engine 'podman' is not found on "
        f"PATH, {later}",
        f"agent.yaml:6:41: servers.sandboxed.sandbox: warning: bubblewrap (bwrap) is not found on "
        f"PATH, {later}",
    ]
