"""Agents written into a test's folder: manifests declaring the test servers, and the bundled agent.

    path = write_manifest(tmp_path, {"demo": server("demo", timeout="2s")}, model="offline")
    folder = copy_bundled_agent(tmp_path)   # agent.yaml, examples/, prompts/, schemas/, evals/

Each suite passes the top-level settings it cares about (model, defaults, checkpointer, ...);
this module adds only ``version``, a ``name`` and the ``servers``.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SERVERS = TESTS / "servers"
BUNDLED_AGENT = ("agent.yaml", "examples", "prompts", "schemas", "evals")


def server(name: str, *args: str, **settings: Any) -> dict[str, Any]:
    """A manifest entry that starts test server ``name`` (``tests/servers/<name>.py``) over stdio."""
    return {"command": "python", "args": [str(SERVERS / f"{name}.py"), *args], **settings}


def manifest_document(servers: Mapping[str, Any], *, name: str = "test", **top: Any) -> dict[str, Any]:
    """The manifest as a mapping: ``version``, ``name``, then ``top``, then ``servers``."""
    return {"version": 1, "name": name, **top, "servers": dict(servers)}


def write_manifest(folder: Path, servers: Mapping[str, Any], *, name: str = "test", **top: Any) -> Path:
    """``folder/agent.yaml`` declaring ``servers`` and the top-level settings ``top``; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(manifest_document(servers, name=name, **top), sort_keys=False))
    return path


def copy_bundled_agent(folder: Path) -> Path:
    """The bundled agent (manifest, notes server, templates, schema) copied into ``folder``."""
    for entry in BUNDLED_AGENT:
        source = ROOT / entry
        if source.is_dir():
            shutil.copytree(source, folder / entry)
        else:
            shutil.copy(source, folder / entry)
    return folder
