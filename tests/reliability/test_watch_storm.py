"""Watch mode under a storm: a hundred rapid edits, valid and invalid mixed, servers added, removed
and restarted, while calls keep running - every call is answered, the agent still takes turns,
the final state is the final file's, and no process is left behind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from reliability.support import manifest_document, wire
from runner.agent.checks import check_agent
from runner.agent.reload import watch_and_reload
from runner.agent.runtime import Runtime, load_agent

pytestmark = pytest.mark.anyio

EDITS = 100
PACE_EVERY = 5  # bursts of this many edits; a reload (or a rejection) ends each burst
SETTLE_LIMIT = 60.0

INVALID = [
    "version: 1\nname: [unclosed\n",  # YAML syntax
    "version: 1\nname: storm\nservres: {}\n",  # unknown key
    "version: 1\nname: ${MCP_RUN_STORM_NEVER_SET}\n",  # unset variable
    "version: 1\nname: storm\nservers: {a: {command: 3}}\n",  # wrong type
]


def edit(number: int) -> tuple[str, dict[str, Any] | None]:
    """The text of edit ``number`` and, for a valid one, its document."""
    if number % 4 == 3:
        return INVALID[number // 4 % len(INVALID)], None
    servers: dict[str, Any] = {
        # a is never restarted: only its filter changes (applied to the live server).
        "a": wire("--name", "a", tools={"except": ["big"]} if number % 3 else {}),
    }
    if number % 2 == 0:
        servers["b"] = wire("--name", "b")
    if number % PACE_EVERY == 2:  # c's args differ from one burst to the next: restarts
        servers["c"] = wire("--name", f"c-{number // PACE_EVERY % 2}")
    document = manifest_document(servers, name="storm", description=f"edit {number}",
                                 watch={"debounce": "50ms"})
    return yaml.safe_dump(document, sort_keys=False), document


class Events:
    """What watch mode reports, one event at a time."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._arrived = anyio.Event()

    def __call__(self, event: dict[str, Any]) -> None:
        self.items.append(event)
        self._arrived.set()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self._arrived = anyio.Event()
            await self._arrived.wait()


async def keep_calling(runtime: Runtime, stop: anyio.Event, answers: list[str]) -> None:
    """Call a__echo back to back until ``stop``; every answer must be its own."""
    number = 0
    while not stop.is_set():
        output = await runtime.caller.call("a__echo", {"text": f"call {number}"})
        assert output.content == f"a: call {number}"
        answers.append(output.content)
        number += 1


async def test_a_hundred_rapid_edits_while_calls_run_end_in_the_final_files_state(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(edit(0)[0])
    events, answers = Events(), []
    async with load_agent(path) as runtime, anyio.create_task_group() as group:
        stop_watching, stop_calling, watching = anyio.Event(), anyio.Event(), anyio.Event()
        group.start_soon(lambda: watch_and_reload(runtime, events, stop=stop_watching, ready=watching))
        with anyio.fail_after(10):
            await watching.wait()
        group.start_soon(keep_calling, runtime, stop_calling, answers)
        for number in range(1, EDITS + 1):
            path.write_text(edit(number)[0])
            if number % PACE_EVERY == 2:  # the burst ends on valid and on invalid edits
                seen = len(events.items)
                with anyio.fail_after(SETTLE_LIMIT):
                    await events.wait_until(lambda seen=seen: len(events.items) > seen)
        final_text, final = edit(104)  # valid, with b and a filtered, no c; a new description
        assert final is not None
        path.write_text(final_text)
        with anyio.fail_after(SETTLE_LIMIT):
            await events.wait_until(lambda: runtime.manifest.description == final["description"])
        calls_during_storm = len(answers)
        stop_calling.set()

        assert runtime.manifest == check_agent(path).manifest
        assert sorted(runtime.fleet.connections) == sorted(final["servers"]) == ["a", "b"]
        assert all(c.status == "ready" for c in runtime.fleet.connections.values())
        assert runtime.fleet.connections["a"].sessions == 1  # never restarted by the storm
        names = set(runtime.catalog.entries)
        assert "a__big" not in names and {"a__echo", "b__echo", "b__big"} <= names
        assert not any(name.startswith("c__") for name in names)
        turn = await runtime.graph.ainvoke(
            {"messages": [("user", 'a__echo {"text": "after the storm"}')]}, runtime.config()
        )
        assert "a: after the storm" in str(turn["messages"][-1].content)
        stop_watching.set()
    kinds = [event["type"] for event in events.items]
    assert kinds.count("reload_error") >= 3 and kinds.count("reload") >= 10
    assert sum(bool(event.get("restarted")) for event in events.items) >= 3  # c, each burst
    assert calls_during_storm > 0
