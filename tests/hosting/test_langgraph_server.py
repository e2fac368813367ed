"""The agent under LangGraph's own server, as a person starts it: the project's ``langgraph.json``,
``langgraph dev`` without ``--allow-blocking``, driven by LangGraph's SDK. The MCP servers start
once with the server, every run uses them, and they stop with it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
import pytest
from agent_teams import call, write_team
from builders import ROOT, server, write_manifest
from services import free_port

from runner.store.checkpointers import open_checkpointer

pytest.importorskip("langgraph_api", reason="LangGraph's server is not installed (langgraph-cli[inmem])")
from langgraph_sdk import get_client

LANGGRAPH = Path(sys.executable).parent / "langgraph"
START_WAIT = 90.0
STOP_WAIT = 30.0


@dataclass
class LangGraphDev:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> int:
        """Ctrl-C, as a person stops it; its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=STOP_WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_WAIT)
                raise AssertionError(f"langgraph dev did not stop on Ctrl-C: {self.tail()}") from None
        return self.process.returncode

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def start_langgraph_dev(folder: Path, manifest: str | None = None) -> LangGraphDev:
    """``langgraph dev`` in ``folder`` on a free loopback port, once it answers ``/ok``
    (``manifest``: given in the shell as ``MCP_RUN_MANIFEST``)."""
    port = free_port()
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith(("LANGSMITH", "LANGCHAIN")) and key != "MCP_RUN_MANIFEST"}
    environ["LANGSMITH_TRACING"] = "false"  # no tracing: loopback only
    if manifest is not None:
        environ["MCP_RUN_MANIFEST"] = manifest
    log = folder / "langgraph-dev.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
             "--port", str(port)],
            cwd=folder, env=environ, stdout=output, stderr=output, stdin=subprocess.DEVNULL,
        )
    running = LangGraphDev(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + START_WAIT
    while True:
        if process.poll() is not None:
            raise AssertionError(f"langgraph dev exited with code {process.returncode}: {running.tail()}")
        try:
            if httpx.get(f"{running.url}/ok", timeout=2.0).status_code == 200:
                return running
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            running.stop()
            raise AssertionError(f"langgraph dev did not answer within {START_WAIT:g}s: {running.tail()}")
        time.sleep(0.1)  # the server sends no readiness notification


@pytest.fixture
def agent_folder(tmp_path: Path) -> Path:
    """The project's langgraph.json beside a manifest whose demo server tells its process id."""
    write_manifest(tmp_path, {"demo": server("demo")}, model="offline")
    shutil.copy(ROOT / "langgraph.json", tmp_path / "langgraph.json")
    return tmp_path


@pytest.fixture
def langgraph_dev(agent_folder: Path) -> Iterator[LangGraphDev]:
    running = start_langgraph_dev(agent_folder)
    try:
        yield running
    finally:
        running.stop()


def keep_in_the_manifests_checkpointer(folder: Path) -> None:
    config = json.loads((folder / "langgraph.json").read_text())
    config["checkpointer"] = {"path": "runner.hosting.langgraph_server.checkpointer"}
    (folder / "langgraph.json").write_text(json.dumps(config))


def said(messages: list[dict[str, Any]], kind: str) -> list[str]:
    return [message["content"] for message in messages if message["type"] == kind]


async def two_runs_on_one_thread(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``demo__pid`` twice on one thread: once waited for, once streamed; both final states."""
    client = get_client(url=url)
    thread = await client.threads.create()
    question = {"messages": [{"role": "user", "content": "demo__pid"}]}
    with anyio.fail_after(60):
        first = await client.runs.wait(thread["thread_id"], "agent", input=question)
        second: dict[str, Any] = {}
        stream = client.runs.stream(thread["thread_id"], "agent", input=question, stream_mode="values")
        async for part in stream:
            if part.event == "values":
                second = part.data
    return first, second


def test_runs_under_langgraph_dev_share_the_servers_started_once_and_they_stop_with_it(
    langgraph_dev: LangGraphDev,
) -> None:
    first, second = anyio.run(two_runs_on_one_thread, langgraph_dev.url)

    first_pid, second_pid = (int(said(state["messages"], "tool")[-1]) for state in (first, second))
    assert first_pid == second_pid  # the same server process served both runs
    assert said(second["messages"], "human") == ["demo__pid", "demo__pid"]  # the second saw the first
    server_process = psutil.Process(first_pid)
    assert server_process.ppid() == langgraph_dev.process.pid

    assert langgraph_dev.stop() == 0
    _, alive = psutil.wait_procs([server_process], timeout=5.0)
    assert not alive  # stopped with the server, not left behind
    assert "BlockingError" not in langgraph_dev.tail()


def test_with_the_manifests_checkpointer_a_thread_started_under_langgraph_dev_continues_in_mcp_run(
    agent_folder: Path,
) -> None:
    keep_in_the_manifests_checkpointer(agent_folder)  # the manifest's default: .mcp-run/state.sqlite
    running = start_langgraph_dev(agent_folder)
    try:
        first, _ = anyio.run(two_runs_on_one_thread, running.url)
        thread = anyio.run(only_thread, running.url)
    finally:
        assert running.stop() == 0
    assert said(first["messages"], "tool")
    log = running.log.read_text(errors="replace")
    assert "Using custom checkpointer" in log
    assert "missing aprune" not in log and "missing adelete_for_runs" not in log  # its warnings

    later = subprocess.run([sys.executable, "-m", "runner", "agent.yaml", "-p", "hello", "--thread", thread],
                           capture_output=True, text=True, timeout=120, cwd=agent_folder,
                           stdin=subprocess.DEVNULL)
    assert later.returncode == 0, later.stderr
    humans = anyio.run(human_messages, agent_folder / ".mcp-run", thread)
    assert humans == ["demo__pid", "demo__pid", "hello"]


def test_mcp_run_manifest_given_in_the_shell_chooses_the_manifest_langgraph_dev_serves(
    agent_folder: Path,
) -> None:
    write_manifest(agent_folder / "other", {"mine": server("demo")}, name="other", model="offline")
    (agent_folder / "other" / "agent.yaml").rename(agent_folder / "other.yaml")
    running = start_langgraph_dev(agent_folder, manifest="other.yaml")
    try:
        state = anyio.run(one_run, running.url, "mine__pid")
    finally:
        assert running.stop() == 0
    [pid] = said(state["messages"], "tool")  # the tool of other.yaml ran: agent.yaml has none such
    assert pid.isdigit(), state["messages"]


async def one_run(url: str, message: str) -> dict[str, Any]:
    client = get_client(url=url)
    thread = await client.threads.create()
    with anyio.fail_after(60):
        state = await client.runs.wait(thread["thread_id"], "agent",
                                       input={"messages": [{"role": "user", "content": message}]})
    assert isinstance(state, dict)
    return state


async def human_messages(state_dir: Path, thread: str) -> list[str]:
    async with open_checkpointer(None, state_dir=state_dir) as saver:
        state = await saver.aget({"configurable": {"thread_id": thread}})
    assert state is not None
    return [message.content for message in state["channel_values"]["messages"] if message.type == "human"]


async def only_thread(url: str) -> str:
    (thread,) = await get_client(url=url).threads.search()
    return thread["thread_id"]


def test_each_agent_of_agents_is_a_graph_of_its_own_under_langgraph_dev_on_the_same_servers(
    tmp_path: Path,
) -> None:
    write_team(
        tmp_path, [call("demo__pid"), "Main done."],
        {"researcher": {"description": "Does arithmetic.", "tools": ["notes"]},
         "fact-checker": {"description": "Checks.", "tools": ["demo"]}},
        scripts={"researcher": [call("notes__calculate", expression="6*7"), "It is 42."],
                 "fact-checker": [call("demo__pid"), "Checked."]},
        servers={"demo": server("demo")})
    config = json.loads((ROOT / "langgraph.json").read_text())
    config["graphs"].update({name: f"runner.hosting.langgraph_agents:{name}"
                             for name in ("researcher", "fact-checker")})
    (tmp_path / "langgraph.json").write_text(json.dumps(config))
    running = start_langgraph_dev(tmp_path)
    try:
        graphs = anyio.run(graph_ids, running.url)
        researched = anyio.run(one_run_of, running.url, "researcher", "What is 6*7?")
        checked = anyio.run(one_run_of, running.url, "fact-checker", "Check it")
        main = anyio.run(one_run_of, running.url, "agent", "hello")
        demo_servers = [process for process in psutil.Process(running.process.pid).children(recursive=True)
                        if any(part.endswith("demo.py") for part in process.cmdline())]
    finally:
        assert running.stop() == 0
    assert graphs == {"agent", "researcher", "fact-checker"}
    # Each graph is its agent served on its own: the task in, its final answer out.
    assert said(researched["messages"], "human") == ["What is 6*7?"]
    assert said(researched["messages"], "ai") == ["It is 42."]
    assert said(checked["messages"], "ai") == ["Checked."]
    assert said(main["messages"], "ai")[-1] == "Main done."
    # The main agent and the fact-checker called the one demo server the server started.
    assert [process.pid for process in demo_servers] == [int(said(main["messages"], "tool")[-1])]
    assert "BlockingError" not in running.tail()


def test_a_graph_naming_an_agent_the_manifest_does_not_declare_fails_the_start_up(tmp_path: Path) -> None:
    write_team(tmp_path, ["Main done."], {"researcher": {"description": "Does arithmetic."}},
               scripts={"researcher": ["It is 42."]})
    config = json.loads((ROOT / "langgraph.json").read_text())
    config["graphs"]["reseacher"] = "runner.hosting.langgraph_agents:reseacher"
    (tmp_path / "langgraph.json").write_text(json.dumps(config))
    with pytest.raises(AssertionError, match="langgraph dev exited") as failed:
        start_langgraph_dev(tmp_path).stop()
    assert "Could not find graph 'reseacher'" in str(failed.value)


async def graph_ids(url: str) -> set[str]:
    with anyio.fail_after(60):
        return {assistant["graph_id"] for assistant in await get_client(url=url).assistants.search()}


async def one_run_of(url: str, graph: str, message: str) -> dict[str, Any]:
    client = get_client(url=url)
    thread = await client.threads.create()
    with anyio.fail_after(60):
        state = await client.runs.wait(thread["thread_id"], graph,
                                       input={"messages": [{"role": "user", "content": message}]})
    assert isinstance(state, dict)
    return state
