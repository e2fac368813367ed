"""Third-party servers driven through real manifests: server-filesystem, server-memory (npm, legacy
era), server-github (npm, built on the oldest SDK: 2024-11-05), mcp-server-time, mcp-server-git
(PyPI, 2026-07-28 era), mcp-server-time behind mcp-proxy (mcp 1.x) over streamable HTTP and SSE, and
mcp-server-sqlite from an environment of its own with mcp<2, as the README's troubleshooting says.
Every tool is listed under a provider-safe namespaced name and called with real arguments on
temporary folders, files and repositories."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest
from thirdparty.interop import (
    LEGACY_ERA,
    MCP1_VENV,
    MODERN_ERA,
    OLDEST_ERA,
    PIXEL_PNG,
    filesystem,
    git,
    github,
    make_repository,
    memory,
    time_server,
    time_server_behind_proxy,
    write_manifest,
)

from runner.agent.runtime import Runtime, load_agent
from runner.errors import ToolError
from runner.tools.naming import NAME_PATTERN

pytestmark = pytest.mark.anyio

FILESYSTEM_TOOLS = {
    "read_file", "read_text_file", "read_media_file", "read_multiple_files", "write_file", "edit_file",
    "create_directory", "list_directory", "list_directory_with_sizes", "directory_tree", "move_file",
    "search_files", "get_file_info", "list_allowed_directories",
}
MEMORY_TOOLS = {
    "create_entities", "create_relations", "add_observations", "delete_entities",
    "delete_observations", "delete_relations", "read_graph", "search_nodes", "open_nodes",
}
GIT_TOOLS = {
    "git_status", "git_diff_unstaged", "git_diff_staged", "git_diff", "git_commit", "git_add",
    "git_reset", "git_log", "git_create_branch", "git_checkout", "git_show", "git_branch",
}
TIME_TOOLS = {"get_current_time", "convert_time"}
SQLITE_TOOLS = {
    "read_query", "write_query", "create_table", "list_tables", "describe_table", "append_insight",
}
GITHUB_TOOLS = {
    "create_or_update_file", "search_repositories", "create_repository", "get_file_contents", "push_files",
    "create_issue", "create_pull_request", "fork_repository", "create_branch", "list_commits", "list_issues",
    "update_issue", "add_issue_comment", "search_code", "search_issues", "search_users", "get_issue",
    "get_pull_request", "list_pull_requests", "create_pull_request_review", "merge_pull_request",
    "get_pull_request_files", "get_pull_request_status", "update_pull_request_branch",
    "get_pull_request_comments", "get_pull_request_reviews",
}


def assert_offered(runtime: Runtime, server: str, era: str, expected: set[str]) -> None:
    """``server`` negotiated ``era`` and every one of its tools is in the catalog, namespaced."""
    connection = runtime.fleet.connections[server]
    assert (connection.status, connection.era) == ("ready", era)
    assert {tool.name for tool in connection.tools} == expected
    offered = {entry.origin.name: name for name, entry in runtime.catalog.entries.items()
               if entry.origin.server == server}
    assert set(offered) == expected
    for original, name in offered.items():
        assert NAME_PATTERN.match(name), name
        assert name == f"{server}__{original}"


async def text_of(runtime: Runtime, tool: str, arguments: dict) -> str:
    output = await runtime.caller.call(tool, arguments)
    assert isinstance(output.content, str), output.content
    return output.content


async def test_filesystem_tools_work_inside_a_temporary_folder_and_refuse_outside_it(tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "pixel.png").write_bytes(PIXEL_PNG)
    async with load_agent(write_manifest(tmp_path / "agent", {"filesystem": filesystem(root)})) as runtime:
        assert_offered(runtime, "filesystem", LEGACY_ERA, FILESYSTEM_TOOLS)

        async def call(tool: str, **arguments: object) -> str:
            return await text_of(runtime, f"filesystem__{tool}", arguments)

        assert str(root.resolve()) in await call("list_allowed_directories")
        notes = root / "notes.txt"
        await call("write_file", path=str(notes), content="alpha\nbeta\ngamma")
        assert notes.read_text() == "alpha\nbeta\ngamma"
        assert await call("read_text_file", path=str(notes), head=2) == "alpha\nbeta"
        assert await call("read_file", path=str(notes), tail=1) == "gamma"
        assert "+BETA" in await call("edit_file", path=str(notes),
                                     edits=[{"oldText": "beta", "newText": "BETA"}])
        assert notes.read_text() == "alpha\nBETA\ngamma"
        await call("create_directory", path=str(root / "sub" / "deeper"))
        await call("move_file", source=str(notes), destination=str(root / "sub" / "notes.txt"))
        assert (root / "sub" / "notes.txt").exists() and not notes.exists()
        assert "BETA" in await call("read_multiple_files", paths=[str(root / "sub" / "notes.txt")])
        listing = await call("list_directory", path=str(root))
        assert sorted(listing.splitlines()) == ["[DIR] sub", "[FILE] pixel.png"]
        assert "pixel.png" in await call("list_directory_with_sizes", path=str(root), sortBy="size")
        tree = json.loads(await call("directory_tree", path=str(root)))
        assert {node["name"] for node in tree} == {"pixel.png", "sub"}
        assert str(root / "sub" / "notes.txt") in await call("search_files", path=str(root),
                                                            pattern="**/*.txt")
        assert "isFile: true" in await call("get_file_info", path=str(root / "sub" / "notes.txt"))

        media = await runtime.caller.call("filesystem__read_media_file", {"path": str(root / "pixel.png")})
        images = [block for block in media.content if block["type"] == "image"]
        assert [(block["mime_type"], base64.b64decode(block["base64"])) for block in images] == [
            ("image/png", PIXEL_PNG)]

        with pytest.raises(ToolError, match="outside allowed directories"):
            await runtime.caller.call("filesystem__read_text_file", {"path": str(tmp_path / "agent.yaml")})
        with pytest.raises(ToolError, match="required property"):
            await runtime.caller.call("filesystem__write_file", {"path": str(root / "x.txt")})
        assert not (root / "x.txt").exists()


async def test_an_image_read_by_the_filesystem_server_reaches_the_model_once(tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "pixel.png").write_bytes(PIXEL_PNG)
    async with load_agent(write_manifest(tmp_path / "agent", {"filesystem": filesystem(root)})) as runtime:
        media = await runtime.caller.call("filesystem__read_media_file", {"path": str(root / "pixel.png")})
    encoded = base64.b64encode(PIXEL_PNG).decode()
    assert not [block for block in media.content if block["type"] == "text" and encoded in block["text"]]


async def test_memory_keeps_a_knowledge_graph_in_the_file_the_manifest_names(tmp_path: Path) -> None:
    memory_file = tmp_path / "graph.jsonl"
    async with load_agent(write_manifest(tmp_path / "agent", {"memory": memory(memory_file)})) as runtime:
        assert_offered(runtime, "memory", LEGACY_ERA, MEMORY_TOOLS)

        async def call(tool: str, **arguments: object) -> object:
            output = await runtime.caller.call(f"memory__{tool}", arguments)
            return output.artifact

        ada = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
        engine = {"name": "Engine", "entityType": "machine", "observations": []}
        assert await call("create_entities", entities=[ada, engine]) == {"entities": [ada, engine]}
        link = {"from": "Ada", "to": "Engine", "relationType": "programmed"}
        assert await call("create_relations", relations=[link]) == {"relations": [link]}
        await call("add_observations",
                   observations=[{"entityName": "Engine", "contents": ["analytical", "never built"]}])
        found = await call("search_nodes", query="analytical")
        assert [entity["name"] for entity in found["entities"]] == ["Engine"]
        opened = await call("open_nodes", names=["Ada"])
        assert opened["entities"] == [ada] and opened["relations"] == [link]
        await call("delete_observations",
                   deletions=[{"entityName": "Engine", "observations": ["never built"]}])
        await call("delete_relations", relations=[link])
        await call("delete_entities", entityNames=["Ada"])
        graph = await call("read_graph")
        assert graph == {"entities": [{**engine, "observations": ["analytical"]}], "relations": []}
    stored = [json.loads(line) for line in memory_file.read_text().splitlines()]
    assert stored == [{"type": "entity", **engine, "observations": ["analytical"]}]


async def test_git_tools_stage_commit_branch_and_inspect_a_temporary_repository(tmp_path: Path) -> None:
    repository = make_repository(tmp_path / "repo")
    where = str(repository)
    async with load_agent(write_manifest(tmp_path / "agent", {"git": git(repository)})) as runtime:
        assert_offered(runtime, "git", MODERN_ERA, GIT_TOOLS)

        async def call(tool: str, **arguments: object) -> str:
            return await text_of(runtime, f"git__{tool}", {"repo_path": where, **arguments})

        (repository / "README.md").write_text("first line\nsecond line\n")
        assert "modified:   README.md" in await call("git_status")
        assert "+second line" in await call("git_diff_unstaged")
        await call("git_add", files=["README.md"])
        assert "+second line" in await call("git_diff_staged")
        await call("git_reset")
        assert await call("git_diff_staged") == "Staged changes:\n"
        await call("git_add", files=["README.md"])
        committed = await call("git_commit", message="add a second line")
        head = git_output(repository, "rev-parse", "HEAD")
        assert head in committed
        assert "add a second line" in await call("git_log", max_count=5)
        assert "+second line" in await call("git_diff", target="HEAD~1")
        assert head in await call("git_show", revision="HEAD")
        await call("git_create_branch", branch_name="feature")
        await call("git_checkout", branch_name="feature")
        assert await call("git_branch", branch_type="local") == "* feature\n  main"
        assert git_output(repository, "branch", "--show-current") == "feature"
        with pytest.raises(ToolError):
            await runtime.caller.call("git__git_show", {"repo_path": where, "revision": "no-such-rev"})


def git_output(repository: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=repository, check=True, capture_output=True, text=True,
                            timeout=30)
    return result.stdout.strip()


async def test_time_tools_answer_in_the_2026_era_and_report_bad_zones_to_the_model(tmp_path: Path) -> None:
    async with load_agent(write_manifest(tmp_path / "agent", {"time": time_server()})) as runtime:
        assert_offered(runtime, "time", MODERN_ERA, TIME_TOOLS)
        now = await runtime.caller.call("time__get_current_time", {"timezone": "Europe/Paris"})
        assert now.artifact["timezone"] == "Europe/Paris"
        assert json.loads(now.content) == now.artifact
        converted = await runtime.caller.call("time__convert_time", {
            "source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
        assert converted.artifact["target"]["datetime"].endswith("T21:00:00+09:00")
        assert converted.artifact["time_difference"] == "+9.0h"
        with pytest.raises(ToolError, match="Mars/Olympus"):
            await runtime.caller.call("time__get_current_time", {"timezone": "Mars/Olympus"})


async def test_the_github_server_on_the_oldest_sdk_is_probed_once_and_then_started_in_2024_11_05(
    tmp_path: Path,
) -> None:
    manifest = write_manifest(tmp_path / "agent", {"github": github()})
    for _ in range(2):  # the second start goes straight to the remembered handshake era
        async with load_agent(manifest) as runtime:
            assert_offered(runtime, "github", OLDEST_ERA, GITHUB_TOOLS)
            assert runtime.fleet.connections["github"].restarts == 0
    remembered = json.loads((tmp_path / "agent" / ".mcp-run" / "eras.json").read_text()).values()
    assert OLDEST_ERA in [entry["era"] for entry in remembered]


async def test_a_python_server_behind_mcp_proxy_answers_over_streamable_http_and_sse(tmp_path: Path) -> None:
    with time_server_behind_proxy() as base:
        servers = {"overhttp": {"url": f"{base}/mcp"}, "oversse": {"url": f"{base}/sse", "transport": "sse"}}
        async with load_agent(write_manifest(tmp_path / "agent", servers)) as runtime:
            for key in servers:
                assert_offered(runtime, key, LEGACY_ERA, TIME_TOOLS)
                converted = await runtime.caller.call(f"{key}__convert_time", {
                    "source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
                assert "21:00:00+09:00" in str(converted.content)
                with pytest.raises(ToolError, match="Mars/Olympus"):
                    await runtime.caller.call(f"{key}__get_current_time", {"timezone": "Mars/Olympus"})


async def test_an_old_pypi_server_that_does_not_pin_mcp_runs_from_its_own_environment_with_mcp_below_2(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    # What the README's `python3 -m venv .venv-sqlite` and `pip install mcp-server-sqlite 'mcp<2'`
    # make in a project folder; install.sh has built it (without a network in the test).
    (project / ".venv-sqlite").symlink_to(MCP1_VENV, target_is_directory=True)
    servers = {"sqlite": {"command": ".venv-sqlite/bin/mcp-server-sqlite", "args": ["--db-path", "notes.db"]}}
    async with load_agent(write_manifest(project, servers)) as runtime:
        assert_offered(runtime, "sqlite", LEGACY_ERA, SQLITE_TOOLS)

        async def call(tool: str, **arguments: object) -> str:
            return await text_of(runtime, f"sqlite__{tool}", arguments)

        await call("create_table", query="CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        await call("write_query", query="INSERT INTO notes (body) VALUES ('first note')")
        assert "first note" in await call("read_query", query="SELECT body FROM notes")
    assert (project / "notes.db").stat().st_size > 0
