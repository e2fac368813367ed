"""The chat commands (``/help``, ``/tools``, ``/call``, …): what ``/help`` says of each, and their
handlers, registered with the chat session's :func:`~runner.cli.chat_session.chat_command`.

The names are ``manifest.CHAT_COMMANDS`` (prompt commands may not take them); ``/exit`` and
``/quit`` are the session's own (``LEAVE_COMMANDS``).
"""

from __future__ import annotations

import json
import os
import uuid

from runner.agent.nodes import close_dangling_tool_calls
from runner.agent.reload import reload_runtime
from runner.agent.spending import thread_totals, totals
from runner.cli.chat_session import ChatSession, chat_command
from runner.cli.completion import resolve_thread
from runner.cli.media import media_blocks
from runner.cli.rows import (
    agent_rows,
    offered_tools,
    output_limit,
    output_text,
    prompt_rows,
    refused_arguments,
    tool_rows,
)
from runner.errors import CaseSaveError, ManifestError, ToolError
from runner.evals.cassettes import Secrets
from runner.evals.saving import save_case
from runner.events import (
    AgentsListed,
    ApprovalAsked,
    CaseSaved,
    ChatCommandRow,
    ContextShown,
    HelpShown,
    MediaListed,
    PromptsListed,
    ReloadFailed,
    ThreadShown,
    ToolCall,
    ToolResult,
    ToolRow,
    ToolsListed,
    UsageShown,
)
from runner.manifest import CHAT_COMMANDS
from runner.manifest.agents import switch_problem
from runner.tools.suggest import unknown_tool_line

# What /help says of each chat command; the names are manifest.CHAT_COMMANDS (prompt commands may
# not take them), and tests/cli/test_cli_chat.py checks that each has a description and a handler.
CHAT_COMMAND_HELP = {
    "help": ("/help", "this list"),
    "tools": ("/tools", "the tools the model sees"),
    "prompts": ("/prompts", "the prompt commands"),
    "agents": ("/agents", "the agents: each one's kind, description and the agents that may call it"),
    "agent": ("/agent [NAME]",
              "the agent answering the conversation, or switch to NAME (main or one of agents:)"),
    "call": ("/call NAME {json}",
             "call a tool directly, without the model (asks first if it needs approval)"),
    "thread": ("/thread [ID|new]", "show the conversation thread, switch to ID, or start a new one"),
    "resume": ("/resume", "continue the thread's last turn where it was cut off (a crash, kill -9, Ctrl-C)"),
    "reload": ("/reload", "reload the manifest, templates and modules now"),
    "save": ("/save NAME", "write the conversation so far as the test case evals/NAME.yaml"),
    "media": ("/media", "the images, audio and files tools returned in this thread, saved as files"),
    "context": ("/context", "how full the model's context window is for this thread"),
    "exit": ("/exit", "leave the chat (or Ctrl-D)"),
    "quit": ("/quit", "leave the chat"),
    "usage": ("/usage", "what this thread has spent: tokens, cost, tool calls (see limits:)"),
}


@chat_command("help")
async def _help(session: ChatSession, line: str) -> None:
    commands = [ChatCommandRow(command=f"/{name}", usage=CHAT_COMMAND_HELP[name][0],
                               description=CHAT_COMMAND_HELP[name][1]) for name in CHAT_COMMANDS]
    session.view.show(HelpShown(type="help", commands=commands, prompts=prompt_rows(session.runtime)))


@chat_command("tools")
async def _tools(session: ChatSession, line: str) -> None:
    offered = await offered_tools(session.runtime)
    rows = [ToolRow(name=row["name"], server=row["server"], original=row["original"],
                    description=row["description"], approval=row["approval"],
                    offered=offered is None or row["name"] in offered, kind=row["kind"])
            for row in tool_rows(session.runtime, schemas=False)]
    session.view.show(ToolsListed(type="tools", tools=rows, search=offered is not None))


@chat_command("prompts")
async def _prompts(session: ChatSession, line: str) -> None:
    session.view.show(PromptsListed(type="prompts", prompts=prompt_rows(session.runtime)))


@chat_command("agents")
async def _agents(session: ChatSession, line: str) -> None:
    rows = agent_rows(session.runtime.manifest)
    current = await session.current_agent()
    for row in rows:
        if row["name"] == current:
            row["current"] = True
    session.view.show(AgentsListed(type="agents", agents=rows))


@chat_command("agent")
async def _agent(session: ChatSession, line: str) -> None:
    """``/agent NAME``: the next message, and those after it, go to agent NAME."""
    name = line.removeprefix("/agent").strip()
    if name and (problem := switch_problem(name, session.runtime.manifest.agents)) is not None:
        session.error(problem)
        return
    if name:
        session.switch_agent(name)
    session.view.show(session.agent_event(await session.current_agent()))


@chat_command("thread")
async def _thread(session: ChatSession, line: str) -> None:
    parts = line.split()
    note = ""
    if len(parts) > 1 and parts[1] == "new":
        session.runtime.use_thread(uuid.uuid4().hex[:12])
    elif len(parts) > 1:
        thread_id, note = await resolve_thread(session.runtime, parts[1])
        session.runtime.use_thread(thread_id)
        if cut_off := await session.find_cut_off():
            note = f"{note}; {cut_off}"
    session.view.show(ThreadShown(type="thread", thread=session.runtime.thread_id, note=note))
    await session.follow_agent()  # that thread's agent answers


@chat_command("resume")
async def _resume(session: ChatSession, line: str) -> None:
    await session.resume()


@chat_command("reload")
async def _reload(session: ChatSession, line: str) -> None:
    try:
        report = await reload_runtime(session.runtime)
    except ManifestError as exc:
        problems = [str(problem) for problem in exc.problems]
        session.show_reload(ReloadFailed(type="reload_error", problems=problems))
        return
    session.show_reload(report.event())


@chat_command("save")
async def _save(session: ChatSession, line: str) -> None:
    """``/save NAME``: the thread so far as a case for ``mcp-run test``, beside the manifest."""
    name = line.removeprefix("/save").strip()
    if not name:
        session.error("usage: /save NAME (the case is written to evals/NAME.yaml)")
        return
    runtime = session.runtime
    state = await runtime.graph.aget_state(runtime.config())
    try:
        secrets = Secrets.of(runtime.loaded, os.environ)  # as `mcp-run test` scrubs its cassettes
        path = save_case(runtime.loaded.path, name, state.values.get("messages", []), secrets,
                         session.answered_approvals(), session.trajectory())
    except CaseSaveError as exc:
        session.error(str(exc))
        return
    session.view.show(CaseSaved(type="saved", case=name, path=str(path)))


@chat_command("call")
async def _call(session: ChatSession, line: str) -> None:
    """``/call NAME {json}``: the tool through the catalog (validation, timeout, fallback), as
    ``mcp-run call`` does; outside the conversation, so the model does not see it."""
    name, _, raw = line.removeprefix("/call").strip().partition(" ")
    catalog = session.runtime.catalog
    if not name:
        session.error('usage: /call NAME {"arg": value}; /tools lists the tools')
        return
    unlisted = session.runtime.caller.unlisted(name)
    if name not in catalog.entries and unlisted is None:
        session.error(unknown_tool_line(name, catalog.entries))
        return
    try:
        args = json.loads(raw.strip() or "{}")
    except json.JSONDecodeError as exc:
        session.error(f"the arguments of /call must be a JSON object: {exc}")
        return
    if not isinstance(args, dict):
        session.error("the arguments of /call must be a JSON object")
        return
    if problems := session.runtime.caller.argument_problems(name, args):  # refused before anyone is asked
        session.error(refused_arguments(name, problems, str(session.runtime.loaded.path)))
        return
    call_id = session.next_direct_call_id()
    if unlisted is None:
        session.view.show(ToolCall(type="tool_call", name=name, args=args, id=call_id))
    else:  # the view warns that the server does not list it
        session.view.show(ToolCall(type="tool_call", name=name, args=args, id=call_id, unlisted=True))
    decision = session.runtime.caller.decide(name, args)  # a denial is the call's own error, below
    if decision is not None and decision.action == "ask":
        asked = ApprovalAsked(type="approval", tool=name, args=args, id=call_id)
        if decision.rule is not None:  # a rule of ``policy`` asks (not a tools.approve entry)
            asked["policy"] = decision.reference()
        answer = await session.approve(asked)
        if answer["action"] == "deny":
            session.view.show(ToolResult(type="tool_result", name=name, id=call_id, status="error",
                                         text=f"denied: {answer['reason']}"), in_full=True)
            return
        args = answer.get("args", args)
    if decision is not None:  # told as for the model's calls (outside a turn, no graph stream carries it)
        session.view.show(decision.event(name, call_id))
    try:
        output = await (session.runtime.caller.call(name, args) if unlisted is None
                        else session.runtime.caller.call_unlisted(unlisted, args))
    except ToolError as exc:
        session.view.show(ToolResult(type="tool_result", name=name, id=call_id, status="error",
                                     text=str(exc)), in_full=True)
        return
    text, structured = output_text(output, output_limit(session.runtime, name))
    if structured is not None:
        text = f"{text}\nstructured content:\n{structured}" if text else structured
    session.view.show(ToolResult(type="tool_result", name=name, id=call_id, status="success",
                                 text=text), in_full=True)
    if not isinstance(output.content, str):
        thread = session.runtime.thread_id
        for saved in session.media.save(thread, name, call_id, media_blocks(output.content)):
            session.view.show(saved.event())


@chat_command("usage")
async def _usage(session: ChatSession, line: str) -> None:
    """``/usage``: the thread's totals as its checkpoint keeps them (they survive restarts)."""
    runtime = session.runtime
    state = await runtime.graph.aget_state(runtime.config())
    usage = state.values.get("usage") or {}
    session.view.show(UsageShown(type="usage_totals", thread=runtime.thread_id,
                                 agents={agent: totals(spent) for agent, spent in usage.items()},
                                 total=totals(thread_totals(usage))))


@chat_command("media")
async def _media(session: ChatSession, line: str) -> None:
    thread = session.runtime.thread_id
    files = [str(path) for path in session.media.files(thread)]
    session.view.show(MediaListed(type="media_list", thread=thread, folder=str(session.media.folder(thread)),
                                  files=files))


@chat_command("context")
async def _context(session: ChatSession, line: str) -> None:
    """``/context``: what the thread's next model request would carry (runner.agent.context)."""
    runtime = session.runtime
    generation = runtime.generation
    window = generation.context
    if window is None:
        session.error("/context needs the agent's model, which this chat has not started")
        return
    values = (await runtime.graph.aget_state(runtime.config())).values
    history = close_dangling_tool_calls(values.get("messages", []), values.get("stopped_calls", ()))
    found = values.get("found_tools", [])
    tools = generation.tool_search.offered(found) if generation.tool_search else runtime.catalog.tools
    report = window.measure(await runtime.settled_system_prompt(), tools, history,
                            values.get("context_summary"))
    session.view.show(ContextShown(
        type="context_window", thread=runtime.thread_id, tokens=report.tokens, limit=report.limit,
        strategy=window.spec.strategy, messages=report.messages, sent=report.sent,
        summarized=report.summarized, summary=report.summarized > 0, shortened=report.shortened))
