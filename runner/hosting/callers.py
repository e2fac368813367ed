"""Who calls the served agent, and whose threads they may see.

Served over HTTP with bearer tokens, every request names its caller by its token. With one token
(``--token-env VAR``), or with none (loopback), there is one caller, as there always was: its
thread ids are the checkpointer's own. With several (a tokens file, ``--tokens-file PATH``, or
variables ``MCP_RUN_TOKEN_<CALLER>``), each token names a caller, and each caller's threads live
in a space of their own: the caller ``alice`` asking for thread ``t1`` reaches the checkpointer's
thread ``alice/t1``. A caller lists only its own threads, and the id of another caller's thread,
looked up in its own space, is one it never started: refused exactly as an unknown one.

The tokens file maps each caller to its token, one ``caller: token`` line each (it is YAML: ``#``
starts a comment, a token may be quoted). It must be readable by its owner alone (mode 0600):
a file others can read is refused, and so is one that names no caller (served with no caller,
nobody would need a token). Callers are named by letters, digits, ``_`` and ``-``
(``MCP_RUN_TOKEN_DIR``, the OAuth token store's folder, names no caller).
"""

from __future__ import annotations

import hmac
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from starlette.types import Scope

from runner.auth.store import TOKEN_DIR_VARIABLE
from runner.errors import ServeError

TOKEN_VARIABLE_PREFIX = "MCP_RUN_TOKEN_"
CALLER_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
SPACE_SEPARATOR = "/"  # never in a thread id (THREAD_PATTERN): a caller's threads are "caller/id"
CALLER_KEY = "mcp_run.caller"  # where a request's ASGI scope holds its caller's name

_CALLER = re.compile(CALLER_PATTERN)


@dataclass(frozen=True)
class Callers:
    """The bearer tokens a served agent accepts, each naming its caller (None: the one caller).

    Empty, no token is required (and every request is the one caller)."""

    by_token: Mapping[str, str | None] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_token)

    @classmethod
    def one(cls, token: str | None) -> Callers:
        """The one caller of ``--token-env`` (or nobody's token, when ``token`` is None)."""
        return cls({token: None} if token else {})

    @property
    def named(self) -> bool:
        """Whether the callers are kept apart (each token names a caller)."""
        return any(name is not None for name in self.by_token.values())

    def caller(self, given: bytes) -> tuple[bool, str | None]:
        """``(known, caller)`` for the token a request gave. Every token is compared, each in
        constant time: how long it takes says nothing of which one nearly matched."""
        found: tuple[bool, str | None] = (False, None)
        for token, name in self.by_token.items():
            if hmac.compare_digest(given, token.encode()):
                found = (True, name)
        return found


NO_CALLERS = Callers()  # no token required: one caller


def caller_of(scope: Scope | None) -> str | None:
    """The caller of a request (None: the one caller; also over stdio, which has no request)."""
    if scope is None:
        return None
    name = scope.get(CALLER_KEY)
    return name if isinstance(name, str) else None


def thread_in_space(caller: str | None, thread: str) -> str:
    """The checkpointer's thread id of ``caller``'s thread ``thread``."""
    return thread if caller is None else f"{caller}{SPACE_SEPARATOR}{thread}"


def thread_seen_by(caller: str | None, stored: str) -> str | None:
    """The thread id ``caller`` knows the checkpointer's thread ``stored`` by, or None when it is
    not one of its threads."""
    if caller is None:
        return None if SPACE_SEPARATOR in stored else stored
    prefix = f"{caller}{SPACE_SEPARATOR}"
    return stored.removeprefix(prefix) if stored.startswith(prefix) else None


# --------------------------------------------------------------------------- reading the tokens


def read_callers(tokens_file: Path | None, environ: Mapping[str, str]) -> Callers:
    """The callers of a tokens file and of the ``MCP_RUN_TOKEN_<CALLER>`` variables (empty when
    there are neither). ServeError names the file and line, or the variable, of a problem."""
    found: dict[str, tuple[str, str]] = {}  # caller → (token, where it was given)
    if tokens_file is not None:
        for caller, token, where in _file_entries(tokens_file):
            _add(found, caller, token, where)
    for variable in sorted(environ):
        if variable.startswith(TOKEN_VARIABLE_PREFIX) and variable != TOKEN_DIR_VARIABLE:
            caller = variable.removeprefix(TOKEN_VARIABLE_PREFIX)
            _add(found, caller, environ[variable], f"the environment variable {variable}")
    by_token: dict[str, str | None] = {}
    places: dict[str, str] = {}
    for caller, (token, where) in found.items():
        if token in by_token:
            raise ServeError(f"{where}: the caller {caller} has the same token as the caller "
                             f"{by_token[token]} ({places[token]}): each caller needs its own")
        by_token[token], places[token] = caller, where
    return Callers(by_token)


def _add(found: dict[str, tuple[str, str]], caller: str, token: str, where: str) -> None:
    if not _CALLER.match(caller):
        raise ServeError(f"{where}: {caller[:80]!r} is no caller name: 1 to 64 letters, digits, '_' or '-'")
    if not token or token != token.strip() or any(ch.isspace() for ch in token):
        raise ServeError(f"{where}: the token of the caller {caller} is empty or holds spaces")
    if caller in found:
        raise ServeError(f"{where}: the caller {caller} is given twice (also in {found[caller][1]})")
    found[caller] = (token, where)


def _file_entries(path: Path) -> list[tuple[str, str, str]]:
    """``(caller, token, "FILE:LINE")`` of each entry of a tokens file, once its mode is checked."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise ServeError(f"cannot read the tokens file {path}: {why}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ServeError(f"{path}: the tokens file can be read or written by others (mode "
                         f"{stat.S_IMODE(mode):04o}): make it its owner's alone, chmod 600 {path}")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        # Where the part being read began (a line without its ':' is found wrong at the next one),
        # else where the problem was found.
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ServeError(f"{path}{line}: not a tokens file: each line is 'caller: token'") from None
    if root is None or (isinstance(root, yaml.MappingNode) and not root.value):
        raise ServeError(f"{path}: the tokens file names no caller: write one 'caller: token' "
                         "line for each caller")
    if not isinstance(root, yaml.MappingNode):
        raise ServeError(f"{path}:{root.start_mark.line + 1}: not a tokens file: each line is "
                         "'caller: token'")
    entries = []
    for key, value in root.value:
        where = f"{path}:{key.start_mark.line + 1}"
        if not isinstance(key, yaml.ScalarNode) or not isinstance(value, yaml.ScalarNode) or not value.value:
            raise ServeError(f"{where}: each line is 'caller: token'")
        entries.append((str(key.value), str(value.value), where))
    return entries

