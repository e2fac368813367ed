"""Which protocol era each server spoke last time, kept in the state folder between runs.

A client in ``auto`` mode first probes with the 2026-07-28 ``server/discover`` request and falls
back to the ``initialize`` handshake when the server refuses it. Servers built on an older SDK
answer that probe with an error and, on stdio, often a screen of validation warnings in their log.
A server that needed the fallback once is started in the handshake era straight away next time;
a start that fails that way forgets the era, and the next start probes again.

Servers are known by their launch settings (transport, command, args, working directory and the
*names* of their environment variables, or URL without credentials and header names), hashed: the
file never holds a setting's value, so a secret passed in an argument cannot leak through it.
Only the handshake era is remembered: a modern server is probed with the request it answers anyway.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from runner.manifest import HttpServerSpec, StdioServerSpec

logger = logging.getLogger(__name__)

FILE_NAME = "eras.json"
MAX_ENTRIES = 500  # a state folder outlives many manifest edits; old launch settings age out

_rewriting = threading.Lock()  # reads and writes run in worker threads, several at once


def launch_identity(spec: StdioServerSpec | HttpServerSpec) -> str:
    """A hash of what decides which program answers: never of a secret value."""
    if isinstance(spec, StdioServerSpec):
        settings: dict[str, Any] = {
            "transport": "stdio", "command": spec.command, "args": spec.args, "cwd": spec.cwd,
            "env": sorted(spec.env), "env_passthrough": sorted(spec.env_passthrough),
        }
    else:
        parts = urlsplit(spec.url)  # where it is, not who asks: no credentials, no query
        host = f"{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"
        url = urlunsplit((parts.scheme, host, parts.path, "", ""))
        settings = {"transport": spec.transport, "url": url, "headers": sorted(spec.headers)}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:32]


class EraMemory:
    """The ``eras.json`` file of one state folder."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / FILE_NAME

    def connect_mode(self, spec: StdioServerSpec | HttpServerSpec) -> str:
        """``"legacy"`` for a server known to need the handshake era, else ``"auto"``."""
        era = self._read().get(launch_identity(spec))
        return "legacy" if era in HANDSHAKE_PROTOCOL_VERSIONS else "auto"

    @staticmethod
    def worth_remembering(mode: str, era: str | None) -> bool:
        """Whether a start in ``mode`` that settled on ``era`` has something to record: only a probe
        that ended in the handshake era does (a modern era is probed anyway)."""
        return mode == "auto" and era in HANDSHAKE_PROTOCOL_VERSIONS

    def remember(self, spec: StdioServerSpec | HttpServerSpec, era: str | None) -> None:
        with _rewriting:  # servers of one fleet start together: one read-modify-write at a time
            entries = self._read()
            identity = launch_identity(spec)
            if era is None or entries.get(identity) == era:
                return
            entries.pop(identity, None)
            entries[identity] = era  # newest last: the oldest go first when the file is full
            self._write(dict(list(entries.items())[-MAX_ENTRIES:]))

    def forget(self, spec: StdioServerSpec | HttpServerSpec) -> bool:
        """Forget ``spec``'s era; True when there was one."""
        with _rewriting:
            entries = self._read()
            if entries.pop(launch_identity(spec), None) is None:
                return False
            self._write(entries)
            return True

    def _read(self) -> dict[str, str]:
        try:
            entries = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none yet, or unreadable: every server is probed, as without the file
        if not isinstance(entries, dict):
            return {}
        return {key: value for key, value in entries.items() if isinstance(value, str)}

    def _write(self, entries: dict[str, str]) -> None:
        temporary = self.path.with_name(f".{FILE_NAME}.{os.getpid()}.{threading.get_ident()}")
        try:  # replaced whole, so a run starting beside this one never reads half a file
            temporary.write_text(json.dumps(entries, indent=1), encoding="utf-8")
            temporary.replace(self.path)
        except OSError as exc:  # only a probe is at stake: say so, and go on
            logger.warning("cannot remember protocol eras in %s: %s", self.path, exc)
            with contextlib.suppress(OSError):
                temporary.unlink()
