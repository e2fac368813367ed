"""The agents of ``agents:`` in the trace, sent to a real OTLP/HTTP receiver on loopback
(tests/otlp_receiver.py): each run of an agent is an ``invoke_agent`` span under the tool call that
started it, a workflow's steps under the workflow's run, and each agent's own model steps and tool
calls under its run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_teams import call, write_team
from langgraph.types import Command
from otlp_receiver import OtlpReceiver, ReceivedSpan

from runner.agent.host import Host
from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn

pytestmark = pytest.mark.anyio


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


async def one_turn(path: Path, receiver: OtlpReceiver, answer: dict[str, Any] | None = None
                   ) -> list[dict[str, Any]]:
    """The events of one turn of the agent at ``path``, exporting to ``receiver`` (``answer``:
    resumes the turn with it once, if it stops at a question)."""
    environ = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
               "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    with anyio.fail_after(90):
        async with load_agent(path, environ=environ, host=Host(answers_questions=False)) as runtime:
            events = [event async for event in stream_turn(runtime, "go", thread_id="t")]
            if answer is not None and events[-1]["type"] == "approval":
                events += [e async for e in stream_turn(runtime, Command(resume=answer), thread_id="t")]
            return events


def only(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, (name, sorted(span.name for span in spans))
    return found[0]


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[str]:
    return sorted(span.name for span in spans if span.parent_id == parent.span_id)


async def test_each_agent_run_is_an_invoke_agent_span_under_the_tool_call_or_workflow_that_started_it(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    path = write_team(
        tmp_path, [call("pipeline", task="6*7, then say it"), "Done."],
        {"researcher": {"description": "Does arithmetic.", "tools": ["notes"]},
         "writer": {"description": "Writes."},
         "pipeline": {"description": "Research, then write.", "chain": ["researcher", "writer"]}},
        scripts={"researcher": [call("notes__calculate", expression="6*7"), "42"],
                 "writer": ["The answer is 42."]},
        agent={"agents": ["pipeline"]})
    events = await one_turn(path, receiver)
    assert events[-1]["type"] == "final" and events[-1]["text"] == "Done."

    spans = receiver.spans()
    turn = only(spans, "invoke_agent team")
    tool_call = only(spans, "execute_tool pipeline")
    assert tool_call.parent_id == turn.span_id
    assert tool_call.attributes["gen_ai.tool.name"] == "pipeline"
    workflow = only(spans, "invoke_agent pipeline")
    assert workflow.parent_id == tool_call.span_id
    researcher, writer = only(spans, "invoke_agent researcher"), only(spans, "invoke_agent writer")
    assert researcher.parent_id == workflow.span_id and writer.parent_id == workflow.span_id
    for run, name in ((workflow, "pipeline"), (researcher, "researcher"), (writer, "writer")):
        assert run.trace_id == turn.trace_id
        assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert run.attributes["gen_ai.agent.name"] == name
        assert run.attributes["gen_ai.conversation.id"] == turn.attributes["gen_ai.conversation.id"]
        assert run.status_code != 2
    # Each agent's own steps are under its run: the researcher's two model steps and its tool call.
    assert children(spans, researcher) == ["chat mcp-run-scripted", "chat mcp-run-scripted",
                                           "execute_tool notes__calculate"]
    assert children(spans, writer) == ["chat mcp-run-scripted"]


async def test_an_agent_run_stopped_by_a_question_is_marked_interrupted_and_its_resumed_run_resumed(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    path = write_team(
        tmp_path, [call("clerk", task="save it"), "Saved."],
        {"clerk": {"description": "Keeps notes.", "tools": ["notes"], "approve": ["notes__*"]}},
        scripts={"clerk": [call("notes__calculate", expression="1+1"), "2"]},
        agent={"agents": ["clerk"]})
    events = await one_turn(path, receiver, answer={"action": "approve"})
    assert [e["type"] for e in events if e["type"] == "approval"] == ["approval"]
    assert events[-1]["type"] == "final"
    asked, resumed = sorted((span for span in receiver.spans() if span.name == "invoke_agent clerk"),
                            key=lambda span: span.attributes["mcp_run.agent.resumed"])
    assert asked.attributes["mcp_run.agent.interrupted"] is True
    assert asked.attributes["mcp_run.agent.resumed"] is False
    assert asked.status_code != 2 and "error.type" not in asked.attributes
    assert resumed.attributes["mcp_run.agent.resumed"] is True
    assert "mcp_run.agent.interrupted" not in resumed.attributes and resumed.status_code != 2
