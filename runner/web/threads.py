"""The page's conversations: each agent's threads as the checkpointer keeps them, their titles,
their messages as the page shows them (turn events, tool cards), and a question left unanswered.

A thread's title is the start of its first message, or the name given in the page (kept in
``<state>/web/titles.json``, private to the user).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from runner.agent.call_ledger import STOPPED_CHANNEL
from runner.agent.handoffs import current_agent
from runner.agent.nodes import NOT_RUN_TEXT, STOPPED_TEXT, answers_by_request
from runner.agent.runtime import Runtime
from runner.agent.team import AGENT_THREAD_SEPARATOR, agent_thread
from runner.agent.turns import reply_text
from runner.events import Question, call_event, question
from runner.manifest import MAIN_AGENT
from runner.manifest.agents import conversing_agents
from runner.store.private import private_folder, private_opener
from runner.tools.caller import RETRIES_KEY

logger = logging.getLogger(__name__)

THREAD_SCAN_LIMIT = 2000  # checkpoints read to find the threads
TITLE_LENGTH = 60  # characters of a first message taken as a title
MEDIA_KINDS = ("image", "audio", "file")


class Titles:
    """The names given to threads in the page, by agent and thread id."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "web" / "titles.json"

    def read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:  # the titles fall back to first messages
            logger.warning("the threads' names in %s cannot be read: %s", self.path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        return {key: value for key, value in data.items() if isinstance(value, str)}

    def set(self, agent: str, thread: str, title: str | None) -> None:
        titles = self.read()
        key = agent_thread(agent, thread)
        if title:
            titles[key] = title
        else:
            titles.pop(key, None)
        private_folder(self.path.parent)
        partial = self.path.with_suffix(".tmp")
        with open(partial, "w", encoding="utf-8", opener=private_opener) as file:
            json.dump(titles, file)
        os.replace(partial, self.path)


async def thread_ids(runtime: Runtime, agent: str) -> list[str]:
    """The ids of ``agent``'s threads the checkpointer holds, most recently written first."""
    checkpointer = runtime.checkpointer
    if checkpointer is None:
        return []
    found: list[str] = []
    scanned = 0
    suffix = f"{AGENT_THREAD_SEPARATOR}{agent}"
    async for checkpoint in checkpointer.alist(None):
        stored = checkpoint.config.get("configurable", {}).get("thread_id")
        scanned += 1
        if isinstance(stored, str) and runtime.own_thread(checkpoint.metadata):
            if agent == MAIN_AGENT and AGENT_THREAD_SEPARATOR not in stored:
                thread: str | None = stored
            elif agent != MAIN_AGENT and stored.endswith(suffix):
                thread = stored.removesuffix(suffix)
            else:
                thread = None
            if thread is not None and thread not in found:
                found.append(thread)
        if scanned >= THREAD_SCAN_LIMIT:
            break
    return found


async def thread_rows(runtime: Runtime, agent: str, titles: Titles) -> list[dict[str, Any]]:
    """Each thread of ``agent``: its id and title."""
    named = titles.read()
    rows = []
    for thread in await thread_ids(runtime, agent):
        title = named.get(agent_thread(agent, thread))
        if title is None:
            messages = await _messages(runtime, agent, thread)
            first = next((m for m in messages if isinstance(m, HumanMessage)), None)
            title = " ".join(first.text.split())[:TITLE_LENGTH] if first is not None else thread
        rows.append({"id": thread, "title": title})
    return rows


async def _messages(runtime: Runtime, agent: str, thread: str) -> list[Any]:
    state = await runtime.agents[agent].aget_state(runtime.config(thread, agent=agent))
    return list((state.values or {}).get("messages", []))


async def foreign_thread(runtime: Runtime, agent: str, thread: str) -> bool:
    """Whether the thread was last written by another manifest sharing the store (in the folder)."""
    state = await runtime.agents[agent].aget_state(runtime.config(thread, agent=agent))
    return not runtime.own_thread(state.metadata)


async def answering_agent(runtime: Runtime, agent: str, thread: str) -> str:
    """The agent answering ``agent``'s thread: the main agent's threads may have been handed to
    another (:func:`runner.agent.handoffs.current_agent`); an agent an edit removed answers no more."""
    if agent != MAIN_AGENT:
        return agent
    state = await runtime.agents[agent].aget_state(runtime.config(thread, agent=agent))
    answering = current_agent(state.values or {})
    return answering if answering in conversing_agents(runtime.manifest.agents) else MAIN_AGENT


async def user_messages(runtime: Runtime, agent: str, thread: str) -> int:
    """How many messages from the user the thread holds."""
    return sum(isinstance(message, HumanMessage) for message in await _messages(runtime, agent, thread))


async def pending_question(runtime: Runtime, agent: str, thread: str) -> Question | None:
    """The question the thread's last turn paused on, unanswered; None if it is not paused."""
    state = await runtime.agents[agent].aget_state(runtime.config(thread, agent=agent))
    for task in state.tasks:
        for waiting in task.interrupts:
            if isinstance(waiting.value, Mapping):
                return question(waiting.value)
    return None


async def thread_history(runtime: Runtime, agent: str, thread: str) -> list[dict[str, Any]]:
    """The thread as the page shows it: ``user`` messages, and the turn events (``tool_call``,
    ``tool_retry``, ``tool_result`` with its ``detail``, ``final``) its messages stand for. A call
    its stopped turn left running has a ``stopped`` result: what the model is told of it."""
    items: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    state = await runtime.agents[agent].aget_state(runtime.config(thread, agent=agent))
    messages = list((state.values or {}).get("messages", []))
    answered = answers_by_request(messages)  # a later request may use an earlier one's call id
    stopped = set((state.values or {}).get(STOPPED_CHANNEL, ()))
    last_user = max((index for index, message in enumerate(messages) if isinstance(message, HumanMessage)),
                    default=-1)
    for position, message in enumerate(messages):
        if isinstance(message, HumanMessage):
            items.append({"type": "user", "text": message.text})
        elif isinstance(message, AIMessage):
            for call in message.tool_calls:
                names[str(call["id"])] = call["name"]
                items.append({"type": "tool_call", "name": call["name"], "args": call["args"],
                              "id": call["id"]})
                # A call its stopped turn left without a result (running, or at its question once a
                # later message closed it) is shown as the model is told of it.
                if call["id"] not in answered[position] and (call["id"] in stopped or position < last_user):
                    text = STOPPED_TEXT if call["id"] in stopped else NOT_RUN_TEXT
                    items.append({"type": "tool_result", "name": call["name"], "id": call["id"],
                                  "status": "error", "stopped": True, "text": text, "detail": None})
            if not message.tool_calls and (text := reply_text(message)):
                items.append({"type": "final", "text": text, "reason": None})
        elif isinstance(message, ToolMessage):
            name = names.get(message.tool_call_id) or str(message.name)
            for retry in message.response_metadata.get(RETRIES_KEY, []):
                items.append(dict(call_event(retry, name, retry["server"], message.tool_call_id)))
            items.append({"type": "tool_result", "name": name, "id": message.tool_call_id,
                          "status": message.status, "text": message.text,
                          "detail": tool_detail(runtime, name, message)})
    return items


def tool_detail(runtime: Runtime, name: str, message: ToolMessage) -> dict[str, Any]:
    """What a tool card shows of a result beyond its text: the server and the tool's own name,
    each content block (text, image, audio, file with its base64 data and type), and the
    structured content."""
    return content_detail(runtime, name, message.content, message.artifact)


def content_detail(runtime: Runtime, name: str, content: str | list[Any], structured: Any) -> dict[str, Any]:
    """:func:`tool_detail` of a result's content and structured content."""
    entry = runtime.catalog.entries.get(name)
    blocks: list[dict[str, Any]] = []
    if isinstance(content, str):
        blocks.append({"type": "text", "text": content})
    else:
        for block in content:
            if isinstance(block, str):
                blocks.append({"type": "text", "text": block})
            elif isinstance(block, Mapping) and block.get("type") == "text":
                blocks.append({"type": "text", "text": str(block.get("text", ""))})
            elif isinstance(block, Mapping) and block.get("type") in MEDIA_KINDS:
                data = block.get("base64") or block.get("data")
                blocks.append({"type": block["type"], "mime_type": str(block.get("mime_type") or ""),
                               "base64": data if isinstance(data, str) else None})
    return {"server": entry.origin.server if entry is not None else None,
            "original": entry.origin.name if entry is not None else None,
            "blocks": blocks, "structured": structured}


async def tool_details(runtime: Runtime, agent: str, thread: str,
                       wanted: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The detail of each result of ``wanted`` (call id → tool name), read from the thread."""
    found = {}
    for message in await _messages(runtime, agent, thread):
        if isinstance(message, ToolMessage) and message.tool_call_id in wanted:
            found[message.tool_call_id] = tool_detail(runtime, wanted[message.tool_call_id], message)
    return found
