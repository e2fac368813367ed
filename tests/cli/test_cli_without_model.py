"""Looking at an agent (tools, call, prompts, prompt) never builds its chat model, so it needs
neither the provider package's credentials nor a reachable provider."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import mcp_run, server, write_manifest

from runner.agent.runtime import load_agent
from runner.errors import RunnerError

# The provider's credentials are not there.
WITHOUT_OPENAI = {key: None for key in os.environ if key.startswith("OPENAI_")}


def write_agent(folder: Path) -> Path:
    return write_manifest(folder, {"demo": server("demo")}, name="no-model", model="openai:gpt-4.1-mini")


@pytest.mark.parametrize(("command", "expected"), [
    (("tools", "agent.yaml"), "demo__echo"),
    (("call", "agent.yaml", "demo__echo", '{"text": "hi"}'), "hi"),
    (("prompts", "agent.yaml"), "/demo__greet"),
    (("prompt", "agent.yaml", "demo__greet", "name=Ada"), "Hello, Ada!"),
])
def test_inspecting_commands_work_without_the_models_api_key(
    tmp_path: Path, command: tuple[str, ...], expected: str
) -> None:
    write_agent(tmp_path)
    result = mcp_run(*command, cwd=tmp_path, env=WITHOUT_OPENAI)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout
    assert "model" not in result.stderr


@pytest.mark.anyio
async def test_an_agent_loaded_without_its_model_has_tools_but_no_graph(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path), model=False) as runtime:
        assert "demo__echo" in runtime.catalog.entries
        with pytest.raises(RunnerError, match="without its model"):
            runtime.graph  # noqa: B018


LOADED_AFTER = """
import sys
from runner.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit:
    assert exit.code in (0, None), exit.code
print("LOADED", " ".join(sorted(name for name in sys.modules if name.startswith("langgraph"))))
"""


@pytest.mark.parametrize("command", [("tools", "agent.yaml"),
                                     ("call", "agent.yaml", "demo__echo", '{"text": "hi"}'),
                                     ("prompts", "agent.yaml")])
def test_inspecting_commands_do_not_import_langgraph(tmp_path: Path, command: tuple[str, ...]) -> None:
    write_agent(tmp_path)
    environ = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    result = subprocess.run([sys.executable, "-c", LOADED_AFTER, *command], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path, env=environ, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    loaded = result.stdout.rsplit("LOADED", 1)[1].split()
    assert loaded == [], loaded


# What each command may not import: LangChain (and LangSmith, which it pulls in), LangGraph, the
# chat terminal, the OAuth stack of http servers, and for listings the argument validator. With a
# real model too: its provider is read without LangChain, and tool search sizes the definitions
# without making LangChain tools.
NOT_IMPORTED = ("langchain_core", "langsmith", "langgraph", "prompt_toolkit", "jwt", "runner.auth.flow")
NOT_IMPORTED_BY_LISTINGS = (*NOT_IMPORTED, "jsonschema")
IMPORTED_AFTER = """
import sys
from runner.cli import main
unwanted = tuple(sys.argv[1].split(","))
try:
    main(sys.argv[2:])
except SystemExit as exit:
    assert exit.code in (0, None), exit.code
loaded = (name for name in sys.modules if name.split(".")[0] in unwanted or name in unwanted)
print("LOADED", " ".join(sorted(loaded)))
"""


@pytest.mark.parametrize(("command", "unwanted"), [
    (("tools", "agent.yaml"), NOT_IMPORTED_BY_LISTINGS),
    (("prompts", "agent.yaml"), NOT_IMPORTED_BY_LISTINGS),
    (("call", "agent.yaml", "demo__echo", '{"text": "hi"}'), NOT_IMPORTED),
])
@pytest.mark.parametrize("model", ["offline", "openai:gpt-4.1-mini"])
def test_listing_and_calling_import_neither_langchain_nor_what_only_other_commands_need(
    tmp_path: Path, command: tuple[str, ...], unwanted: tuple[str, ...], model: str
) -> None:
    write_manifest(tmp_path, {"demo": server("demo")}, name="offline", model=model)
    result = subprocess.run([sys.executable, "-c", IMPORTED_AFTER, ",".join(unwanted), *command],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    loaded = result.stdout.rsplit("LOADED", 1)[1].split()
    assert loaded == [], loaded
