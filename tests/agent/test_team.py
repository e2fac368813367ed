"""Several agents in one manifest (``agents:``): agents called as tools, workflows over them, and
questions from any depth; run as a user runs them (``-p --json`` in this process, the JSON chat
as a process: it streams stdin), with scripted models and the bundled notes server."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import ROOT, JsonChat, invoke

JOIN_TEMPLATE = "{% for name, answer in answers.items() %}{{ name }}: {{ answer }}\n{% endfor %}"
NOTES = {"command": "python", "args": ["notes_server.py"], "env": {"NOTES_FILE": "notes.json"}}


def team(folder: Path, main: list[Any], agents: dict[str, dict[str, Any]], *,
         scripts: dict[str, list[Any]] | None = None, **top: Any) -> Path:
    """``folder/agent.yaml``: the notes server, the scripted main model playing ``main``, and
    ``agents``; each of ``scripts`` is the script of the agent of that name."""
    shutil.copy(ROOT / "examples" / "notes_server.py", folder / "notes_server.py")
    (folder / "main.yaml").write_text(yaml.safe_dump(main))
    for name, script in (scripts or {}).items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(script))
        agents[name] = {**agents[name], "model": {"id": "scripted", "script": f"{name}.yaml"}}
    document = {"version": 1, "name": "team", "model": {"id": "scripted", "script": "main.yaml"},
                "checkpointer": "memory", "servers": {"notes": NOTES}, **top, "agents": agents}
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def one_shot(folder: Path, text: str = "go") -> list[dict[str, Any]]:
    result = invoke("agent.yaml", "-p", text, "--json", cwd=folder)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The runner's warnings as the terminal shows them (``warning: MESSAGE``)."""
    return [f"{record.levelname}: {record.getMessage()}" for record in caplog.records
            if record.levelno == logging.WARNING]


def results(events: list[dict[str, Any]], agent: str | None = None) -> dict[str, str]:
    return {e["name"]: e["text"] for e in events if e["type"] == "tool_result" and e.get("agent") == agent}


def test_an_agent_the_main_agent_names_is_a_tool_whose_result_is_its_final_answer(tmp_path: Path) -> None:
    team(tmp_path, [call("researcher", task="What is 6*7?"), "The researcher found it."],
         {"researcher": {"description": "Does arithmetic.", "tools": ["notes"]}},
         scripts={"researcher": [call("notes__calculate", expression="6*7"), "It is 42."]},
         agent={"agents": ["researcher"]})
    events = one_shot(tmp_path)
    started = [e for e in events if e["type"] == "agent"]
    called = next(event["id"] for event in events if event["type"] == "tool_call")
    assert started == [{"type": "agent", "agent": "researcher", "caller": "main", "task": "What is 6*7?",
                        "call": called}]
    assert results(events, "researcher") == {"notes__calculate": "42"}
    assert results(events) == {"researcher": "It is 42."}
    assert events[-1]["type"] == "final" and events[-1]["text"] == "The researcher found it."
    # An agent's streamed answer is its own: the main agent's tokens make the final answer.
    assert "".join(e["text"] for e in events if e["type"] == "token" and "agent" not in e) == \
        "The researcher found it."


def test_an_agent_cannot_call_a_tool_it_was_not_given(tmp_path: Path) -> None:
    team(tmp_path, [call("writer", task="Compute"), "Done."],
         {"writer": {"description": "Writes; has no tools."}},
         scripts={"writer": [call("notes__calculate", expression="1+1"), "I could not."]},
         agent={"agents": ["writer"]})
    events = one_shot(tmp_path)
    refused = [e for e in events if e["type"] == "tool_result" and e.get("agent") == "writer"]
    assert [(e["name"], e["status"]) for e in refused] == [("notes__calculate", "error")]
    assert "not" in refused[0]["text"].lower()


def test_the_main_agent_is_not_offered_agents_it_does_not_name(tmp_path: Path) -> None:
    team(tmp_path, [call("helper", task="Anything"), "Done."],
         {"helper": {"description": "Helps."}}, scripts={"helper": ["Helped."]})
    events = one_shot(tmp_path)
    assert [(e["name"], e["status"]) for e in events if e["type"] == "tool_result"] == [("helper", "error")]
    assert not [e for e in events if e["type"] == "agent"]


def test_a_question_three_levels_down_is_asked_naming_its_agent_and_the_answer_resumes_it(
    tmp_path: Path,
) -> None:
    team(tmp_path, [call("researcher", task="File it"), "Main: filed."],
         {"researcher": {"description": "Researches.", "agents": ["writer"]},
          "writer": {"description": "Writes notes.", "tools": ["notes__add_note"],
                     "approve": ["notes__add_*"]}},
         scripts={"researcher": [call("writer", task="Add the note"), "Researcher: the writer filed it."],
                  "writer": [call("notes__add_note", title="owls", text="Owls hoot."), "Writer: added."]},
         agent={"agents": ["researcher"]}, checkpointer="sqlite:///state.sqlite")
    chat = JsonChat(tmp_path)
    try:
        chat.wait_for("ready")
        chat.send({"text": "go"})
        approval = chat.wait_for("approval")
        assert (approval["tool"], approval["agent"]) == ("notes__add_note", "writer")
        chat.send({"action": "approve"})
        final = chat.wait_for("final")
        assert final["text"] == "Main: filed."
        filed = [e for e in chat.seen if e["type"] == "tool_result" and e["name"] == "notes__add_note"]
        assert [(e["status"], e["agent"]) for e in filed] == [("success", "writer")]
        assert "owls" in (tmp_path / "notes.json").read_text()
        chained = {e["name"]: e["text"] for e in chat.seen if e["type"] == "tool_result"}
        assert chained["writer"] == "Writer: added."
        assert chained["researcher"] == "Researcher: the writer filed it."
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=60)


def test_a_chain_gives_each_step_the_previous_answer(tmp_path: Path) -> None:
    team(tmp_path, [call("pipeline", task="Owls"), "Main: done."],
         {"researcher": {"description": "Finds facts."}, "writer": {"description": "Writes."},
          "pipeline": {"description": "Research, then write.", "chain": ["researcher", "writer"]}},
         scripts={"researcher": ["Owls hunt at night."], "writer": ["An essay on night hunters."]},
         agent={"agents": ["pipeline"]})
    events = one_shot(tmp_path)
    tasks = [(e["agent"], e["caller"], e["task"]) for e in events if e["type"] == "agent"]
    assert tasks == [("pipeline", "main", "Owls"), ("researcher", "pipeline", "Owls"),
                     ("writer", "pipeline", "Owls hunt at night.")]
    # The workflow was started by the main agent's call; its steps by no call (nothing shows them).
    pipeline_call = next(e["id"] for e in events if e["type"] == "tool_call" and e["name"] == "pipeline")
    assert [e.get("call") for e in events if e["type"] == "agent"] == [pipeline_call, None, None]
    assert results(events) == {"pipeline": "An essay on night hunters."}


def test_a_parallel_workflow_runs_every_agent_and_joins_their_answers(tmp_path: Path) -> None:
    team(tmp_path, [call("poll", task="Name a bird"), call("panel", task="Name a bird"), "Main: done."],
         {"first": {"description": "One."}, "second": {"description": "Two."},
          "judge": {"description": "Joins."},
          "poll": {"description": "Both, by template.", "parallel": ["first", "second"],
                   "template": JOIN_TEMPLATE},
          "panel": {"description": "Both, joined by the judge.", "parallel": ["first", "second"],
                    "join": "judge"}},
         scripts={"first": ["Robin.", "Owl."], "second": ["Wren.", "Kite."], "judge": ["Four birds."]},
         agent={"agents": ["poll", "panel"]})
    events = one_shot(tmp_path)
    answers = results(events)
    assert sorted(answers["poll"].splitlines()) == ["first: Robin.", "second: Wren."]
    assert answers["panel"] == "Four birds."
    judged = next(e["task"] for e in events if e["type"] == "agent" and e["agent"] == "judge")
    assert "Owl." in judged and "Kite." in judged and "Name a bird" in judged


def test_a_router_runs_the_agent_its_model_picks_or_its_fallback(tmp_path: Path) -> None:
    team(tmp_path, [call("desk", task="Refund please"), call("desk", task="Hello"), "Main: done."],
         {"billing": {"description": "Refunds and invoices."}, "general": {"description": "Anything else."},
          "desk": {"description": "Sends each request to the right agent.", "router": ["billing", "general"],
                   "fallback": "general", "model": {"id": "scripted", "script": "router.yaml"}}},
         scripts={"billing": ["Refunded."], "general": ["Hi there."]},
         agent={"agents": ["desk"]})
    (tmp_path / "router.yaml").write_text(yaml.safe_dump([call("billing", task="Refund please"),
                                                          "I cannot tell."]))
    events = one_shot(tmp_path)
    assert [e["text"] for e in events if e["type"] == "tool_result" and e["name"] == "desk"] == \
        ["Refunded.", "Hi there."]


def test_a_loop_revises_until_the_evaluator_accepts(tmp_path: Path) -> None:
    team(tmp_path, [call("polish", task="A haiku"), "Main: done."],
         {"poet": {"description": "Writes."}, "critic": {"description": "Judges."},
          "polish": {"description": "Write until it is good.",
                     "loop": {"generator": "poet", "evaluator": "critic", "max_rounds": 3}}},
         scripts={"poet": ["Draft one.", "Draft two."], "critic": ["Too long.", "ACCEPT: lovely."]},
         agent={"agents": ["polish"]})
    events = one_shot(tmp_path)
    assert results(events) == {"polish": "Draft two."}
    revise = [e["task"] for e in events if e["type"] == "agent" and e["agent"] == "poet"][1]
    assert "Draft one." in revise and "Too long." in revise


def test_a_loop_stops_at_max_rounds_with_the_last_answer(tmp_path: Path) -> None:
    team(tmp_path, [call("polish", task="A haiku"), "Main: done."],
         {"poet": {"description": "Writes."}, "critic": {"description": "Judges."},
          "polish": {"loop": {"generator": "poet", "evaluator": "critic", "max_rounds": 2}}},
         scripts={"poet": ["Draft one.", "Draft two.", "Draft three."],
                  "critic": ["No.", "Still no.", "No."]},
         agent={"agents": ["polish"]})
    events = one_shot(tmp_path)
    assert results(events) == {"polish": "Draft two."}
    assert len([e for e in events if e["type"] == "agent" and e["agent"] == "poet"]) == 2


def test_validate_locates_an_agent_prompt_template_error_at_the_agents_prompt(tmp_path: Path) -> None:
    team(tmp_path, ["Hi."], {"helper": {"description": "Helps.", "prompt": "You are {{ agent.nam }}."}},
         scripts={"helper": ["Hi."]}, agent={"agents": ["helper"]})
    result = invoke("validate", "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 2
    assert "agents.helper.prompt" in result.output
    assert "did you mean 'name'" in result.output


async def test_the_runtime_offers_every_agent_by_name_to_serve_each_on_its_own_thread(tmp_path: Path) -> None:
    from langchain_core.messages import AIMessage

    from runner.agent.runtime import load_agent

    path = team(tmp_path, ["Main answers."],
                {"researcher": {"description": "Does arithmetic.", "tools": ["notes"]}},
                scripts={"researcher": [call("notes__calculate", expression="6*7"), "It is 42.",
                                        "Again 42."]})
    async with load_agent(path) as runtime:
        assert list(runtime.agents) == ["main", "researcher"]
        assert runtime.agents["main"] is runtime.graph
        hosted = runtime.agents["researcher"]
        config = runtime.config("t1", agent="researcher")
        first = await hosted.ainvoke({"messages": [("user", "What is 6*7?")]}, config)
        assert isinstance(first["messages"][-1], AIMessage) and first["messages"][-1].text == "It is 42."
        second = await hosted.ainvoke({"messages": [("user", "And again?")]}, config)
        # The thread keeps the tasks and answers; the main agent's graph never saw them.
        assert [m.text for m in second["messages"]] == [
            "What is 6*7?", "It is 42.", "And again?", "Again 42."]
        assert not (await runtime.graph.aget_state(runtime.config("t1"))).values


async def test_an_agent_served_on_its_own_answers_its_task_itself_without_its_handoffs(
        tmp_path: Path) -> None:
    from runner.agent.runtime import load_agent
    from runner.agent.turns import stream_turn

    path = team(tmp_path, ["Main answers."],
                {"billing": {"description": "Charges.", "handoffs": ["support"]},
                 "support": {"description": "Errors."}},
                scripts={"billing": [call("handoff_to_support"), "Billing answers itself."],
                         "support": ["Support never answers here."]},
                agent={"handoffs": ["billing"]})
    async with load_agent(path) as runtime:
        events = [event async for event in stream_turn(runtime, "I was charged twice",
                                                        thread_id="t1", agent="billing")]
    kinds = [event["type"] for event in events]
    assert "handoff" not in kinds and events[-1]["type"] == "final"
    assert events[-1]["text"] == "Billing answers itself."
    refused = next(event for event in events if event["type"] == "tool_result")
    assert refused["status"] == "error" and "handoff_to_support" in refused["text"]


def test_agents_in_the_chat_lists_each_agents_kind_description_and_callers(tmp_path: Path) -> None:
    team(tmp_path, ["Main: done."],
         {"researcher": {"description": "Finds facts."},
          "writer": {"description": "Writes.", "agents": ["researcher"]},
          "pipeline": {"description": "Research, then write.", "chain": ["researcher", "writer"]}},
         scripts={"researcher": ["Owls."], "writer": ["An essay."]},
         agent={"agents": ["pipeline", "writer"]}, description="The desk.")
    chat = JsonChat(tmp_path)
    try:
        ready = chat.wait_for("ready")
        assert ready["agents"] == ["pipeline", "writer"]
        chat.send({"text": "/agents"})
        listed = chat.wait_for("agents")["agents"]
        assert listed == [
            {"name": "main", "kind": "model", "description": "The desk.", "callers": [], "current": True},
            {"name": "pipeline", "kind": "chain", "description": "Research, then write.",
             "callers": ["main"]},
            {"name": "researcher", "kind": "model", "description": "Finds facts.",
             "callers": ["pipeline", "writer"]},
            {"name": "writer", "kind": "model", "description": "Writes.", "callers": ["main", "pipeline"]},
        ]
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=60)


def test_what_an_agent_of_agents_spends_counts_in_the_threads_totals(tmp_path: Path) -> None:
    spent = {"input_tokens": 100, "output_tokens": 10}
    team(tmp_path, [{**call("researcher", task="Sum it"), "usage": spent}, {"text": "Done.", "usage": spent}],
         {"researcher": {"description": "Does arithmetic.", "tools": ["notes"]}},
         scripts={"researcher": [{**call("notes__calculate", expression="1+1"), "usage": spent},
                                 {"text": "2", "usage": spent}]},
         agent={"agents": ["researcher"]})
    chat = JsonChat(tmp_path)
    try:
        chat.wait_for("ready")
        chat.send({"text": "go"})
        chat.wait_for("final")
        steps = [(e["agent"], e["step"]["input_tokens"]) for e in chat.seen if e["type"] == "usage"]
        assert steps == [("main", 100), ("researcher", 100), ("researcher", 100), ("main", 100)]
        chat.send({"text": "/usage"})
        totals = chat.wait_for("usage_totals")
        assert totals["agents"]["researcher"]["input_tokens"] == 200
        assert totals["agents"]["main"]["input_tokens"] == 200
        assert totals["total"]["input_tokens"] == 400
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=60)


def test_a_policy_rule_denies_or_asks_about_calling_an_agent(tmp_path: Path) -> None:
    team(tmp_path, [call("helper", task="Secret plans"), call("helper", task="Weather"), "Done."],
         {"helper": {"description": "Helps."}}, scripts={"helper": ["Sunny."]},
         agent={"agents": ["helper"]},
         policy=[{"tool": "helper", "args": {"task": "Secret*"}, "action": "deny", "reason": "not that"}])
    events = one_shot(tmp_path)
    answers = [(e["status"], e["text"]) for e in events
               if e["type"] == "tool_result" and e["name"] == "helper"]
    assert answers[0][0] == "error" and "not that" in answers[0][1]
    assert answers[1] == ("success", "Sunny.")
    assert [e["task"] for e in events if e["type"] == "agent"] == ["Weather"]


def test_a_policy_rule_naming_an_agent_is_not_warned_as_matching_no_tool(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    team(tmp_path, ["Done."], {"helper": {"description": "Helps."}}, scripts={"helper": ["Hi."]},
         agent={"agents": ["helper"]}, policy=[{"tool": "helper", "action": "ask"}])
    result = invoke("agent.yaml", "-p", "go", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "Done." in result.stdout  # the turn ran, so the catalog was built and checked
    assert "matches no tool" not in result.output + "\n".join(warned(caplog))


def test_the_main_model_is_offered_the_agents_it_may_call(tmp_path: Path) -> None:
    shutil.copy(ROOT / "examples" / "notes_server.py", tmp_path / "notes_server.py")
    document = {"version": 1, "name": "team", "model": "offline", "checkpointer": "memory",
                "servers": {"notes": NOTES}, "agent": {"agents": ["helper"]},
                "agents": {"helper": {"description": "Does sums.", "model": "offline", "tools": ["notes"]}}}
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(document))
    # The offline model calls a tool it is offered when asked to by name: the agent is one.
    events = one_shot(tmp_path, 'helper {"task": "notes__calculate {\\"expression\\": \\"2+2\\"}"}')
    assert [(e["name"], e["status"]) for e in events if e["type"] == "tool_result"] == [
        ("notes__calculate", "success"), ("helper", "success")]
    assert results(events, "helper") == {"notes__calculate": "4"}


def test_a_misspelt_tool_in_an_agents_tools_is_warned_at_start_with_its_place_and_a_near_name(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    team(tmp_path, ["Done."], {"helper": {"description": "Helps.", "tools": ["notes__calcualte", "notes"]}},
         scripts={"helper": ["Hi."]}, agent={"agents": ["helper"]})
    result = invoke("agent.yaml", "-p", "go", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    warnings = [line for line in warned(caplog) if "agents.helper.tools" in line]
    assert len(warnings) == 1, warned(caplog)
    assert warnings[0].startswith("warning: ") and "agent.yaml:" in warnings[0]
    assert ("agents.helper.tools[0]: 'notes__calcualte' matches no tool (did you mean 'notes__calculate'?)"
            in warnings[0])


def test_a_policy_rule_naming_a_handoff_tool_is_not_warned_as_matching_no_tool(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    team(tmp_path, ["Done."], {"billing": {"description": "Refunds."}}, scripts={"billing": ["Hi."]},
         agent={"handoffs": ["billing"]},
         policy=[{"tool": "handoff_to_billing", "action": "ask"}, {"tool": "handoff_back", "action": "allow"},
                 {"tool": "handoff_to_biling", "action": "deny"}])
    result = invoke("agent.yaml", "-p", "go", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    unmatched = [line for line in warned(caplog) if "matches no tool" in line]
    assert len(unmatched) == 1 and "policy[2].tool: 'handoff_to_biling'" in unmatched[0], warned(caplog)


def test_a_policy_rule_deciding_a_handoff_emits_a_policy_event(tmp_path: Path) -> None:
    handoff = {"tool_calls": [{"name": "handoff_to_billing", "args": {"reason": "a charge"}, "id": "h-1"}]}
    team(tmp_path, [handoff, "I answer myself."], {"billing": {"description": "Refunds."}},
         scripts={"billing": ["Hi."]}, agent={"handoffs": ["billing"]},
         policy=[{"tool": "handoff_to_billing", "action": "deny", "reason": "no billing today"}])
    events = one_shot(tmp_path)
    decided = [e for e in events if e["type"] == "policy"]
    assert decided == [{"type": "policy", "tool": "handoff_to_billing", "action": "deny", "rule": 0,
                        "source": "policy[0]", "reason": "no billing today", "id": "h-1"}]
    assert not [e for e in events if e["type"] == "handoff"]


def test_validate_locates_a_broken_parallel_template_at_the_workflows_template(tmp_path: Path) -> None:
    team(tmp_path, ["Done."], {"a": {"description": "A."}, "b": {"description": "B."},
                               "board": {"parallel": ["a", "b"], "template": "{{ answers }"}},
         scripts={"a": ["A."], "b": ["B."]}, agent={"agents": ["board"]})
    result = invoke("validate", "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 2, result.output
    line = next(n for n, text in enumerate((tmp_path / "agent.yaml").read_text().splitlines(), start=1)
                if text.strip().startswith("template:"))
    assert f"agent.yaml:{line}:" in result.output
    assert "agents.board.template: the template is not valid Jinja2 (line 1)" in result.output


def test_a_routers_own_model_step_is_reported_and_counted_as_the_routers_usage(tmp_path: Path) -> None:
    spent = {"input_tokens": 100, "output_tokens": 10}
    team(tmp_path, [call("desk", task="Refund please"), "Main: done."],
         {"billing": {"description": "Refunds."}, "general": {"description": "Anything else."},
          "desk": {"description": "Routes.", "router": ["billing", "general"],
                   "model": {"id": "scripted", "script": "router.yaml"}}},
         scripts={"billing": ["Refunded."], "general": ["Hi."]}, agent={"agents": ["desk"]})
    (tmp_path / "router.yaml").write_text(yaml.safe_dump([{**call("billing", task="Refund please"),
                                                           "usage": spent}]))
    chat = JsonChat(tmp_path)
    try:
        chat.wait_for("ready")
        chat.send({"text": "go"})
        chat.wait_for("final")
        steps = [(e["agent"], e["step"]["input_tokens"]) for e in chat.seen if e["type"] == "usage"]
        assert ("desk", 100) in steps
        chat.send({"text": "/usage"})
        totals = chat.wait_for("usage_totals")
        assert totals["agents"]["desk"]["input_tokens"] == 100
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=60)
