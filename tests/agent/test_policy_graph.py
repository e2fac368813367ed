"""The manifest's ``policy`` on the model's tool calls: a denied call is a tool error the model
hears with the reason, an ``ask`` call is the approval interrupt, an ``allow`` rule placed before a
``tools.approve`` entry runs without asking, the first matching rule wins, an edited call is judged
again, and every decision is a ``policy`` event. Also the tools offered to a server's sampling
request: a denied call of one goes back to the model with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import scripted_model, server, write_manifest
from langchain_core.messages import ToolMessage
from langgraph.types import Command
from test_sampling import write_agent as write_sampling_agent

from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn

pytestmark = pytest.mark.anyio

ETC_DENIED = {"tool": "demo__echo", "args": {"text": "/etc/*"}, "action": "deny",
              "reason": "system files stay private"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # LangGraph runs on asyncio only


def write_agent(folder: Path, script: list[Any], policy: list[dict[str, Any]], **tools: Any) -> Path:
    demo = server("demo", **({"tools": tools} if tools else {}))
    return write_manifest(folder, {"demo": demo}, name="policed", checkpointer="memory",
                          model=scripted_model(folder, script), policy=policy)


def calls(*pairs: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args, "id": call_id} for call_id, name, args in pairs]}


async def turn(runtime: Runtime, message: Any) -> list[dict[str, Any]]:
    with anyio.fail_after(40):
        return [event async for event in stream_turn(runtime, message)]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def results(events: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {event["id"]: (event["status"], event["text"]) for event in of_type(events, "tool_result")}


async def test_a_call_whose_arguments_a_deny_rule_matches_is_a_tool_error_with_the_reason(
        tmp_path: Path) -> None:
    script = [calls(("secret", "demo__echo", {"text": "/etc/passwd"}),
                    ("plain", "demo__echo", {"text": "hi"})), "done"]
    async with load_agent(write_agent(tmp_path, script, [ETC_DENIED])) as runtime:
        events = await turn(runtime, "echo things")
        received = runtime.model.primary.received
    assert not of_type(events, "approval")
    status, text = results(events)["secret"]
    assert status == "error"
    assert "denied by the manifest's policy (policy[0]): system files stay private" in text
    assert results(events)["plain"] == ("success", "hi")
    [decided] = of_type(events, "policy")  # no rule matches the plain call: no decision to tell
    assert decided == {"type": "policy", "tool": "demo__echo", "action": "deny", "rule": 0,
                       "source": "policy[0]", "reason": "system files stay private", "id": "secret"}
    heard = [m for m in received[1] if isinstance(m, ToolMessage) and m.tool_call_id == "secret"]
    assert heard[0].status == "error" and "system files stay private" in str(heard[0].content)


async def test_an_ask_rule_on_arguments_is_the_approval_interrupt(tmp_path: Path) -> None:
    script = [calls(("big", "demo__add", {"a": 500, "b": 1})),
              calls(("small", "demo__add", {"a": 5, "b": 1})), "done"]
    policy = [{"tool": "demo__add", "args": {"a": {"regex": "^[0-9]{3,}$"}}, "action": "ask",
               "reason": "big"}]
    async with load_agent(write_agent(tmp_path, script, policy)) as runtime:
        first = await turn(runtime, "add")
        second = await turn(runtime, Command(resume={"action": "approve"}))
    [asked] = of_type(first, "approval")
    assert asked["id"] == "big" and asked["policy"] == {"rule": 0, "source": "policy[0]", "reason": "big"}
    assert not of_type(second, "approval")  # the small sum matches no rule: it runs without asking
    assert results(second) == {"big": ("success", "501"), "small": ("success", "6")}
    assert [(e["id"], e["action"]) for e in of_type(second, "policy")] == [("big", "ask")]


async def test_an_allow_rule_before_a_tools_approve_entry_runs_without_asking(tmp_path: Path) -> None:
    script = [calls(("safe", "demo__echo", {"text": "safe words"})),
              calls(("other", "demo__echo", {"text": "x"})), "done"]
    policy = [{"tool": "demo__echo", "args": {"text": "safe *"}, "action": "allow"}]
    async with load_agent(write_agent(tmp_path, script, policy, approve=["echo"])) as runtime:
        events = await turn(runtime, "echo")
    assert results(events) == {"safe": ("success", "safe words")}
    [asked] = of_type(events, "approval")  # tools.approve still asks (its question names no rule)
    assert asked["id"] == "other" and "policy" not in asked
    assert of_type(events, "policy")[0] == {"type": "policy", "tool": "demo__echo", "action": "allow",
                                            "rule": 0, "source": "policy[0]", "reason": None, "id": "safe"}


@pytest.mark.parametrize(("policy", "echoed"), [
    ([{"tool": "demo__echo", "action": "allow"}, {"tool": "demo__*", "action": "deny"}], "success"),
    ([{"tool": "demo__*", "action": "deny"}, {"tool": "demo__echo", "action": "allow"}], "error"),
])
async def test_the_first_matching_rule_decides(
        tmp_path: Path, policy: list[dict[str, Any]], echoed: str) -> None:
    script = [calls(("e", "demo__echo", {"text": "hi"}), ("a", "demo__add", {"a": 1, "b": 2})), "done"]
    async with load_agent(write_agent(tmp_path, script, policy)) as runtime:
        events = await turn(runtime, "go")
    assert results(events)["e"][0] == echoed
    assert results(events)["a"][0] == "error"


async def test_an_edited_call_is_judged_again_by_the_policy(tmp_path: Path) -> None:
    script = [calls(("c", "demo__echo", {"text": "hello"})), "done"]
    policy = [ETC_DENIED, {"tool": "demo__echo", "action": "ask"}]
    async with load_agent(write_agent(tmp_path, script, policy)) as runtime:
        first = await turn(runtime, "echo")
        second = await turn(runtime, Command(resume={"action": "edit", "args": {"text": "/etc/shadow"}}))
    assert [event["id"] for event in of_type(first, "approval")] == ["c"]
    status, text = results(second)["c"]
    assert status == "error" and "system files stay private" in text


async def test_a_denied_call_of_a_sampling_requests_tool_goes_back_to_the_model_with_the_reason(
        tmp_path: Path) -> None:
    forecast = {"tool_calls": [{"name": "asking__forecast", "args": {"city": "Oslo", "choice": "auto"}}]}
    script = [forecast, {"tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "w1"}]},
              {"tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}, "id": "w2"}]},
              "cold and sunny", "done"]
    path = write_sampling_agent(tmp_path, legacy=True, script=script, sampling="allow")
    text = path.read_text() + (
        "policy:\n- tool: asking__get_weather\n  args: {city: Paris}\n  action: deny\n  reason: not Paris\n")
    path.write_text(text)
    async with load_agent(path) as runtime:
        events = await turn(runtime, "what is the weather in Oslo?")
        model = runtime.model.primary
    assert results(events)  # the forecast ran
    *_, refused = model.received[2]  # the model was asked again, hearing why
    assert isinstance(refused, ToolMessage) and refused.status == "error"
    assert "denied by the manifest's policy (policy[0]): not Paris" in str(refused.content)
    *_, answered = model.received[3]  # the allowed call went to the server, which ran it
    assert isinstance(answered, ToolMessage) and answered.content == "sunny in Oslo"


async def test_a_local_tool_is_judged_by_its_own_name_and_arguments(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text(
        "def shout(text: str) -> str:\n    \"\"\"Say it loud.\"\"\"\n    return text.upper()\n")
    script = [calls(("s", "shout", {"text": "my secret"}), ("p", "shout", {"text": "hello"})), "done"]
    policy = [{"tool": "shout", "args": {"text": "*secret*"}, "action": "deny", "reason": "keep it down"}]
    path = write_manifest(tmp_path, {}, name="local", checkpointer="memory",
                          model=scripted_model(tmp_path, script), local_tools=["helpers:shout"],
                          policy=policy)
    async with load_agent(path) as runtime:
        events = await turn(runtime, "shout")
    status, text = results(events)["s"]
    assert status == "error" and "(policy[0]): keep it down" in text
    assert results(events)["p"] == ("success", "HELLO")
    assert [(e["id"], e["action"]) for e in of_type(events, "policy")] == [("s", "deny")]
