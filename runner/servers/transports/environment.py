"""What a stdio server process gets from the host: an allow-listed environment and a working directory.

A server sees only these host variables, the names its spec lists in ``env_passthrough``, and the
spec's own ``env`` (which wins). Everything else in the runner's environment - API keys, tokens,
cloud credentials - stays invisible to servers unless the manifest passes it on purpose.

Allow-list (:data:`HOST_ENV_ALLOWLIST`):

- POSIX: ``PATH HOME USER LOGNAME SHELL TERM LANG LANGUAGE TZ TMPDIR`` and every ``LC_*`` locale
  variable;
- Windows: ``PATH PATHEXT SYSTEMROOT SYSTEMDRIVE WINDIR COMSPEC TEMP TMP USERNAME USERPROFILE
  HOMEDRIVE HOMEPATH APPDATA LOCALAPPDATA PROGRAMDATA PROGRAMFILES PROCESSOR_ARCHITECTURE``.

Values that start with ``()`` (exported shell functions) are never passed through.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from runner.errors import ServerStartError
from runner.manifest import StdioServerSpec

POSIX_ALLOWLIST = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR",
)
WINDOWS_ALLOWLIST = (
    "PATH", "PATHEXT", "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "TEMP", "TMP", "USERNAME",
    "USERPROFILE", "HOMEDRIVE", "HOMEPATH", "APPDATA", "LOCALAPPDATA", "PROGRAMDATA", "PROGRAMFILES",
    "PROCESSOR_ARCHITECTURE",
)
HOST_ENV_ALLOWLIST = WINDOWS_ALLOWLIST if sys.platform == "win32" else POSIX_ALLOWLIST
LOCALE_PREFIX = "LC_"


def _allowed(name: str) -> bool:
    return name in HOST_ENV_ALLOWLIST or (sys.platform != "win32" and name.startswith(LOCALE_PREFIX))


def allowlisted_environment(
    host: Mapping[str, str] | None = None, passthrough: frozenset[str] = frozenset()
) -> dict[str, str]:
    """The host variables of the allow-list (and ``passthrough``), never exported shell functions."""
    host = os.environ if host is None else host
    return {
        name: value
        for name, value in host.items()
        if (_allowed(name) or name in passthrough) and not value.startswith("()")
    }


def server_environment(spec: StdioServerSpec, host: Mapping[str, str] | None = None) -> dict[str, str]:
    """The complete environment of a stdio server process (values are secret: never log them)."""
    env = allowlisted_environment(host, frozenset(spec.env_passthrough))
    env.update(spec.env)
    return env


# Values too short or too common to be a secret: redacting them would garble every message.
_NOT_SECRET = re.compile(r"(?i)\d+|true|false|yes|no|on|off")
MIN_SECRET_CHARS = 4


def secret_values(spec: StdioServerSpec, host: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of the spec's ``env`` and of its ``env_passthrough`` variables: redacted from
    whatever a server says that reaches a message (its stderr tail), longest first."""
    host = os.environ if host is None else host
    values = list(spec.env.values()) + [host.get(name, "") for name in spec.env_passthrough]
    kept = {value for value in values
            if len(value) >= MIN_SECRET_CHARS and not _NOT_SECRET.fullmatch(value)}
    return tuple(sorted(kept, key=len, reverse=True))


def redacted(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret value replaced by ``***``."""
    for value in secrets:
        text = text.replace(value, "***")
    return text


def working_directory(key: str, spec: StdioServerSpec, base_dir: Path) -> Path:
    """The server's cwd: ``spec.cwd`` resolved against the manifest's folder (default: that folder)."""
    cwd = (base_dir / spec.cwd).resolve() if spec.cwd else base_dir.resolve()
    if not cwd.is_dir():
        raise ServerStartError(key, f"working directory {str(cwd)!r} does not exist", permanent=True)
    return cwd
