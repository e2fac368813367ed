"""Files and folders only their owner may read: the state folder and what a run keeps in it
(conversations, server logs, chat history, saved media), as the token store's files are.

New ones are created private (folders 0700, files 0600, whatever the umask); one that already
exists with wider modes is narrowed when it is next used, if the user running owns it (a folder or
file of someone else's is left as it is: changing it is not ours to do, and would fail).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def private_folder(folder: Path) -> Path:
    """``folder`` and its missing parents created private (``Path.mkdir(parents=True)`` would
    make the parents with the umask's modes: ``$XDG_STATE_HOME/mcp-run`` readable by all), and
    ``folder`` itself narrowed if it existed."""
    missing = [folder, *folder.parents]
    missing = missing[:next((n for n, path in enumerate(missing) if path.exists()), len(missing))]
    for path in reversed(missing):
        path.mkdir(mode=FOLDER_MODE, exist_ok=True)
    _narrow(folder, FOLDER_MODE)
    return folder


def private_file(path: Path) -> Path:
    """``path`` created empty if missing, private either way: for files another library opens
    (SQLite, the chat's history), which would create them with the umask's modes."""
    os.close(private_opener(str(path), os.O_WRONLY | os.O_CREAT))
    return path


def narrow_if_present(path: Path) -> None:
    """Make ``path`` private if it exists (a SQLite database's ``-wal`` and ``-shm`` files)."""
    try:
        _narrow(path, FILE_MODE)
    except FileNotFoundError:
        return


def private_opener(path: str, flags: int) -> int:
    """An ``opener`` for :func:`open`: the file is created 0600, and an existing one narrowed."""
    descriptor = os.open(path, flags, FILE_MODE)
    try:
        info = os.fstat(descriptor)
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & ~FILE_MODE:
            os.fchmod(descriptor, stat.S_IMODE(info.st_mode) & FILE_MODE)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _narrow(path: Path, allowed: int) -> None:
    info = path.stat()
    if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & ~allowed:
        path.chmod(stat.S_IMODE(info.st_mode) & allowed)
