"""Manifests of several agents (``agents:``) for tests: the bundled notes server, a scripted main
model, and a scripted model of its own for each agent that has a script."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml
from builders import ROOT

NOTES = {"command": "python", "args": ["notes_server.py"], "env": {"NOTES_FILE": "notes.json"}}


def write_team(folder: Path, main: list[Any], agents: dict[str, dict[str, Any]], *,
               scripts: dict[str, list[Any]] | None = None, servers: dict[str, Any] | None = None,
               **top: Any) -> Path:
    """``folder/agent.yaml`` named ``team``: the notes server (and ``servers``), the scripted main
    model playing ``main``, and ``agents``; each of ``scripts`` is the script of the agent of that
    name."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "examples" / "notes_server.py", folder / "notes_server.py")
    (folder / "main.yaml").write_text(yaml.safe_dump(main))
    agents = {name: dict(spec) for name, spec in agents.items()}
    for name, script in (scripts or {}).items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(script))
        agents[name]["model"] = {"id": "scripted", "script": f"{name}.yaml"}
    document = {"version": 1, "name": "team", "model": {"id": "scripted", "script": "main.yaml"},
                "checkpointer": "memory", "servers": {"notes": NOTES, **(servers or {})}, **top,
                "agents": agents}
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def call(name: str, **args: Any) -> dict[str, Any]:
    """A scripted model turn calling tool ``name`` with ``args``."""
    return {"tool_calls": [{"name": name, "args": args}]}
