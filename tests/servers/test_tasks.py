"""Tool calls that run as tasks (2025-11-25): created, polled, fetched, and cancelled when the
turn stops or times out; statuses as ``task`` events. Against ``tests/mcp_servers/tasks.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import server, write_manifest
from langgraph.types import Command

from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn
from runner.errors import ToolError

pytestmark = pytest.mark.anyio

WAIT = 30.0


def write_agent(folder: Path, *server_args: str, **settings: Any) -> Path:
    tasks = server("tasks", *server_args, **{"timeout": "20s", **settings})
    return write_manifest(folder, {"tasks": tasks}, name="tasks", model="offline", checkpointer="memory")


async def turn(runtime: Runtime, message: Any) -> list[dict[str, Any]]:
    with anyio.fail_after(WAIT):
        return [event async for event in stream_turn(runtime, message)]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


async def seen(runtime: Runtime) -> list[str]:
    """The task requests the server received, as ``<method> <taskId>``."""
    return (await runtime.caller.call("tasks__seen", {})).content.splitlines()


async def test_a_task_only_tool_runs_as_a_task_with_its_statuses_as_events(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path)) as runtime:
        events = await turn(runtime, 'tasks__steps {"steps": 3, "interval_ms": 100}')
        requests = await seen(runtime)
    statuses = [(event["status"], event["message"]) for event in of_type(events, "task")]
    assert statuses[0][0] == "working" and statuses[-1] == ("completed", None)
    messages = [message for _, message in statuses[1:-1]]
    assert messages and messages == sorted(set(messages))  # each new step once, in order
    assert set(messages) <= {"step 1 of 3", "step 2 of 3", "step 3 of 3"}
    task = of_type(events, "task")[0]
    assert (task["tool"], task["server"]) == ("tasks__steps", "tasks")
    [result] = of_type(events, "tool_result")
    assert (result["status"], result["text"]) == ("success", "3 steps done")
    assert f"tasks/result {task['task_id']}" in requests
    assert all("tasks/cancel" not in request for request in requests)


async def test_a_stopped_turn_cancels_the_task_on_the_server(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path)) as runtime:
        with anyio.fail_after(WAIT):
            with anyio.CancelScope() as stopped:  # what Ctrl-C does to the chat's turn
                async for event in stream_turn(runtime, "tasks__forever"):
                    if event["type"] == "task":
                        task_id = event["task_id"]
                        stopped.cancel()
            requests = await seen(runtime)
    assert stopped.cancelled_caught
    assert f"tasks/cancel {task_id}" in requests


async def test_a_stopped_turn_still_yields_the_cancelled_status_of_its_task(tmp_path: Path) -> None:
    events = []
    async with load_agent(write_agent(tmp_path)) as runtime:
        with anyio.fail_after(WAIT):
            with anyio.CancelScope() as stopped:  # what Ctrl-C does to the chat's turn
                async for event in stream_turn(runtime, "tasks__forever"):
                    events.append(event)
                    if event["type"] == "task":
                        stopped.cancel()
    assert stopped.cancelled_caught
    first, *_, last = of_type(events, "task")
    assert (first["status"], last["status"]) == ("working", "cancelled")
    assert (last["task_id"], last["tool"], last["server"]) == (first["task_id"], "tasks__forever", "tasks")
    assert events[-1] is last


async def test_a_task_that_outlives_the_timeout_is_cancelled_and_the_model_hears_it(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path, timeout="300ms")) as runtime:
        events = await turn(runtime, "tasks__forever")
        requests = await seen(runtime)
    [result] = of_type(events, "tool_result")
    assert result["status"] == "error" and "timed out after 0.3s" in result["text"]
    [task_id] = {event["task_id"] for event in of_type(events, "task")}
    assert f"tasks/cancel {task_id}" in requests


async def test_with_max_timeout_each_status_change_extends_the_idle_limit(tmp_path: Path) -> None:
    path = write_agent(tmp_path, timeout="400ms", max_timeout="20s")
    async with load_agent(path) as runtime:
        with anyio.fail_after(WAIT):
            output = await runtime.caller.call("tasks__steps", {"steps": 6, "interval_ms": 200})
    assert output.content == "6 steps done"  # 1.2s in all, never 400ms without a new status


async def test_with_max_timeout_a_task_without_a_status_change_times_out_after_the_idle_limit(
    tmp_path: Path,
) -> None:
    async with load_agent(write_agent(tmp_path, timeout="300ms", max_timeout="20s")) as runtime:
        with anyio.fail_after(WAIT), pytest.raises(ToolError, match="without a status change"):
            await runtime.caller.call("tasks__forever", {})
        assert (await seen(runtime))[-1].startswith("tasks/cancel ")


async def test_a_failed_task_is_an_error_result_with_the_servers_text(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path)) as runtime:
        events = await turn(runtime, "tasks__failing")
    [result] = of_type(events, "tool_result")
    assert result["status"] == "error" and "it broke" in result["text"]
    assert of_type(events, "task")[-1]["status"] == "failed"


async def test_a_task_the_server_cancels_is_an_error_result(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path)) as runtime:
        with anyio.fail_after(WAIT), pytest.raises(ToolError, match="the server cancelled the task"):
            await runtime.caller.call("tasks__dropped", {})


async def test_a_question_the_task_asks_while_input_is_required_is_answered_through_the_graph(
    tmp_path: Path,
) -> None:
    async with load_agent(write_agent(tmp_path)) as runtime:
        events = await turn(runtime, "tasks__clarify")
        [question] = of_type(events, "elicitation")
        assert question["message"] == "Which colour?"
        assert "input_required" in [event["status"] for event in of_type(events, "task")]
        events = await turn(runtime, Command(resume={"action": "accept", "content": {"colour": "red"}}))
    [result] = of_type(events, "tool_result")
    assert result["text"] == 'clarified: accept {"colour": "red"}'
    assert [event["status"] for event in of_type(events, "task")][-1] == "completed"


@pytest.mark.parametrize(("setting", "expected"), [("auto", "ran as a plain call"),
                                                    ("always", "ran as a task")])
async def test_a_tool_that_allows_tasks_runs_as_one_only_when_tasks_is_always(
    tmp_path: Path, setting: str, expected: str
) -> None:
    async with load_agent(write_agent(tmp_path, tasks=setting)) as runtime:
        with anyio.fail_after(WAIT):
            output = await runtime.caller.call("tasks__either", {})
    assert output.content == expected


async def test_with_tasks_never_task_only_tools_are_not_offered_and_others_run_plainly(
    tmp_path: Path,
) -> None:
    async with load_agent(write_agent(tmp_path, tasks="never")) as runtime:
        offered = set(runtime.catalog.entries)
        warnings = runtime.catalog.warnings
        with anyio.fail_after(WAIT):
            output = await runtime.caller.call("tasks__either", {})
    assert "tasks__steps" not in offered and "tasks__either" in offered
    assert "tasks: tool 'steps' skipped: it only runs as a task (tasks: never)" in warnings
    assert output.content == "ran as a plain call"


async def test_a_server_that_does_not_declare_tasks_gets_no_task_request(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path, "--no-capability", tasks="always")) as runtime:
        with anyio.fail_after(WAIT):
            output = await runtime.caller.call("tasks__either", {})
            with pytest.raises(ToolError, match="the server does not declare task support"):
                await runtime.caller.call("tasks__steps", {})
    assert output.content == "ran as a plain call"


def test_the_chat_shows_the_task_status_and_ctrl_c_cancels_the_task_on_the_server(tmp_path: Path) -> None:
    from builders import chat_in_a_terminal

    write_agent(tmp_path)
    with chat_in_a_terminal(tmp_path) as chat:
        chat.sendline("tasks__forever")
        chat.expect(r"… tasks__forever: task working working forever")
        chat.sendcontrol("c")
        chat.expect("turn interrupted")
        chat.expect("> ")
        chat.sendline("tasks__seen")
        chat.expect(r"returned: tasks/get task-\d+")
        chat.expect(r"tasks/cancel task-\d+")
        chat.expect("> ")
    assert chat.exitstatus == 0
