"""How the terminal chat shows events (no process, no terminal: a console writing to a string)."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Literal

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from runner.cli.chat import denied_line, recap_lines
from runner.cli.chat_commands import CHAT_COMMAND_HELP
from runner.cli.safe_text import SafeConsole
from runner.cli.terminal import TerminalView, approval_question
from runner.events import (
    AgentStarted,
    ApprovalAsked,
    ChatCommandRow,
    ChatReady,
    HelpShown,
    Interrupted,
    PolicyDecided,
    PromptRow,
    ToolCall,
    ToolProgress,
    ToolResult,
    ToolRow,
    ToolsListed,
)


def shown(*events: object) -> str:
    console = SafeConsole(file=io.StringIO(), width=200)
    view = TerminalView(console, reader=None)
    for event in events:
        view._render(event, in_full=False)  # type: ignore[arg-type]
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_help_puts_every_description_in_one_column_however_long_a_prompt_commands_usage() -> None:
    commands = [ChatCommandRow(command=name, usage=usage, description=f"about {name}")
                for name, (usage, _) in CHAT_COMMAND_HELP.items()]
    long_usage = PromptRow(command="/a-rather-long-server-key__review", server="s", original="review",
                           arguments="code=<code> [focus=<focus>]", description="about review")
    lines = shown(HelpShown(type="help", commands=commands, prompts=[long_usage])).splitlines()
    columns = {line.index("about ") for line in lines if "about " in line}
    assert len(columns) == 1, lines


def test_one_tool_is_one_tool_in_the_banner() -> None:
    banner = shown(ChatReady(type="ready", name="a", model="offline", thread="t", tools=["x__y"], agents=[],
                             handoffs=[]))
    assert "a — 1 tool, model offline" in banner


def test_the_banner_counts_the_agents_and_handoffs_the_model_is_offered_as_tools() -> None:
    banner = shown(ChatReady(type="ready", name="a", model="offline", thread="t", tools=[], agents=["desk"],
                             handoffs=["handoff_to_billing"]))
    assert "a — 2 tools, model offline" in banner


def test_tools_marks_the_agents_and_handoffs_among_the_tools_with_their_descriptions() -> None:
    def row(name: str, kind: Literal["tool", "agent", "handoff"], description: str) -> ToolRow:
        return ToolRow(name=name, server="", original=name, description=description, approval=False,
                       offered=True, kind=kind)

    lines = shown(ToolsListed(type="tools", search=False, tools=[
        row("notes__add", "tool", "Add a note."), row("desk", "agent", "Sends a request on."),
        row("handoff_to_billing", "handoff", "Hand the conversation to billing.")])).splitlines()
    assert lines == ["notes__add  Add a note.", "desk  [agent]  Sends a request on.",
                     "handoff_to_billing  [handoff]  Hand the conversation to billing."]


def test_an_interrupted_chat_command_is_not_called_a_turn() -> None:
    assert shown(Interrupted(type="interrupted", what="/call")).strip() == "(/call interrupted)"
    assert shown(Interrupted(type="interrupted", what="turn")).strip() == "(turn interrupted)"


def test_the_chat_and_call_ask_for_approval_in_the_same_words() -> None:
    assert approval_question(edit=True) == "approve? [y]es / [n]o / [e]dit: "
    assert approval_question(edit=False) == "approve? [y]es / [n]o: "


def test_a_calls_progress_notices_leave_one_line_with_the_last_printed_before_its_result() -> None:
    console = SafeConsole(file=io.StringIO(), width=200)
    view = TerminalView(console, reader=SimpleNamespace(waiting_prompt=None))
    for step, token in enumerate(["notes ", "deleted ", "'x'"], start=1):
        view.show(ToolProgress(type="progress", tool="sub__ask", server="sub", progress=step, total=None,
                               message=token))
    view.show(ToolResult(type="tool_result", name="sub__ask", id="1", status="success", text="done"))
    assert console.file.getvalue().splitlines() == [  # type: ignore[attr-defined]
        "… sub__ask: 3 'x' (3 progress notices)", "← done"]


def test_a_policy_decision_is_one_dim_line_naming_the_rule() -> None:
    allowed = PolicyDecided(type="policy", tool="fs__read", action="allow", rule=1, source="policy[1]",
                            reason="drafts are fine", id="c1")
    denied = PolicyDecided(type="policy", tool="fs__read", action="deny", rule=0, source="policy[0]",
                           reason="private")
    assert shown(allowed).strip() == "policy[1] allows fs__read: drafts are fine"
    assert shown(denied).strip() == "policy[0] denies fs__read"  # its reason is in the result shown next


def test_context_says_how_full_the_window_is_and_what_was_left_out() -> None:
    from runner.events import ContextShown

    full = ContextShown(type="context_window", thread="t", tokens=2410, limit=3000, strategy="summarize",
                        messages=40, sent=12, summarized=26, summary=True, shortened=1)
    assert shown(full).strip() == ("context: 2,410 of 3,000 tokens (80%, summarize) · 12 of 40 messages "
                                   "sent, 26 in the summary, 1 old tool result as a reference")
    unlimited = ContextShown(type="context_window", thread="t", tokens=900, limit=None, strategy="trim",
                             messages=1, sent=1, summarized=0, summary=False, shortened=0)
    assert shown(unlimited).strip() == ("context: 900 tokens, no limit (set context.max_tokens) · "
                                        "1 of 1 message sent")


def test_a_written_summary_is_said_once_and_trimmed_requests_are_not_shown() -> None:
    from runner.events import ContextFitted

    written = ContextFitted(type="context", action="summarize", tokens=700, limit=8000, whole=9000,
                            summarized=24, written=True, left_out=0, shortened=0)
    said = "(summarized 24 earlier messages to fit 8,000 tokens; the thread keeps them all)"
    assert shown(written).strip() == said
    assert shown({**written, "written": False}, {**written, "action": "trim", "written": False}) == ""


def test_a_streamed_answer_is_printed_once_though_its_usage_comes_before_its_final_event() -> None:
    console = SafeConsole(file=io.StringIO(), width=200)
    view = TerminalView(console, reader=SimpleNamespace(waiting_prompt=None, keeps_partial_lines=True))
    totals = {"input_tokens": 1, "output_tokens": 1, "cached_tokens": 0, "reasoning_tokens": 0,
              "total_tokens": 2, "cost": None, "unpriced_steps": 1, "model_steps": 1, "tool_calls": 0,
              "seconds": 0.0}
    for event in ({"type": "token", "text": "All "}, {"type": "token", "text": "done."},
                  {"type": "usage", "agent": "main", "model": None, "step": totals, "turn": totals,
                   "thread": totals},
                  {"type": "final", "text": "All done.", "reason": "stop"}):
        view.show(event)  # type: ignore[arg-type]
    assert console.file.getvalue().count("All done.") == 1  # type: ignore[attr-defined]


def test_the_chat_names_each_agent_a_workflow_runs_but_an_agent_called_as_a_tool_only_by_its_call() -> None:
    text = shown(
        ToolCall(type="tool_call", name="board", args={"task": "Adopt it?"}, id="c1"),
        AgentStarted(type="agent", agent="board", caller="main", task="Adopt it?", call="c1"),
        AgentStarted(type="agent", agent="optimist", caller="board", task="Adopt it?"),
        AgentStarted(type="agent", agent="chair", caller="board", task="Weigh:\n\x1b[2Jyes\u202e"),
    )
    assert text.splitlines() == ['→ board {"task": "Adopt it?"}',
                                 'board: → optimist {"task": "Adopt it?"}',
                                 'board: → chair {"task": "Weigh: \\u001b[2Jyes\\u202e"}']


def test_a_resumed_threads_recap_names_the_agent_a_handoff_gave_the_conversation_to() -> None:
    messages = [HumanMessage("I was charged twice", id="1"),
                AIMessage("", id="2", tool_calls=[{"name": "handoff_to_billing", "args": {}, "id": "h"}]),
                ToolMessage("handed over", tool_call_id="h", id="3", artifact={"handed_to": "billing"}),
                AIMessage("", id="4", tool_calls=[{"name": "notes__calculate", "args": {}, "id": "c"}]),
                ToolMessage("42", tool_call_id="c", id="5"),
                AIMessage("Billing here, refunded.", id="6")]
    assert recap_lines(messages, "billing") == [
        "  you: I was charged twice", "  agent → handoff_to_billing", "  billing → notes__calculate",
        "  billing: Billing here, refunded."]


def test_a_resumed_threads_recap_names_the_agent_it_was_switched_to_when_nothing_was_handed_over() -> None:
    messages = [HumanMessage("hi", id="1"), AIMessage("Support here.", id="2")]
    assert recap_lines(messages, "support") == ["  you: hi", "  support: Support here."]
    assert recap_lines(messages, "main") == ["  you: hi", "  agent: Support here."]


def test_a_one_shot_runs_denial_of_an_agents_call_names_that_agent_as_its_other_lines_do() -> None:
    approval = ApprovalAsked(type="approval", tool="notes__add_note", args={}, id="c", agent="writer")
    assert denied_line(approval) == ("writer: denied notes__add_note: needs approval and no one can answer "
                                     "here (pass --yes to allow)")
    assert denied_line(ApprovalAsked(type="approval", tool="t", args={}, id="c")).startswith("denied t: ")
