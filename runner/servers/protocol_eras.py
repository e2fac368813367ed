"""Which protocol era each server spoke last time, kept in the state folder between runs.

A client in ``auto`` mode first probes with the 2026-07-28 ``server/discover`` request and falls
back to the ``initialize`` handshake when the server refuses it. Servers built on an older SDK
answer that probe with an error and, on stdio, often a screen of validation warnings in their log;
the oldest (mcp <= 1.6) exit on it, and the supervisor then tries ``initialize`` at once.
A server that needed the handshake era is started in it straight away next time; a start that
fails that way forgets the era, and the next start probes again. Only an answer teaches an era: a
probe that went unanswered until its timeout (a slow start) records nothing. A remembered era is
trusted for ``REPROBE_AFTER`` seconds, then the server is probed again (it may have been updated).

A server's ``protocol:`` setting other than ``auto`` pins its era: nothing is probed or recorded.

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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from runner.manifest import HttpServerSpec, StdioServerSpec

logger = logging.getLogger(__name__)

FILE_NAME = "eras.json"
MAX_ENTRIES = 500  # a state folder outlives many manifest edits; old launch settings age out
REPROBE_AFTER = 7 * 24 * 3600.0  # a remembered era is trusted this long (seconds), then probed again

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
    """The ``eras.json`` file of one state folder: ``{identity: {"era": version, "at": epoch seconds}}``.

    ``clock`` gives the time in epoch seconds (``time.time``).
    """

    def __init__(self, state_dir: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = state_dir / FILE_NAME
        self._clock = clock

    def connect_mode(self, spec: StdioServerSpec | HttpServerSpec) -> str:
        """The SDK client's ``mode`` for ``spec``: its pinned ``protocol`` (``"legacy"`` for a
        handshake-era version, the version itself for a modern one); else ``"legacy"`` for a server
        recently learned to need the handshake era, and ``"auto"`` (probe) for any other."""
        if spec.protocol in HANDSHAKE_PROTOCOL_VERSIONS:
            return "legacy"
        if spec.protocol in MODERN_PROTOCOL_VERSIONS:
            return spec.protocol  # adopted without a probe
        entry = self._read().get(launch_identity(spec))
        if entry is None or entry[0] not in HANDSHAKE_PROTOCOL_VERSIONS:
            return "auto"
        age = self._clock() - entry[1]
        return "legacy" if 0 <= age < REPROBE_AFTER else "auto"  # a clock set back: probe too

    @staticmethod
    def worth_remembering(era: str | None, *, learned: bool) -> bool:
        """Whether a start that settled on ``era`` has something to record: only one that
        ``learned`` it (the server answered the probe, or died of it and then took
        ``initialize``) and ended in the handshake era does (a modern era is probed anyway)."""
        return learned and era in HANDSHAKE_PROTOCOL_VERSIONS

    def remember(self, spec: StdioServerSpec | HttpServerSpec, era: str | None) -> None:
        if era is None:
            return
        with _rewriting:  # servers of one fleet start together: one read-modify-write at a time
            entries = self._read()
            identity = launch_identity(spec)
            entries.pop(identity, None)
            entries[identity] = (era, self._clock())  # newest last: the oldest go first when full
            self._write(dict(list(entries.items())[-MAX_ENTRIES:]))

    def forget(self, spec: StdioServerSpec | HttpServerSpec) -> bool:
        """Forget ``spec``'s era; True when there was one."""
        with _rewriting:
            entries = self._read()
            if entries.pop(launch_identity(spec), None) is None:
                return False
            self._write(entries)
            return True

    def _read(self) -> dict[str, tuple[str, float]]:
        """Each identity's era and when it was learned; an entry of an older format (a bare era)
        counts as learned long ago."""
        try:
            entries = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none yet, or unreadable: every server is probed, as without the file
        if not isinstance(entries, dict):
            return {}
        read: dict[str, tuple[str, float]] = {}
        for key, value in entries.items():
            if isinstance(value, str):
                read[key] = (value, 0.0)
            elif (isinstance(value, dict) and isinstance(value.get("era"), str)
                    and isinstance(value.get("at"), (int, float))):
                read[key] = (value["era"], float(value["at"]))
        return read

    def _write(self, entries: dict[str, tuple[str, float]]) -> None:
        temporary = self.path.with_name(f".{FILE_NAME}.{os.getpid()}.{threading.get_ident()}")
        stored = {key: {"era": era, "at": round(at, 3)} for key, (era, at) in entries.items()}
        try:  # replaced whole, so a run starting beside this one never reads half a file
            temporary.write_text(json.dumps(stored, indent=1), encoding="utf-8")
            temporary.replace(self.path)
        except OSError as exc:  # only a probe is at stake: say so, and go on
            logger.warning("cannot remember protocol eras in %s: %s", self.path, exc)
            with contextlib.suppress(OSError):
                temporary.unlink()
