"""Names the model sees: ``{server}{separator}{tool}``, valid for every provider, and their origins.

Every generated name matches :data:`NAME_PATTERN`, the intersection of what the providers accept:

    OpenAI     ^[a-zA-Z0-9_-]{1,64}$
    Anthropic  ^[a-zA-Z0-9_-]{1,128}$  (no '.')
    Gemini     starts with a letter or '_', at most 64 characters
    MCP        [A-Za-z0-9_.-]{1,128}   (what servers may send us)

Characters outside it are folded to ASCII where possible and replaced by ``_`` otherwise; names
longer than 64 characters are truncated and end in a short hash of the full original
``server/tool``, so two long names that share a prefix stay apart and the same input always gives
the same name. Two origins that still end up with one name are a
:class:`NameCollisionError` naming both; nothing is silently overwritten.

The same table serves MCP tools, MCP prompts and local tools (``server=None``: no prefix).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple

from runner.errors import NameCollisionError

NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
MAX_NAME_LENGTH = 64
HASH_LENGTH = 8
DEFAULT_SEPARATOR = "__"

_OUTSIDE_ALPHABET = re.compile(r"[^A-Za-z0-9_-]")


class Origin(NamedTuple):
    """Where a generated name comes from: the server key (None for local tools) and the original
    name on that server."""

    server: str | None
    name: str

    def __str__(self) -> str:
        return f"'{self.name}'" if self.server is None else f"'{self.name}' of server '{self.server}'"


def sanitise(text: str) -> str:
    """Fold ``text`` into ``[A-Za-z0-9_-]``: accents are dropped (``café`` -> ``cafe``), every
    other character outside the alphabet becomes ``_``."""
    if text.isascii():  # no accents to fold (most names): NFKD leaves ASCII as it is
        return _OUTSIDE_ALPHABET.sub("_", text)
    decomposed = unicodedata.normalize("NFKD", text)
    without_marks = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _OUTSIDE_ALPHABET.sub("_", without_marks)


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_LENGTH]


def generate_name(
    server: str | None, name: str, *, separator: str = DEFAULT_SEPARATOR, shown_as: str | None = None
) -> str:
    """The name the model sees for ``name`` of ``server``; always matches :data:`NAME_PATTERN`.

    ``shown_as`` replaces the tool part (a rename); the hash of a shortened name is still taken
    from the original ``server/name`` so renames cannot make two long names meet.
    """
    part = name if shown_as is None else shown_as
    raw = part if server is None else f"{server}{separator}{part}"
    candidate = sanitise(raw) or "_"
    if not re.match(r"[A-Za-z_]", candidate):
        candidate = "_" + candidate
    if len(candidate) > MAX_NAME_LENGTH:
        original = name if server is None else f"{server}/{name}"
        head = candidate[: MAX_NAME_LENGTH - HASH_LENGTH - 1]
        candidate = f"{head}_{short_hash(original)}"
    return candidate


class NameTable:
    """Generated names for a set of origins, and the way back.

    ``renames`` maps a server key (None for local tools) to ``{original name: new tool part}``,
    as ``tools.rename`` in the manifest. ``kind`` ("tool", "prompt") only words the errors.
    Raises :class:`NameCollisionError` listing every collision at once.
    """

    def __init__(
        self,
        origins: Iterable[tuple[str | None, str]],
        *,
        separator: str = DEFAULT_SEPARATOR,
        renames: Mapping[str | None, Mapping[str, str]] | None = None,
        kind: str = "tool",
    ) -> None:
        self.separator = separator
        self.kind = kind
        renames = renames or {}
        self._by_origin: dict[Origin, str] = {}
        self._by_name: dict[str, Origin] = {}
        contested: dict[str, list[Origin]] = {}
        for server, name in origins:
            origin = Origin(server, name)
            if origin in self._by_origin:
                continue  # the same tool listed twice is one tool
            shown_as = renames.get(server, {}).get(name)
            generated = generate_name(server, name, separator=separator, shown_as=shown_as)
            self._by_origin[origin] = generated
            if generated in self._by_name:
                contested.setdefault(generated, [self._by_name[generated]]).append(origin)
            else:
                self._by_name[generated] = origin
        if contested:
            raise NameCollisionError(kind, contested)
        self._renames = {server: dict(mapping) for server, mapping in renames.items()}

    def name_for(self, server: str | None, name: str) -> str:
        """The generated name of ``name`` on ``server``; KeyError if it was not in the table."""
        try:
            return self._by_origin[Origin(server, name)]
        except KeyError:
            raise KeyError(f"no {self.kind} {Origin(server, name)} in this name table") from None

    def origin(self, generated: str) -> Origin:
        """The server and original name behind a generated name; KeyError if unknown."""
        try:
            return self._by_name[generated]
        except KeyError:
            raise KeyError(f"no {self.kind} is called '{generated}'") from None

    def unused_renames(self) -> list[Origin]:
        """Renames whose original name is not in the table (typos, tools that went away)."""
        return [
            Origin(server, name)
            for server, mapping in self._renames.items()
            for name in mapping
            if Origin(server, name) not in self._by_origin
        ]

    def __contains__(self, generated: object) -> bool:
        return generated in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def items(self) -> Iterator[tuple[str, Origin]]:
        """(generated name, origin) pairs in the order the origins were given."""
        return iter(self._by_name.items())
