"""Looking at an agent (tools, call, prompts, prompt) never builds its chat model, so it needs
neither the provider package's credentials nor a reachable provider."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import invoke, server, write_manifest

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
    tmp_path: Path, caplog: pytest.LogCaptureFixture, command: tuple[str, ...], expected: str
) -> None:
    write_agent(tmp_path)
    result = invoke(*command, cwd=tmp_path, env=WITHOUT_OPENAI)
    assert result.exit_code == 0, result.stderr
    assert expected in result.stdout
    # What mcp-run prints on stderr: its own lines, and its warnings (in this process, log records)
    warned = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert "model" not in result.stderr and not [line for line in warned if "model" in line], warned


@pytest.mark.anyio
async def test_an_agent_loaded_without_its_model_has_tools_but_no_graph(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path), model=False) as runtime:
        assert "demo__echo" in runtime.catalog.entries
        with pytest.raises(RunnerError, match="without its model"):
            runtime.graph  # noqa: B018


# What each command may not import: LangChain (and LangSmith, which it pulls in), LangGraph, the
# chat terminal, the OAuth stack of http servers, and for listings the argument validator. With a
# real model too: its provider is read without LangChain, and tool search sizes the definitions
# without making LangChain tools.
NOT_IMPORTED = ("langchain_core", "langsmith", "langgraph", "prompt_toolkit", "jwt", "runner.auth.flow")
NOT_IMPORTED_BY_LISTINGS = (*NOT_IMPORTED, "jsonschema")
# One process runs the commands one after the other and, after each, names the unwanted modules
# loaded so far (any module of LangGraph's packages counts: langgraph, langgraph_sdk, ...). Modules
# only accumulate, so what one command imports is caught at its own check or an earlier one: the
# listings, which may import the least, run first.
IMPORTED_AFTER = """
import json
import sys
from runner.cli import main
for command, unwanted in json.loads(sys.argv[1]):
    try:
        main(command)
    except SystemExit as exit:
        code = exit.code
    else:
        code = None
    loaded = sorted(name for name in sys.modules
                    if name.split(".")[0] in unwanted or name in unwanted or name.startswith("langgraph"))
    print("LOADED", json.dumps({"command": command, "exit": code, "loaded": loaded}), flush=True)
"""
COMMANDS_AND_UNWANTED = [
    (("tools", "agent.yaml"), NOT_IMPORTED_BY_LISTINGS),
    (("prompts", "agent.yaml"), NOT_IMPORTED_BY_LISTINGS),
    (("call", "agent.yaml", "demo__echo", '{"text": "hi"}'), NOT_IMPORTED),
]


@pytest.mark.parametrize("model", ["offline", "openai:gpt-4.1-mini"])
def test_listing_and_calling_import_neither_langchain_nor_what_only_other_commands_need(
    tmp_path: Path, model: str
) -> None:
    write_manifest(tmp_path, {"demo": server("demo")}, name="offline", model=model)
    commands = json.dumps([[list(command), list(unwanted)] for command, unwanted in COMMANDS_AND_UNWANTED])
    environ = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    result = subprocess.run([sys.executable, "-c", IMPORTED_AFTER, commands], capture_output=True, text=True,
                            timeout=240, cwd=tmp_path, env=environ, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    reports = [json.loads(line.removeprefix("LOADED ")) for line in result.stdout.splitlines()
               if line.startswith("LOADED ")]
    ran = [report["command"] for report in reports]
    assert ran == [list(command) for command, _ in COMMANDS_AND_UNWANTED], result.stderr
    for report in reports:
        assert report["exit"] in (0, None), (report, result.stderr)
        assert report["loaded"] == [], report
