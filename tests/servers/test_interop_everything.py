"""server-everything (npm, legacy era) through real manifests, over stdio and streamable HTTP: its
tools (text, images, resource links, embedded resources, structured content, annotations), prompts
with arguments, resources, progress notifications, list_changed announcements - including the burst
it sends right after initialize - and the environment a stdio server gets.

The HTTP server runs once for the module (a subprocess on a free loopback port); each test opens its
own MCP session on it. Over stdio each test starts its own process through the manifest.

The post-initialize burst is tested over stdio only: over HTTP the server sends it on the standalone
GET stream, and drops it when the client has not opened that stream yet (a race in the server)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from langgraph.types import Command
from thirdparty.interop import LEGACY_ERA, everything, everything_over_http, write_manifest

from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn
from runner.errors import PromptError, ToolError
from runner.servers import ServerConnection
from runner.tools.naming import NAME_PATTERN

pytestmark = pytest.mark.anyio

WAIT = 15.0  # bound for anything the server announces on its own
# Registered once the client has initialized (the list_changed burst); runs only as a task.
TASK_TOOL = "simulate-research-query"
ALWAYS_REGISTERED = {
    "echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
    "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
    "toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation",
}
# Registered only for clients declaring elicitation / sampling / roots (the chat declares the first two).
ASKING_TOOLS = {"trigger-elicitation-request", "trigger-url-elicitation", "trigger-sampling-request"}
PROMPTS = {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"}
HELLO_DATA_URI = "data:text/plain;base64," + base64.b64encode(b"hello").decode()


@pytest.fixture(scope="module")
def everything_url() -> Iterator[str]:
    with everything_over_http() as url:
        yield url


@pytest.fixture(params=["stdio", "http"])
def everything_spec(request: pytest.FixtureRequest, everything_url: str) -> dict[str, Any]:
    if request.param == "http":
        return {"url": everything_url, "resources": True}
    return everything(resources=True)


def agent_file(folder: Path, spec: dict[str, Any]) -> Path:
    return write_manifest(folder, {"everything": spec})


async def call(runtime: Runtime, tool: str, **arguments: Any) -> Any:
    return await runtime.caller.call(f"everything__{tool}", arguments)


async def test_tools_are_listed_and_their_results_keep_text_images_links_and_structure(
    tmp_path: Path, everything_spec: dict[str, Any]
) -> None:
    async with load_agent(agent_file(tmp_path, everything_spec)) as runtime:
        connection = runtime.fleet.connections["everything"]
        assert (connection.status, connection.era) == ("ready", LEGACY_ERA)
        listed = {tool.name for tool in connection.tools}
        assert listed == ALWAYS_REGISTERED | ASKING_TOOLS | {TASK_TOOL}  # registered after initialize
        assert all(NAME_PATTERN.match(name) for name in runtime.catalog.entries)
        offered = {f"everything__{name}" for name in listed}
        assert offered <= set(runtime.catalog.entries)

        assert (await call(runtime, "echo", message="hi")).content == "Echo: hi"
        assert (await call(runtime, "get-sum", a=2, b=40)).content == "The sum of 2 and 40 is 42."
        weather = await call(runtime, "get-structured-content", location="Chicago")
        assert set(weather.artifact) == {"temperature", "conditions", "humidity"}
        assert json.loads(weather.content) == weather.artifact

        image = await call(runtime, "get-tiny-image")
        kinds = [block["type"] for block in image.content]
        assert kinds == ["text", "image", "text"]
        assert base64.b64decode(image.content[1]["base64"]).startswith(b"\x89PNG")

        # Content meant only for the user (audience ["user"]) is not shown to the model.
        debug = await call(runtime, "get-annotated-message", messageType="debug", includeImage=True)
        assert debug.content == "Debug: Cache hit ratio 0.95, latency 150ms"
        success = await call(runtime, "get-annotated-message", messageType="success")
        assert success.content == "(the tool returned no content)"

        links = await call(runtime, "get-resource-links", count=2)
        assert "demo://resource/dynamic/blob/1" in links.content
        assert "demo://resource/dynamic/text/2" in links.content

        text = await call(runtime, "get-resource-reference", resourceType="Text", resourceId=4)
        assert "Resource demo://resource/dynamic/text/4 (text/plain):\nResource 4:" in text.content
        blob = await call(runtime, "get-resource-reference", resourceType="Blob", resourceId=5)
        assert "Resource demo://resource/dynamic/blob/5 (text/plain):\nResource 5:" in blob.content

        gzipped = await call(runtime, "gzip-file-as-resource", name="hello.gz", data=HELLO_DATA_URI,
                             outputType="resource")
        (file_block,) = gzipped.content
        assert (file_block["type"], file_block["mime_type"]) == ("file", "application/gzip")
        assert base64.b64decode(file_block["base64"]).startswith(b"\x1f\x8b")
        link = await call(runtime, "gzip-file-as-resource", name="link.gz", data=HELLO_DATA_URI)
        assert "demo://resource/session/link.gz" in link.content

        for toggle in ("toggle-simulated-logging", "toggle-subscriber-updates"):
            assert "Started" in (await call(runtime, toggle)).content
            assert "Stopped" in (await call(runtime, toggle)).content
        assert "Steps: 2" in (await call(runtime, "trigger-long-running-operation",
                                         duration=0.1, steps=2)).content
        with pytest.raises(ToolError, match="location"):
            await call(runtime, "get-structured-content", location="Paris")


async def test_prompts_with_arguments_and_resources_reach_the_agent(
    tmp_path: Path, everything_spec: dict[str, Any]
) -> None:
    async with load_agent(agent_file(tmp_path, everything_spec)) as runtime:
        assert {command.name for command in runtime.prompt_catalog} == {
            f"everything__{name}" for name in PROMPTS}
        (simple,) = await runtime.prompt_messages("/everything__simple-prompt")
        assert (simple.type, simple.content) == ("human", "This is a simple prompt without arguments.")
        (weather,) = await runtime.prompt_messages('/everything__args-prompt "city=New York" state=NY')
        assert weather.content == "What's weather in New York, NY?"
        (team,) = await runtime.prompt_messages(
            "/everything__completable-prompt department=Engineering name=Alice")
        assert team.content == "Please promote Alice to the head of the Engineering team."
        (embedded,) = await runtime.prompt_messages(
            "/everything__resource-prompt resourceType=Text resourceId=3")
        texts = [block["text"] for block in embedded.content if block["type"] == "text"]
        assert any(text.startswith("Resource demo://resource/dynamic/text/3") for text in texts)
        with pytest.raises(PromptError, match="city"):
            await runtime.prompt_messages("/everything__args-prompt state=NY")

        listing = (await call(runtime, "list_resources")).content
        assert "demo://resource/static/document/architecture.md" in listing
        assert "demo://resource/dynamic/text/{resourceId}" in listing
        document = (await call(runtime, "read_resource",
                               uri="demo://resource/static/document/architecture.md")).content
        assert document.startswith("Resource demo://resource/static/document/architecture.md (text/markdown)")
        templated = (await call(runtime, "read_resource", uri="demo://resource/dynamic/text/9")).content
        assert "Resource 9: This is a plaintext resource" in templated


async def test_progress_and_resource_announcements_reach_the_runner(
    tmp_path: Path, everything_spec: dict[str, Any]
) -> None:
    progress: list[tuple[float, float | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))

    async with load_agent(agent_file(tmp_path, everything_spec)) as runtime:
        connection = runtime.fleet.connections["everything"]
        result = await connection.call_tool("trigger-long-running-operation", {"duration": 0.2, "steps": 4},
                                            progress=on_progress)
        assert not result.is_error
        assert progress == [(1, 4), (2, 4), (3, 4), (4, 4)]

        # The tool registers a session resource: the server announces it, the catalogue follows.
        async with runtime.fleet.subscribe() as changes:
            await call(runtime, "gzip-file-as-resource", name="fresh.gz", data=HELLO_DATA_URI)
            with anyio.fail_after(WAIT):
                change = await changes.receive()
        assert (change.server, change.kind, change.added) == (
            "everything", "resources", ("demo://resource/session/fresh.gz",))
        assert "demo://resource/session/fresh.gz" in {str(resource.uri) for resource in connection.resources}


async def test_the_list_changed_burst_after_initialize_changes_nothing_and_restarts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    relisted: list[tuple[set[str], list[Any]]] = []
    burst_handled = anyio.Event()
    relist = ServerConnection.relist

    async def recording_relist(self: ServerConnection, client: Any, kinds: Any) -> list[Any]:
        changes = await relist(self, client, kinds)
        relisted.append((set(kinds), changes))
        burst_handled.set()
        return changes

    monkeypatch.setattr(ServerConnection, "relist", recording_relist)
    async with load_agent(agent_file(tmp_path, everything())) as runtime:
        with anyio.fail_after(WAIT):
            await burst_handled.wait()
        connection = runtime.fleet.connections["everything"]
        # The tool registered after initialize was already in the first listing: the re-list
        # the announcement causes finds nothing new, and the session stays the first one.
        assert relisted[0] == ({"tools"}, [])
        assert {tool.name for tool in connection.tools} == ALWAYS_REGISTERED | ASKING_TOOLS | {TASK_TOOL}
        assert (connection.status, connection.sessions, connection.restarts) == ("ready", 1, 0)


async def test_a_stdio_server_sees_its_manifest_env_and_the_allow_list_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTEROP_API_TOKEN", "not-for-servers")
    spec = everything(env={"GREETING": "hello"})
    async with load_agent(agent_file(tmp_path, spec)) as runtime:
        seen = json.loads((await call(runtime, "get-env")).content)
    assert seen["GREETING"] == "hello"
    assert "PATH" in seen
    assert "INTEROP_API_TOKEN" not in seen


async def turn_events(runtime: Runtime, message: Any) -> list[dict[str, Any]]:
    with anyio.fail_after(60):
        return [event async for event in stream_turn(runtime, message)]


async def test_its_task_only_tool_runs_as_a_task_with_status_events(
    tmp_path: Path, everything_spec: dict[str, Any]
) -> None:
    async with load_agent(agent_file(tmp_path, everything_spec)) as runtime:
        events = await turn_events(runtime, f'everything__{TASK_TOOL} {{"topic": "tides"}}')
    statuses = [(event["status"], event["message"]) for event in events if event["type"] == "task"]
    assert statuses[0] == ("working", "Gathering sources...")
    assert statuses[-1][0] == "completed"
    assert len(statuses) >= 3  # polled once a second, the 1-second stages show on the way
    [result] = [event for event in events if event["type"] == "tool_result"]
    assert result["status"] == "success" and result["text"].startswith("# Research Report: tides")


async def test_its_task_asks_for_clarification_through_the_graph_while_input_is_required(
    tmp_path: Path,
) -> None:
    async with load_agent(agent_file(tmp_path, everything())) as runtime:
        asking = f'everything__{TASK_TOOL} {{"topic": "python", "ambiguous": true}}'
        events = await turn_events(runtime, asking)
        [question] = [event for event in events if event["type"] == "elicitation"]
        assert "multiple interpretations" in question["message"]
        assert "input_required" in [event["status"] for event in events if event["type"] == "task"]
        answer = {"action": "accept", "content": {"interpretation": "snake"}}
        events = await turn_events(runtime, Command(resume=answer))
    [result] = [event for event in events if event["type"] == "tool_result"]
    assert "- **Clarification**: snake" in result["text"]


async def test_a_textual_blob_in_a_prompt_reaches_the_model_as_text(
    everything_url: str, tmp_path: Path
) -> None:
    async with load_agent(agent_file(tmp_path, {"url": everything_url})) as runtime:
        (message,) = await runtime.prompt_messages(
            "/everything__resource-prompt resourceType=Blob resourceId=3")
    assert all(block["type"] == "text" for block in message.content)
    assert any("Resource 3: This is a base64 blob" in block["text"] for block in message.content)


async def test_its_elicitation_tool_asks_through_the_graph_and_gets_the_answer(
    tmp_path: Path, everything_spec: dict[str, Any]
) -> None:
    async with load_agent(agent_file(tmp_path, everything_spec)) as runtime:
        events = await turn_events(runtime, "everything__trigger-elicitation-request")
        [question] = [event for event in events if event["type"] == "elicitation"]
        assert question["mode"] == "form" and question["schema"]["required"] == ["name"]
        answer = {"action": "accept", "content": {"name": "Ada", "check": True}}
        events = await turn_events(runtime, Command(resume=answer))
    [result] = [event for event in events if event["type"] == "tool_result"]
    assert "User provided the requested information" in result["text"]
    assert '"firstLine": "It was a dark and stormy night."' in result["text"]  # a schema default


async def test_its_sampling_tool_is_answered_by_the_scripted_model(
    tmp_path: Path, everything_spec: dict[str, Any]
) -> None:
    (tmp_path / "script.yaml").write_text(json.dumps([
        {"tool_calls": [{"name": "everything__trigger-sampling-request", "args": {"prompt": "hi"}}]},
        "a sampled answer", "done",
    ]))
    path = write_manifest(tmp_path, {"everything": {**everything_spec, "sampling": "allow"}},
                          model="scripted")
    text = path.read_text().replace("id: scripted", "id: scripted\n  script: script.yaml")
    path.write_text(text)
    async with load_agent(path) as runtime:
        events = await turn_events(runtime, "sample something")
    [result] = [event for event in events if event["type"] == "tool_result"]
    assert "LLM sampling result" in result["text"] and "a sampled answer" in result["text"]


async def test_its_roots_tool_appears_with_roots_and_lists_the_manifest_folders(
    tmp_path: Path, everything_spec: dict[str, Any]
) -> None:
    async with load_agent(agent_file(tmp_path, {**everything_spec, "roots": ["work"]})) as runtime:
        assert "everything__get-roots-list" in runtime.catalog.entries
        with anyio.fail_after(WAIT):
            listing = await call(runtime, "get-roots-list")
    assert (tmp_path / "work").as_uri() in listing.content


async def test_its_long_running_tool_shows_progress_events(
    tmp_path: Path, everything_spec: dict[str, Any]
) -> None:
    async with load_agent(agent_file(tmp_path, everything_spec)) as runtime:
        events = await turn_events(
            runtime, 'everything__trigger-long-running-operation {"duration": 0.2, "steps": 2}')
    progress = [(event["progress"], event["total"]) for event in events if event["type"] == "progress"]
    assert progress == [(1, 2), (2, 2)]
