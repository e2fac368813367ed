"""Watch mode: reloads keep unchanged servers (same PIDs), restart only what changed, reject
invalid edits while the old agent keeps answering, and never lose the conversation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import builders
import pytest
import yaml

from runner.agent.reload import reload_runtime, watch_and_reload
from runner.agent.runtime import Runtime, load_agent
from runner.errors import ManifestError

pytestmark = pytest.mark.anyio
FAST = {"timeout": "10s", "startup_timeout": "30s",
        "restart": {"max_attempts": 2, "backoff": "50ms", "max_backoff": "100ms"}}
RELOADING = {"name": "reloading", "defaults": FAST, "model": {"id": "scripted", "script": "script.yaml"},
             "prompts": {"system": "system.md.j2"}, "checkpointer": "memory"}


def demo(*args: str, **settings: Any) -> dict[str, Any]:
    return builders.server("demo", *args, **settings)


def write_manifest(folder: Path, servers: dict[str, Any], **top: Any) -> Path:
    return builders.write_manifest(folder, servers, **{**RELOADING, **top})


def write_script(folder: Path, turns: int = 20) -> None:
    (folder / "script.yaml").write_text(yaml.safe_dump([f"answer {n}" for n in range(turns)]))


def pids(runtime: Runtime) -> dict[str, int | None]:
    return {key: connection.pid for key, connection in runtime.fleet.connections.items()}


async def ask(runtime: Runtime, text: str) -> dict[str, Any]:
    with anyio.fail_after(30):
        return await runtime.graph.ainvoke({"messages": [("user", text)]}, runtime.config())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write_script(tmp_path)
    (tmp_path / "system.md.j2").write_text("You are version one.")
    return tmp_path


async def test_a_prompt_only_edit_restarts_nothing_and_the_next_turn_uses_it(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo(), "b": demo()})
    async with load_agent(path) as runtime:
        before = pids(runtime)
        await ask(runtime, "first")
        (folder / "system.md.j2").write_text("You are version two.")
        report = await reload_runtime(runtime, changed_files={folder / "system.md.j2"})
        assert report.restarted == [] and report.started == [] and report.stopped == []
        assert "prompts" in report.rebuilt
        result = await ask(runtime, "second")
        assert pids(runtime) == before
        received = runtime.model.primary.received[-1]
        assert received[0].content == "You are version two."
        assert [m.content for m in result["messages"] if m.type == "human"] == ["first", "second"]


async def test_editing_one_servers_args_restarts_only_that_server(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo(), "b": demo()})
    async with load_agent(path) as runtime:
        before = pids(runtime)
        write_manifest(folder, {"a": demo(), "b": demo("--legacy")})
        report = await reload_runtime(runtime)
        after = pids(runtime)
        assert report.restarted == ["b"]
        assert after["a"] == before["a"] and after["b"] != before["b"]
        assert "b__echo" in runtime.catalog.entries


async def test_putting_one_server_in_a_sandbox_restarts_only_that_server(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo(), "b": demo()})
    async with load_agent(path) as runtime:
        before = pids(runtime)
        write_manifest(folder, {"a": demo(), "b": demo(sandbox={})})
        report = await reload_runtime(runtime)
        after = pids(runtime)
        assert report.restarted == ["b"]
        assert after["a"] == before["a"] and after["b"] != before["b"]
        write_manifest(folder, {"a": demo(), "b": demo(sandbox={"network": True})})
        assert (await reload_runtime(runtime)).restarted == ["b"]


async def test_an_args_only_edit_restarts_that_server_and_claims_nothing_else(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo(), "b": demo()})
    async with load_agent(path) as runtime:
        write_manifest(folder, {"a": demo(), "b": demo("--legacy")})
        report = await reload_runtime(runtime, changed_files={path})
        assert (report.restarted, report.rebuilt) == (["b"], [])
        assert report.summary().endswith(": restarted b")


async def test_a_comment_only_edit_reports_nothing_changed(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo()})
    async with load_agent(path) as runtime:
        before = pids(runtime)
        path.write_text("# a comment\n" + path.read_text())
        report = await reload_runtime(runtime, changed_files={path})
        assert report.summary().endswith(": nothing changed")
        assert report.event()["rebuilt"] == [] and pids(runtime) == before


def test_the_connection_fields_are_the_ones_marked_as_restarting() -> None:
    from runner.manifest import HttpServerSpec, StdioServerSpec, restart_fields

    assert restart_fields(StdioServerSpec) == {
        "transport", "command", "args", "env", "env_passthrough", "cwd", "container", "sandbox",
        "startup_timeout", "heartbeat", "restart", "elicitation", "sampling", "logging", "protocol"}
    assert restart_fields(HttpServerSpec) == {
        "transport", "url", "headers", "auth", "startup_timeout", "heartbeat", "restart", "elicitation",
        "sampling", "logging", "protocol"}


async def test_the_runtime_follows_the_files_the_checked_agent_names(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo()})
    async with load_agent(path) as runtime:
        assert runtime.files == {path.resolve(), (folder / "system.md.j2").resolve()}


async def test_servers_are_added_and_removed_and_filters_change_without_restarts(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo(), "b": demo()})
    async with load_agent(path) as runtime:
        before = pids(runtime)
        write_manifest(folder, {"a": demo(tools={"only": ["echo"]}), "c": demo()})
        report = await reload_runtime(runtime)
        assert (report.started, report.stopped, report.restarted) == (["c"], ["b"], [])
        assert "tools" in report.rebuilt
        assert pids(runtime)["a"] == before["a"] and "b" not in runtime.fleet.connections
        names = set(runtime.catalog.entries)
        assert "a__echo" in names and "a__add" not in names and "c__add" in names
        assert not any(name.startswith("b__") for name in names)


async def test_a_changed_model_is_rebuilt_and_the_conversation_continues(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo()})
    async with load_agent(path) as runtime:
        await ask(runtime, "before")
        (folder / "script2.yaml").write_text(yaml.safe_dump(["from the new model"]))
        write_manifest(folder, {"a": demo()}, model={"id": "scripted", "script": "script2.yaml"})
        report = await reload_runtime(runtime)
        assert report.rebuilt == ["model"]
        result = await ask(runtime, "after")
        assert result["messages"][-1].content == "from the new model"
        assert [m.content for m in result["messages"] if m.type == "human"] == ["before", "after"]


async def test_a_changed_timeout_applies_to_the_live_server_without_a_restart(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo()})
    async with load_agent(path) as runtime:
        before = pids(runtime)
        write_manifest(folder, {"a": demo(timeout="150ms")})
        report = await reload_runtime(runtime)
        assert report.restarted == [] and pids(runtime) == before
        with pytest.raises(Exception) as caught:
            await runtime.fleet.connections["a"].call_tool("sleep", {"seconds": 2})
        assert type(caught.value).__name__ == "ServerTimeoutError"


class Events:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.arrived = anyio.Event()

    def __call__(self, event: dict[str, Any]) -> None:
        self.items.append(event)
        self.arrived.set()

    async def next(self) -> dict[str, Any]:
        with anyio.fail_after(30):
            while not self.items:
                self.arrived = anyio.Event()
                await self.arrived.wait()
        return self.items.pop(0)


@asynccontextmanager
async def watching(path: Path) -> AsyncIterator[tuple[Runtime, Events]]:
    """The agent of ``path`` with watch mode running; yields once the watcher is watching."""
    async with load_agent(path) as runtime, anyio.create_task_group() as group:
        events, stop, ready = Events(), anyio.Event(), anyio.Event()
        group.start_soon(lambda: watch_and_reload(runtime, events, stop=stop, ready=ready))
        with anyio.fail_after(10):
            await ready.wait()
        yield runtime, events
        stop.set()


async def test_an_invalid_edit_is_reported_and_the_old_agent_keeps_answering(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo()})
    async with watching(path) as (runtime, events):
        good = path.read_text()
        for broken in ("version: 1\nname: [unclosed\n", good.replace("servers:", "servres:"),
                       good.replace("name: reloading", "name: ${MCP_RUN_TEST_NEVER_SET}")):
            path.write_text(broken)
            event = await events.next()
            assert event["type"] == "reload_error" and event["problems"]
            assert ":" in event["problems"][0]
            output = await runtime.caller.call("a__echo", {"text": "still here"})
            assert "still here" in str(output.content)
        path.write_text(good.replace("name: reloading", "name: recovered"))
        event = await events.next()
        assert event["type"] == "reload"
        assert runtime.manifest.name == "recovered"


async def test_an_edit_to_a_model_whose_package_is_missing_is_located_and_the_old_model_answers(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    candidates = {"mistralai": "langchain_mistralai", "cohere": "langchain_cohere", "groq": "langchain_groq"}
    missing = [provider for provider, module in candidates.items() if not importlib.util.find_spec(module)]
    if not missing:
        pytest.skip(f"every provider package of {sorted(candidates)} is installed here")
    monkeypatch.setenv("MISTRAL_API_KEY", "x")  # the key is not what is missing
    monkeypatch.setenv("COHERE_API_KEY", "x")
    monkeypatch.setenv("GROQ_API_KEY", "x")
    path = write_manifest(folder, {})
    async with load_agent(path) as runtime:
        edited = {**yaml.safe_load(path.read_text()), "model": f"{missing[0]}:some-model"}
        path.write_text(yaml.safe_dump(edited))
        with pytest.raises(ManifestError) as caught:
            await reload_runtime(runtime, changed_files={path})
        [problem] = caught.value.problems
        assert (problem.file, problem.path) == (str(path), "model") and problem.line > 1
        assert "package" in problem.message and "pip install" in problem.message
        assert (await ask(runtime, "still there?"))["messages"][-1].content == "answer 0"


async def test_hostile_files_and_values_in_the_watched_folder_never_stop_watch_mode(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo()})
    async with watching(path) as (runtime, events):
        (folder / "a").symlink_to("b")  # a symbolic link loop next to the manifest
        (folder / "b").symlink_to("a")
        good = path.read_text()
        path.write_text(good + "agent: {max_steps: " + "9" * 5000 + "}\n")  # past int()'s digit limit
        event = await events.next()
        assert event["type"] == "reload_error"
        assert "agent.max_steps: an integer of 5,000 digits" in event["problems"][0]
        output = await runtime.caller.call("a__echo", {"text": "still here"})
        assert "still here" in str(output.content)
        path.write_text(good.replace("name: reloading", "name: recovered"))
        with anyio.fail_after(30):
            while runtime.manifest.name != "recovered":
                assert (await events.next())["type"] == "reload"


async def test_rapid_saves_settle_on_the_final_file(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo()})
    async with watching(path) as (runtime, events):
        for n in range(50):
            if n % 3 == 2:
                path.write_text("version: 1\nservers: {a: {command: 3}}\n")  # invalid
            else:
                write_manifest(folder, {"a": demo(), "b": demo()} if n % 2 else {"a": demo()},
                               description=f"save {n}")
        final = 50
        write_manifest(folder, {"a": demo(), "b": demo()}, description=f"save {final}")
        with anyio.fail_after(60):
            while runtime.manifest.description != f"save {final}":
                await events.next()
        assert sorted(runtime.fleet.connections) == ["a", "b"]
        assert all(c.status == "ready" for c in runtime.fleet.connections.values())
        assert {"a__echo", "b__echo"} <= set(runtime.catalog.entries)


async def test_a_catalog_warning_is_given_once_not_again_on_a_reload_that_changes_nothing(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_manifest(folder, {"a": demo(tools={"rename": {"no_such_tool": "x"}})})
    wanted = "a: tools.rename names 'no_such_tool', which is not offered"
    async with load_agent(path) as runtime:
        assert [r.getMessage() for r in caplog.records].count(wanted) == 1
        await reload_runtime(runtime)
        (folder / "system.md.j2").write_text("You are version two.")
        await reload_runtime(runtime, changed_files={folder / "system.md.j2"})
        warned = [r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "warning")]
        assert warned.count(wanted) == 1 and len(warned) == len(set(warned)), warned


async def test_a_changed_agent_name_is_named_in_the_reload_summary(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo()})
    async with load_agent(path) as runtime:
        write_manifest(folder, {"a": demo()}, name="renamed-agent")
        report = await reload_runtime(runtime)
        assert "renamed the agent to renamed-agent" in report.summary()
        assert "nothing changed" not in report.summary()


async def test_the_reload_summary_names_what_an_edit_changed(folder: Path) -> None:
    path = write_manifest(folder, {"a": demo()})
    async with load_agent(path) as runtime:
        write_manifest(folder, {"a": demo()}, description="now with a description")
        described = await reload_runtime(runtime)
        write_manifest(folder, {"a": demo(prompts={"only": ["greet"]})}, description="now with a description")
        filtered = await reload_runtime(runtime)
    assert described.rebuilt == ["agent"]  # the system prompt says it
    assert described.summary().endswith(": rebuilt agent")
    assert "prompts" in filtered.rebuilt  # the server's prompts offered as commands changed


async def test_a_reload_starts_again_a_server_that_failed_and_reports_what_became_of_it(folder: Path) -> None:
    program = folder / "late.py"  # missing at first: the server exits before the handshake
    path = write_manifest(folder, {"a": demo(), "late": {"command": "python", "args": [str(program)]}})
    async with load_agent(path) as runtime:
        assert runtime.fleet.connections["late"].status == "failed"
        again = await reload_runtime(runtime, changed_files={path})  # still missing
        assert (again.started, again.restarted, list(again.failed)) == ([], [], ["late"])
        demo_script = str(builders.SERVERS / "demo.py")
        program.write_text(f"import runpy\nrunpy.run_path({demo_script!r}, run_name='__main__')\n")
        report = await reload_runtime(runtime, changed_files={path})  # the same manifest, saved again
        assert (report.restarted, report.failed) == (["late"], {})
        assert report.summary().endswith(": restarted late")
        assert runtime.fleet.connections["late"].status == "ready" and "late__echo" in runtime.catalog.entries


async def test_a_server_that_never_started_is_reported_failed_not_started_nor_later_stopped(
    folder: Path,
) -> None:
    path = write_manifest(folder, {"a": demo()})
    async with load_agent(path) as runtime:
        write_manifest(folder, {"a": demo(), "broken": {"command": "mcp-run-no-such-command"}})
        added = await reload_runtime(runtime)
        assert added.started == [] and list(added.event()["failed"]) == ["broken"]
        assert "broken failed to start: " in added.summary() and "started broken" not in added.summary()
        assert "broken: " not in added.summary()  # the key once, not again in front of the reason
        write_manifest(folder, {"a": demo()})
        removed = await reload_runtime(runtime)
        assert removed.stopped == [] and "broken" not in runtime.fleet.connections



async def reloaded_as_recovered(runtime: Runtime, events: Events) -> None:
    """Waits until watch mode has reloaded the manifest renamed 'recovered'."""
    with anyio.fail_after(30):
        while runtime.manifest.name != "recovered":
            await events.next()


@pytest.mark.parametrize("invalid_first", [True, False])
async def test_a_manifest_replaced_by_a_folder_is_reported_and_watching_goes_on(
    folder: Path, invalid_first: bool
) -> None:
    path = write_manifest(folder, {"a": demo()})
    good = path.read_text()
    async with watching(path) as (runtime, events):
        if invalid_first:
            path.write_text("version: [\n")
            assert (await events.next())["type"] == "reload_error"
        path.unlink()
        path.mkdir()
        event = await events.next()
        assert event["type"] == "reload_error"
        assert event["problems"] == [f"{path}:1:1: cannot read the manifest: it is a folder, "
                                     "not a regular file"]
        output = await runtime.caller.call("a__echo", {"text": "still here"})
        assert "still here" in str(output.content)
        path.rmdir()
        path.write_text(good.replace("name: reloading", "name: recovered"))
        await reloaded_as_recovered(runtime, events)


async def test_a_manifest_replaced_by_a_link_into_a_symlink_loop_is_reported_and_watching_goes_on(
    folder: Path,
) -> None:
    path = write_manifest(folder, {"a": demo()})
    good = path.read_text()
    async with watching(path) as (runtime, events):
        (folder / "x").symlink_to("y")  # a loop beside the manifest, then the manifest a link into it
        (folder / "y").symlink_to("x")
        (folder / "agent.tmp").symlink_to("x")
        (folder / "agent.tmp").replace(path)  # as an editor saves: a new file renamed over the old
        event = await events.next()
        assert event["type"] == "reload_error"
        assert event["problems"] == [f"{path}:1:1: cannot read the manifest: "
                                     "Too many levels of symbolic links"]
        path.unlink()
        path.write_text(good.replace("name: reloading", "name: recovered"))
        await reloaded_as_recovered(runtime, events)


async def test_a_reload_keeps_an_agent_whose_model_cannot_be_used_unusable_and_the_others_working(
    folder: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    unset = "T34_RELOAD_NOPE_KEY"
    monkeypatch.delenv(unset, raising=False)
    (folder / "script.yaml").write_text(yaml.safe_dump([
        {"tool_calls": [{"name": "cloud", "args": {"task": "up there?"}},
                        {"name": "helper", "args": {"task": "down here?"}}]},
        "both asked"]))

    def team(helper_says: str) -> Path:
        return write_manifest(folder, {}, agent={"agents": ["cloud", "helper"]}, agents={
            "cloud": {"description": "Asks the cloud.",
                      "model": {"id": "openai:gpt-4.1-mini", "api_key_env": unset}},
            "helper": {"description": helper_says, "model": "offline"}})

    path = team("Helps offline.")
    warning = "agents.cloud.model: "
    async with load_agent(path) as runtime:
        assert sum(warning in r.getMessage() and unset in r.getMessage() for r in caplog.records) == 1
        team("Helps, edited.")
        report = await reload_runtime(runtime, changed_files={path})  # the edit is taken
        assert report.agents == {"changed": ["helper"]}
        assert runtime.manifest.agents["helper"].description == "Helps, edited."
        # Warned at start-up; not again while the model stays as it was.
        assert sum(warning in r.getMessage() for r in caplog.records) == 1
        messages = (await ask(runtime, "go"))["messages"]
    results = {m.name: m for m in messages if m.type == "tool"}
    assert results["cloud"].status == "error"
    assert warning in results["cloud"].content and unset in results["cloud"].content
    assert results["helper"].status == "success"
    assert messages[-1].content == "both asked"
