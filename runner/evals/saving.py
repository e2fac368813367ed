"""``/save NAME`` in the chat: the current thread written as a case, ready to run and to edit.

The case holds the user's turns, the tool calls made (``match: unordered``) and, with several
agents, the runs of the agents of ``agents:`` (``expect.agents``), an excerpt of the last answer
under ``answer.contains``, to be edited into what matters, and the answers given to its approvals
(``approvals``), so that it runs as the conversation went. Case files expand ``${VAR}`` as the
manifest does: the values of the variables the manifest references are written as ``${NAME}`` (as
cassettes write them, so a secret a tool returned never reaches the file), and a literal ``${``
as ``$${``.

The calls and agent runs are those the chat saw happen (a :class:`ChatTrajectory` of the thread),
every agent's, as ``mcp-run test`` observes them when the case runs: an agent's own tool calls
are in no message of the thread's conversation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from runner.agent.structured import answer_object
from runner.errors import CaseSaveError
from runner.evals.cases import (
    CASE_NAME_PATTERN,
    CASES_FOLDER,
    Case,
    case_names_in,
    find_case_files,
    load_cases,
)
from runner.evals.cassettes import Secrets
from runner.events import Event

EXCERPT_CHARS = 60
MAX_SAVED_FIELDS = 20  # fields of an answer object a saved case expects at most
SCHEMA_REFERENCE = "../schemas/evals.schema.json"  # from the cases folder, as in this repository


def approval_entry(tool: str, answer: Mapping[str, Any] | None) -> dict[str, Any]:
    """A case's ``approvals`` entry for an answer given in the chat (a resume value); None: the
    question was left unanswered (Ctrl-C), which the case replays as ``stop``."""
    if answer is None:
        return {"tool": tool, "action": "stop"}
    entry: dict[str, Any] = {"tool": tool, "action": answer["action"]}
    if answer["action"] == "deny" and answer.get("reason"):
        entry["reason"] = answer["reason"]
    if answer["action"] == "edit":
        entry["args"] = answer["args"]
    return entry


class ChatTrajectory:
    """The tool calls (every agent's, in the order they were made) and the runs of the agents of
    ``agents:`` of one thread's turns in a chat, read from the turns' events as ``mcp-run test``
    reads them when the case runs; an edited call with the arguments it ran with."""

    def __init__(self) -> None:
        self.turns = 0  # the user's messages the chat sent on the thread
        self.calls: list[dict[str, Any]] = []
        self.agents: list[str] = []
        self._positions: dict[str, int] = {}  # a call's id -> its index in calls

    def begin_turn(self, given: str | Sequence[BaseMessage]) -> None:
        """A turn the chat sends: a user's message, or a prompt command's messages (each user
        message of them is a turn of the case's input, as :func:`case_from_thread` reads them)."""
        messages = [HumanMessage(given)] if isinstance(given, str) else given
        self.turns += sum(1 for m in messages if isinstance(m, HumanMessage) and str(m.text).strip())

    def observe(self, event: Event) -> None:
        if event["type"] == "tool_call" and event["id"] not in self._positions:
            self._positions[event["id"]] = len(self.calls)
            self.calls.append(_call(event["name"], event["args"]))
        elif event["type"] == "agent":
            self.agents.append(event["agent"])

    def edited(self, call_id: str, args: Mapping[str, Any]) -> None:
        """The call ``call_id`` ran with ``args`` (an approval's ``edit`` answer)."""
        if (index := self._positions.get(call_id)) is not None:
            self.calls[index] = _call(self.calls[index]["name"], args)


def _call(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": dict(args)} if args else {"name": name}


def case_from_thread(name: str, messages: Sequence[BaseMessage], secrets: Secrets,
                     approvals: Sequence[Mapping[str, Any]] = (),
                     trajectory: ChatTrajectory | None = None) -> dict[str, Any]:
    """The case (as YAML-ready data) that replays the conversation in ``messages``, its approvals
    answered as ``approvals`` (:func:`approval_entry`) says, ``secrets`` written as ``${NAME}``.

    The calls and agent runs are ``trajectory``'s. Where it missed turns (the chat resumed a
    thread another process began), those turns' calls are the conversation's own (its agents'
    calls unknown), and the case expects at least what it lists (``superset``)."""
    inputs = [as_case_text(str(m.text), secrets) for m in messages
              if isinstance(m, HumanMessage) and str(m.text).strip()]
    if not inputs:
        raise CaseSaveError("the conversation has no user message yet: nothing to save")
    # The first turns, which the chat did not see (without a trajectory: the conversation's calls).
    missed = len(inputs) - trajectory.turns if trajectory is not None else 0
    own_calls = trajectory is None or missed > 0
    calls: list[dict[str, Any]] = []
    answer = ""
    output: Any = None
    turn = 0
    for message in messages:
        if isinstance(message, HumanMessage) and str(message.text).strip():
            turn += 1
        if isinstance(message, AIMessage):
            if own_calls and (trajectory is None or turn <= missed):
                calls += [_call(c["name"], c["args"]) for c in message.tool_calls]
            if not message.tool_calls:
                answer, output = str(message.text), answer_object(message)
    calls += trajectory.calls if trajectory is not None else []
    mode = "superset" if missed > 0 else "unordered"
    expect: dict[str, Any] = {"tools": as_case_text(calls, secrets), "match": mode}
    if trajectory is not None and trajectory.agents:
        expect |= {"agents": list(trajectory.agents), "agents_match": mode}
    first_line = next((line.strip() for line in answer.splitlines() if line.strip()), "")
    if output is not None:  # an answer object (``output:``): its fields, each by its path
        expect["output"] = as_case_text(dict(_leaves(output)[:MAX_SAVED_FIELDS]), secrets)
    elif first_line:  # the excerpt of the written text: a secret is never cut to a bare prefix
        expect["answer"] = {"contains": _excerpt(as_case_text(first_line, secrets))}
    case = {"name": name, "input": inputs[0] if len(inputs) == 1 else inputs, "expect": expect}
    return {**case, "approvals": as_case_text(list(approvals), secrets)} if approvals else case


def _leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """The scalar values of an object with their paths (``items.0.name``), in order."""
    if isinstance(value, dict):
        items: list[tuple[str, Any]] = list(value.items())
    elif isinstance(value, list):
        items = [(str(index), item) for index, item in enumerate(value)]
    else:
        return [(path, value)]
    return [leaf for key, item in items for leaf in _leaves(item, f"{path}.{key}" if path else str(key))]


def as_case_text(value: Any, secrets: Secrets) -> Any:
    """``value`` (a text, or texts in lists and mappings) as a case file writes it: a literal
    ``${`` as ``$${``, then each secret's value as ``${NAME}``."""
    if isinstance(value, str):
        return secrets.scrub(value.replace("${", "$${"))
    if isinstance(value, dict):
        return {key: as_case_text(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [as_case_text(item, secrets) for item in value]
    return value


def _excerpt(text: str) -> str:
    """The first EXCERPT_CHARS characters of ``text``, without a ``${…}`` cut open at the end."""
    cut = text[:EXCERPT_CHARS]
    opened = cut.rfind("${")
    if opened != -1 and "}" not in cut[opened:]:
        cut = cut[:opened - 1 if opened and cut[opened - 1] == "$" else opened]
    return cut.strip()


def save_case(manifest_path: Path, name: str, messages: Sequence[BaseMessage], secrets: Secrets,
              approvals: Sequence[Mapping[str, Any]] = (), trajectory: ChatTrajectory | None = None
              ) -> Path:
    """Write ``evals/NAME.yaml`` next to the manifest, for that manifest (``manifest:``),
    ``secrets`` written as ``${NAME}``, its approvals answered as ``approvals`` says, its calls and
    agent runs ``trajectory``'s; returns its path. Never overwrites."""
    if not re.match(CASE_NAME_PATTERN, name):
        raise CaseSaveError(f"'{name}' cannot name a case: use lowercase letters, digits, '.', "
                            "'_' and '-', starting with a letter or digit")
    case = case_from_thread(name, messages, secrets, approvals, trajectory)
    path = manifest_path.parent / CASES_FOLDER / f"{name}.yaml"
    if path.exists():
        raise CaseSaveError(f"{path} already exists: choose another name")
    if (holder := file_naming_case(manifest_path, name)) is not None:
        raise CaseSaveError(f"a case named '{name}' is already in {holder}: choose another name "
                            "(`mcp-run test` needs each case name once)")
    path.parent.mkdir(parents=True, exist_ok=True)
    # The editor hint only where the schema is at that path: elsewhere it would point at nothing.
    schema_line = (f"# yaml-language-server: $schema={SCHEMA_REFERENCE}\n"
                   if (path.parent / SCHEMA_REFERENCE).exists() else "")
    text = (
        schema_line
        + "# Saved from the chat: edit the expectations to what matters, then run\n"
        f"# `mcp-run test {manifest_path.name} -k {name}`.\n"
        + yaml.safe_dump({"manifest": manifest_path.name, "cases": [case]}, sort_keys=False,
                         allow_unicode=True, width=100)
    )
    path.write_text(text, encoding="utf-8")
    return path


def file_naming_case(manifest_path: Path, name: str) -> Path | None:
    """The case file next to the manifest that already has a case called ``name``, if one does,
    whichever manifest it is for: the cases of a folder share its cassettes (``cassettes/NAME.yaml``).

    Read leniently: a file that is not valid YAML names no case here (``mcp-run test`` reports it)."""
    return next((path for path in find_case_files(manifest_path, every=True) if name in case_names_in(path)),
                None)


def saved_case(path: Path) -> Case:
    """The case just saved, read back as ``mcp-run test`` reads it."""
    return load_cases([path])[0]
