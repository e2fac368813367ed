"""``/save NAME`` in the chat: the current thread written as a case, ready to run and to edit.

The case holds the user's turns, the tool calls the agent made (``match: unordered``), an
excerpt of the last answer under ``answer.contains``, to be edited into what matters, and the
answers given to its approvals (``approvals``), so that it runs as the conversation went.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from runner.errors import CaseSaveError
from runner.evals.cases import CASE_NAME_PATTERN, CASES_FOLDER, Case, find_case_files, load_cases

EXCERPT_CHARS = 60
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


def case_from_thread(name: str, messages: Sequence[BaseMessage],
                     approvals: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The case (as YAML-ready data) that replays the conversation in ``messages``, its approvals
    answered as ``approvals`` (:func:`approval_entry`) says."""
    inputs = [str(m.text) for m in messages if isinstance(m, HumanMessage) and str(m.text).strip()]
    if not inputs:
        raise CaseSaveError("the conversation has no user message yet: nothing to save")
    calls: list[dict[str, Any]] = []
    answer = ""
    for message in messages:
        if isinstance(message, AIMessage):
            calls += [{"name": c["name"], "args": c["args"]} if c["args"] else {"name": c["name"]}
                      for c in message.tool_calls]
            if not message.tool_calls:
                answer = str(message.text)
    expect: dict[str, Any] = {"tools": calls, "match": "unordered"}
    first_line = next((line.strip() for line in answer.splitlines() if line.strip()), "")
    if first_line:
        expect["answer"] = {"contains": first_line[:EXCERPT_CHARS].strip()}
    case = {"name": name, "input": inputs[0] if len(inputs) == 1 else inputs, "expect": expect}
    return {**case, "approvals": list(approvals)} if approvals else case


def save_case(manifest_path: Path, name: str, messages: Sequence[BaseMessage],
              approvals: Sequence[Mapping[str, Any]] = ()) -> Path:
    """Write ``evals/NAME.yaml`` next to the manifest; returns its path. Never overwrites."""
    if not re.match(CASE_NAME_PATTERN, name):
        raise CaseSaveError(f"'{name}' cannot name a case: use lowercase letters, digits, '.', "
                            "'_' and '-', starting with a letter or digit")
    case = case_from_thread(name, messages, approvals)
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
        + yaml.safe_dump({"cases": [case]}, sort_keys=False, allow_unicode=True, width=100)
    )
    path.write_text(text, encoding="utf-8")
    return path


def file_naming_case(manifest_path: Path, name: str) -> Path | None:
    """The case file next to the manifest that already has a case called ``name``, if one does.

    Read leniently: a file that is not valid YAML names no case here (``mcp-run test`` reports it)."""
    for path in find_case_files(manifest_path):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        cases = data.get("cases") if isinstance(data, dict) else None
        if isinstance(cases, list) and any(isinstance(c, dict) and c.get("name") == name for c in cases):
            return path
    return None


def saved_case(path: Path) -> Case:
    """The case just saved, read back as ``mcp-run test`` reads it."""
    return load_cases([path])[0]
