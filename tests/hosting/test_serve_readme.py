"""The README's "Serving" section runs as written on the bundled agent: the stdio client config, the
HTTP command with its token, the composition snippet (`command: mcp-run`), and every `mcp-run
serve` command it shows names existing options."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
from pathlib import Path

import anyio
import pytest
import yaml
from builders import MCP_RUN, copy_bundled_agent
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from serving import http_agent, http_client, text_of
from test_readme_commands import commands_in, readme_sections

from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn
from runner.manifest.basics import parse_duration
from runner.manifest.servers import DefaultsSpec

LIMIT = 90
CALCULATE = 'notes__calculate {"expression": "6*7"}'


def serving() -> str:
    return readme_sections()["Serving"]


def blocks(language: str) -> list[str]:
    """The section's code blocks in ``language`` ("" for plain ones)."""
    found = re.findall(r"^```(\w*)\n(.*?)^```", serving(), re.MULTILINE | re.DOTALL)
    return [body for kind, body in found if kind == language]


def shown_serve_commands() -> list[str]:
    """Each ``mcp-run serve ...`` command of the section, from ``mcp-run`` on."""
    return ["mcp-run " + command for command in commands_in(serving()) if command.startswith("serve ")]


def test_every_serve_command_shown_parses_with_existing_options() -> None:
    from runner.cli import load_command_module, main

    load_command_module("runner.cli.serve")
    serve = main.commands["serve"]
    commands = shown_serve_commands()
    assert len(commands) >= 4
    for command in commands:
        serve.make_context("serve", shlex.split(command)[2:])  # raises on an unknown option


@pytest.fixture
def bundled(tmp_path: Path) -> Path:
    (tmp_path / "bundled").mkdir()
    return copy_bundled_agent(tmp_path / "bundled")


async def test_the_stdio_client_config_serves_the_bundled_agent(bundled: Path) -> None:
    [config] = [block for block in blocks("json") if "mcpServers" in block]
    entry = next(iter(json.loads(config)["mcpServers"].values()))
    assert entry["command"] == "mcp-run"
    args = [str(bundled / "agent.yaml") if arg.endswith("agent.yaml") else arg for arg in entry["args"]]
    with anyio.fail_after(LIMIT):
        async with Client(StdioServerParameters(command=str(MCP_RUN), args=args)) as client:
            result = await client.call_tool("ask", {"message": CALCULATE})
    assert text_of(result) == "notes__calculate returned: 42"


async def test_the_http_command_with_its_token_serves_the_bundled_agent(bundled: Path) -> None:
    [command] = [c for c in shown_serve_commands() if "--token-env" in c and "--allow-remote" not in c]
    line = next(line for block in blocks("") for line in block.splitlines() if command in line)
    variable, _, token = line.split()[0].partition("=")
    words = shlex.split(command)[2:]
    words[words.index("--http") + 1] = "127.0.0.1:0"  # a free port instead of 8000
    manifest, *options = words
    assert manifest == "agent.yaml"
    http_options = [word for word in options if word not in ("--http", "127.0.0.1:0")]
    with http_agent(bundled / manifest, *http_options, env={variable: token}) as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url, token=token) as client:
                result = await client.call_tool("ask", {"message": CALCULATE})
    assert text_of(result) == "notes__calculate returned: 42"


async def test_the_composition_snippet_makes_the_served_agent_a_tool_of_the_main_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    [snippet] = [block for block in blocks("yaml") if "servers:" in block]
    servers = yaml.safe_load(snippet)["servers"]
    [(key, entry)] = servers.items()
    (tmp_path / Path(entry["args"][1]).parent).mkdir()
    copy_bundled_agent(tmp_path / Path(entry["args"][1]).parent)
    main = tmp_path / "main.yaml"
    main.write_text(yaml.safe_dump({"version": 1, "name": "main", "model": "offline", "servers": servers}))
    monkeypatch.setenv("PATH", f"{MCP_RUN.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    message = f"{key}__ask " + json.dumps({"message": CALCULATE})
    with anyio.fail_after(LIMIT):
        async with load_agent(main) as runtime:
            events = [event async for event in stream_turn(runtime, message)]
    [final] = [event for event in events if event["type"] == "final"]
    assert final["text"] == f"{key}__ask returned: notes__calculate returned: 42"


def test_the_composition_snippet_gives_the_sub_agent_longer_than_the_default_to_start() -> None:
    # A served sub-agent starts its own servers before it answers: 20 s is short on a loaded machine.
    [snippet] = [block for block in blocks("yaml") if "servers:" in block]
    [entry] = yaml.safe_load(snippet)["servers"].values()
    assert "startup_timeout" in entry
    assert parse_duration(entry["startup_timeout"]) > DefaultsSpec().startup_timeout


def openai_section() -> str:
    return serving().split("### Serving over the OpenAI API", 1)[1].split("\n### ", 1)[0]


def on_port(text: str, url: str) -> str:
    """``text`` with the README's address replaced by the served agent's."""
    return text.replace("http://127.0.0.1:8000", url.removesuffix("/mcp"))


async def test_the_openai_api_commands_run_as_written(bundled: Path) -> None:
    section = openai_section()
    [curl_line] = [line for block in blocks("") for line in block.splitlines()
                   if line.startswith("curl ") and line in section]
    [snippet] = [block for block in blocks("python") if "from openai import OpenAI" in block]
    served_options = shlex.split(shown_serve_commands()[0])  # the section opens with the plain command
    with http_agent(bundled / "agent.yaml") as served:
        with anyio.fail_after(LIMIT):
            answered = await anyio.run_process(["bash", "-c", on_port(curl_line, served.url)])
            streamed = await anyio.run_process([sys.executable, "-c", on_port(snippet, served.url)])
    reply = json.loads(answered.stdout)
    assert reply["choices"][0]["message"]["content"] == "notes__calculate returned: 42"
    answer, usage = streamed.stdout.decode().splitlines()
    assert answer == "notes__calculate returned: 42"
    assert usage.endswith(" tokens") and int(usage.split()[0]) > 0  # the offline model's estimate
    assert served_options[:2] == ["mcp-run", "serve"]


async def test_the_tokens_file_recipe_serves_each_caller_with_its_own_token(bundled: Path) -> None:
    section = serving().split("### Callers kept apart", 1)[1].split("\n### ", 1)[0]
    [recipe] = [block for block in blocks("") if "--tokens-file" in block and block in section]
    writing, serving_line = recipe.strip().splitlines()
    await anyio.run_process(["bash", "-c", writing], cwd=bundled)
    tokens = bundled / "tokens.yaml"
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    alice = yaml.safe_load(tokens.read_text())["alice"]
    words = shlex.split(serving_line)[2:]
    words[words.index("--http") + 1] = "127.0.0.1:0"
    manifest, *options = words
    http_options = [str(bundled / word) if word == tokens.name else word  # the command runs in bundled/
                    for word in options if word not in ("--http", "127.0.0.1:0")]
    with http_agent(bundled / manifest, *http_options) as served:
        models = served.url.removesuffix("/mcp") + "/v1/models"
        with anyio.fail_after(LIMIT):
            as_alice = await anyio.run_process(["curl", "-sS", "-H", f"Authorization: Bearer {alice}",
                                                models])
            nobody = await anyio.run_process(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", models])
            async with http_client(served.url, token=alice) as client:
                result = await client.call_tool("ask", {"message": CALCULATE})
    assert [model["id"] for model in json.loads(as_alice.stdout)["data"]] == ["notes-assistant"]
    assert nobody.stdout == b"401"
    assert text_of(result) == "notes__calculate returned: 42"


async def test_the_a2a_command_and_client_snippet_talk_to_the_bundled_agent(bundled: Path) -> None:
    [command] = [c for c in shown_serve_commands() if "--a2a" in c]
    words = shlex.split(command)[2:]
    words[words.index("--http") + 1] = "127.0.0.1:0"  # a free port instead of 8000
    manifest, *options = words
    [snippet] = [block for block in blocks("python") if "a2a.client" in block]
    with http_agent(bundled / manifest, *[word for word in options if word not in ("--http", "127.0.0.1:0")]
                    ) as served:
        script = bundled / "a2a_client.py"
        script.write_text(snippet.replace("http://127.0.0.1:8000/", served.url.removesuffix("mcp")))
        result = await anyio.run_process([sys.executable, str(script)], check=False)
    assert result.returncode == 0, result.stderr.decode()
    assert "TASK_STATE_COMPLETED" in result.stdout.decode()
    assert "notes__calculate returned: 42" in result.stdout.decode()


async def test_the_a2a_snippet_given_the_token_as_the_readme_says_talks_to_an_agent_behind_one(
    bundled: Path
) -> None:
    [snippet] = [block for block in blocks("python") if "a2a.client" in block]
    [with_token] = re.findall(r"`(httpx\.AsyncClient\([^`]*headers=[^`]*\))`", serving())
    token = "a2a-readme-token"
    script = bundled / "a2a_client.py"
    with http_agent(bundled / "agent.yaml", "--a2a", "--token-env", "MCP_RUN_TOKEN",
                    env={"MCP_RUN_TOKEN": token}) as served:
        given = snippet.replace("httpx.AsyncClient(timeout=60)", with_token)
        script.write_text(f"token = {token!r}\n"
                          + given.replace("http://127.0.0.1:8000/", served.url.removesuffix("mcp")))
        with anyio.fail_after(LIMIT):
            result = await anyio.run_process([sys.executable, str(script)], check=False)
    assert given != snippet
    assert result.returncode == 0, result.stderr.decode()
    assert "notes__calculate returned: 42" in result.stdout.decode()
