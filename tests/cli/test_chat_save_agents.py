"""``/save`` in a chat of several agents: the case it writes runs as the conversation went, the
sub-agents' calls and the handoffs included. The chat runs in this process (a view reading its
lines from a list), over scripted models and the bundled notes server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import yaml
from agent_teams import call, write_team
from evals_support import RUN_LIMIT, run

import runner.cli.chat_commands  # noqa: F401  (registers the chat's /commands, /save among them)
from runner.agent.runtime import load_agent
from runner.cli.chat_session import ChatSession, Interrupts
from runner.events import ApprovalAsked, Event


class ListedLines:
    """A chat view reading its lines from a list, keeping every event it is shown."""

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)
        self.events: list[Event] = []

    async def read(self) -> str | None:
        return self.lines.pop(0) if self.lines else None

    def show(self, event: Event, *, in_full: bool = False) -> None:
        self.events.append(event)

    async def ask_approval(self, approval: ApprovalAsked) -> dict[str, Any]:
        return {"action": "approve"}

    @asynccontextmanager
    async def working(self) -> AsyncIterator[None]:
        yield


async def chat(manifest: Path, *lines: str) -> list[Event]:
    """The chat of ``manifest`` given ``lines``, to their end; the events it showed."""
    view = ListedLines(*lines)
    with anyio.fail_after(RUN_LIMIT):
        async with load_agent(manifest) as runtime:
            await ChatSession(runtime, view, Interrupts()).run()
    assert not [event for event in view.events if event["type"] == "error"], view.events
    return view.events


def saved_expectations(folder: Path, name: str) -> dict[str, Any]:
    document = yaml.safe_load((folder / "evals" / f"{name}.yaml").read_text())
    return document["cases"][0]["expect"]


async def test_a_case_saved_from_a_chat_with_agents_lists_every_agent_s_calls_and_passes(
    tmp_path: Path,
) -> None:
    manifest = write_team(
        tmp_path, [call("researcher", task="What is 6*7?"), "It is 42."],
        {"researcher": {"description": "Does arithmetic.", "tools": ["notes"]}},
        scripts={"researcher": [call("notes__calculate", expression="6*7"), "42"]},
        agent={"agents": ["researcher"]})
    await chat(manifest, "What is 6*7?", "/save sums")
    expect = saved_expectations(tmp_path, "sums")
    assert expect["tools"] == [{"name": "researcher", "args": {"task": "What is 6*7?"}},
                               {"name": "notes__calculate", "args": {"expression": "6*7"}}]
    assert expect["agents"] == ["researcher"]
    result = (await run(manifest))["sums"]
    assert result.status == "passed", result.differences


async def test_a_case_saved_from_a_chat_that_handed_the_conversation_over_passes(tmp_path: Path) -> None:
    manifest = write_team(
        tmp_path, [call("handoff_to_billing", reason="a charge")],
        {"billing": {"description": "Charges.", "tools": ["notes"]}},
        scripts={"billing": [call("notes__calculate", expression="2*19.99"), "Refunded 19.99."]},
        agent={"handoffs": ["billing"]})
    await chat(manifest, "I was charged twice", "/save charged")
    assert [c["name"] for c in saved_expectations(tmp_path, "charged")["tools"]] == [
        "handoff_to_billing", "notes__calculate"]
    result = (await run(manifest))["charged"]
    assert result.status == "passed", result.differences
