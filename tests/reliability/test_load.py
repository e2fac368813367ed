"""Load: a thousand concurrent tool calls over four servers of both protocol eras, every one
answered with its own answer although the servers answer out of order."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import anyio
import pytest

from reliability.support import demo, wire, write_manifest
from runner.agent.runtime import load_agent

pytestmark = pytest.mark.anyio

CALLS = 1000
LOAD_LIMIT = 90.0


async def test_a_thousand_concurrent_calls_over_four_servers_are_all_answered_and_none_mismatched(
    tmp_path: Path,
) -> None:
    path = write_manifest(tmp_path, {
        # 2025-11-25 servers answering after random delays (out of order) ...
        "w1": wire("--name", "w1"), "w2": wire("--name", "w2"),
        # ... and SDK servers on 2026-07-28, sleeping a different time for every call.
        "d1": demo(), "d2": demo(),
    })
    generator = random.Random(9)
    answers: dict[int, object] = {}
    expected: dict[int, str] = {}
    async with load_agent(path) as runtime:
        assert {runtime.fleet.connections[key].era for key in ("w1", "d1")} == {"2025-11-25", "2026-07-28"}

        async def call(number: int, tool: str, arguments: dict) -> None:
            answers[number] = (await runtime.caller.call(tool, arguments)).content

        with anyio.fail_after(LOAD_LIMIT):
            async with anyio.create_task_group() as group:
                for number in range(CALLS):
                    server = ("w1", "w2", "d1", "d2")[number % 4]
                    if server.startswith("w"):
                        text = f"call {number}"
                        arguments = {"text": text, "delay_ms": generator.randint(0, 50)}
                        expected[number] = f"{server}: {text}"
                        group.start_soon(call, number, f"{server}__echo", arguments)
                    else:
                        seconds = (number + 1) / 100_000 + generator.randint(0, 50) / 1000
                        expected[number] = f"slept {seconds}"
                        group.start_soon(call, number, f"{server}__sleep", {"seconds": seconds})
        sessions = {key: connection.sessions for key, connection in runtime.fleet.connections.items()}
    assert len(answers) == CALLS
    mismatched = {number: answer for number, answer in answers.items() if answer != expected[number]}
    assert mismatched == {}
    assert Counter(number % 4 for number in answers) == {0: 250, 1: 250, 2: 250, 3: 250}
    assert sessions == {"w1": 1, "w2": 1, "d1": 1, "d2": 1}  # no server fell over under the load
