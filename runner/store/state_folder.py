"""The state folder: where a run keeps its server logs and (by default) its conversations.

It is ``.mcp-run`` beside the manifest. When that cannot be created or written (a file of that
name is in the way, the manifest's folder is read-only), the run uses a per-user folder instead,
``$XDG_STATE_HOME/mcp-run/<folder>-<hash of the manifest path>`` (``~/.local/state`` without
``XDG_STATE_HOME``), and says so once. When neither works, :class:`StateError` says what, where
and what to do.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from runner.errors import StateError
from runner.manifest.loading import LoadedManifest
from runner.store.private import private_folder

logger = logging.getLogger(__name__)

SUBFOLDERS = ("logs",)


def state_folder(loaded: LoadedManifest, *, environ: Mapping[str, str] | None = None) -> Path:
    """A writable state folder for the agent of ``loaded`` (created, with its ``logs`` folder),
    private to its owner (:mod:`runner.store.private`)."""
    preferred = loaded.state_dir
    try:
        return _ready(preferred)
    except OSError as exc:
        problem = _reason(exc)
    fallback = user_state_folder(loaded.path, environ=os.environ if environ is None else environ)
    try:
        private_folder(fallback.parent)  # the folder of every manifest's: narrowed if older runs left it open
        _ready(fallback)
    except OSError as exc:
        raise StateError(
            f"cannot create the state folder {preferred} ({problem}) nor {fallback} ({_reason(exc)}): "
            f"remove what is in the way or make one of them writable"
        ) from exc
    logger.warning("cannot use the state folder %s (%s); using %s instead", preferred, problem, fallback)
    return fallback


def unusable_state_folder(loaded: LoadedManifest) -> str | None:
    """Why the state folder beside the manifest could not be used, judged without creating
    anything (``validate`` warns ahead of a run); None when it looks usable."""
    folder = loaded.state_dir
    existing = next((path for path in (folder, *folder.parents) if path.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None


def user_state_root(environ: Mapping[str, str]) -> Path:
    """The per-user folder of every manifest's fallback state folder (and, by default, the tokens)."""
    configured = environ.get("XDG_STATE_HOME")
    return (Path(configured) if configured else Path.home() / ".local" / "state") / "mcp-run"


def user_state_folder(manifest: Path, *, environ: Mapping[str, str]) -> Path:
    """The per-user state folder of the manifest at ``manifest``: one per manifest path."""
    resolved = manifest.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    return user_state_root(environ) / f"{resolved.parent.name or 'root'}-{digest}"


def _ready(folder: Path) -> Path:
    for path in (folder, *(folder / name for name in SUBFOLDERS)):
        private_folder(path)
    probe = folder / f".probe-{os.getpid()}"
    probe.touch()  # mkdir succeeds on an existing folder: only a write proves it is writable
    probe.unlink()
    return folder


def _reason(exc: OSError) -> str:
    if isinstance(exc, FileExistsError | NotADirectoryError):
        return f"{exc.filename} is a file, not a folder" if exc.filename else "a file is in the way"
    return exc.strerror or str(exc)
