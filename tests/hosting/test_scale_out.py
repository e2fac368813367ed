"""Two ``mcp-run serve --http`` instances on one PostgreSQL behind HAProxy (round robin), as the
README's scale-out recipe sets them up (its HAProxy configuration, on the test's ports): a thread
started through the balancer continues on the other instance, and when an instance is killed (-9)
in the middle of a turn no completed turn is lost and the thread goes on on the other one. Each
instance runs its own copy of the ``instance`` test server, so a tool result names the instance
that served the turn."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import psutil
import pytest
from builders import ROOT, server, write_manifest
from services import LoadBalancer
from serving import Progress, ServedProcess, http_agent, http_client, text_of

from runner.store.checkpointers import open_checkpointer

LIMIT = 120
PID_ANSWER = re.compile(r"instance__pid returned: (\d+)")


@pytest.fixture
def manifest(tmp_path: Path, postgres_url: str) -> Path:
    return write_manifest(tmp_path, {"instance": server("instance")}, name="scaled", model="offline",
                          checkpointer=postgres_url)


def readme_balancer_config() -> str:
    """The HAProxy configuration of the README's scale-out recipe."""
    section = (ROOT / "README.md").read_text().split("### Scale-out on PostgreSQL", 1)[1]
    found = re.search(r"^```\n(defaults\n.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert found, "the README's scale-out recipe shows no HAProxy configuration"
    return found.group(1)


def port_of(served: ServedProcess) -> int:
    port = urlsplit(served.url).port
    assert port is not None
    return port


def serving_instance(instances: dict[str, ServedProcess], server_pid: int) -> str:
    """The name of the instance whose ``instance`` server has process id ``server_pid``."""
    parent = psutil.Process(server_pid).ppid()
    (name,) = [name for name, served in instances.items() if served.process.pid == parent]
    return name


async def human_messages(url: str, thread: str, state_dir: Path) -> list[str]:
    async with open_checkpointer(url, state_dir=state_dir) as saver:
        state = await saver.aget({"configurable": {"thread_id": thread}})
    assert state is not None
    return [message.content for message in state["channel_values"]["messages"] if message.type == "human"]


async def converse(balancer: LoadBalancer, instances: dict[str, ServedProcess]) -> dict[str, object]:
    """Turns on one thread through the balancer until both instances served one; then a turn that
    hangs in a tool, the instance running it killed -9, and one more turn. What happened, by name."""
    with anyio.fail_after(LIMIT):
        return await _converse(balancer, instances)


async def _converse(balancer: LoadBalancer, instances: dict[str, ServedProcess]) -> dict[str, object]:
    served_by: list[str] = []
    async with http_client(balancer.url("/mcp")) as client:
        thread: str | None = None
        while len(set(served_by)) < 2:
            assert len(served_by) < 8, f"round robin never reached the other instance: {served_by}"
            continued = {"thread": thread} if thread else {}
            result = await client.call_tool("ask", {"message": "instance__pid", **continued})
            assert not result.is_error, text_of(result)
            thread = result.structured_content["thread"]
            pid = int(PID_ANSWER.fullmatch(result.structured_content["answer"]).group(1))
            served_by.append(serving_instance(instances, pid))

        progress = Progress()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool(
                "ask", {"message": "instance__wait", "thread": thread}, progress_callback=progress))
            waiting = await progress.seen("instance__wait: 0 waiting in ")  # as the chat words it
            victim = serving_instance(instances, int(waiting.rsplit(" ", 1)[1]))
            children = psutil.Process(instances[victim].process.pid).children(recursive=True)
            instances[victim].process.kill()
            instances[victim].process.wait()
            group.cancel_scope.cancel()  # the call in flight has lost its instance

    async with http_client(balancer.url("/mcp")) as client:
        after = await client.call_tool("ask", {"message": "instance__pid", "thread": thread})
    assert not after.is_error, text_of(after)
    survivor_pid = int(PID_ANSWER.fullmatch(after.structured_content["answer"]).group(1))
    return {"thread": thread, "served_by": served_by, "victim": victim, "children": children,
            "after": serving_instance(instances, survivor_pid),
            "after_thread": after.structured_content["thread"]}


def test_a_thread_moves_between_instances_and_survives_one_killed_in_the_middle_of_a_turn(
    manifest: Path, postgres_url: str, load_balancer: Callable[..., LoadBalancer], tmp_path: Path
) -> None:
    with http_agent(manifest, "--stateless") as first, http_agent(manifest, "--stateless") as second:
        instances = {"a": first, "b": second}
        balancer = load_balancer({name: port_of(served) for name, served in instances.items()},
                                 config=readme_balancer_config())
        seen = anyio.run(converse, balancer, instances)
        completed = ["instance__pid"] * len(seen["served_by"])

        assert set(seen["served_by"]) == {"a", "b"}  # the thread went from one instance to the other
        assert {"a", "b"} <= set(balancer.served_by())  # and the balancer says so too
        assert seen["after_thread"] == seen["thread"]
        assert seen["after"] != seen["victim"]  # the survivor took the thread over
        _, alive = psutil.wait_procs(seen["children"], timeout=10)
        assert not alive, f"the killed instance left {alive}"

    humans = anyio.run(human_messages, postgres_url, seen["thread"], tmp_path / "state")
    assert humans[: len(completed)] == completed  # no completed turn lost
    assert humans[len(completed):-1] in ([], ["instance__wait"])  # the interrupted one, if it was saved
    assert humans[-1] == "instance__pid"
