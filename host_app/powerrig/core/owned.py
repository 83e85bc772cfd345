"""Files and folders a run makes in its output folder: its own, never a link someone left there.

A symbolic link named like a run's file (``OUT/.powerrig-run.lock -> ~/thesis.tex``) would make the
run truncate or append to the link's target. Every file a run writes is opened here without following
a link (O_NOFOLLOW) and is then checked to be a regular file of this user with no second name (a hard
link shares its inode with the victim); a folder the run makes is checked the same way. Anything
else is refused in one line before a byte is written (NotOwned). One helper, so every writer
(the lock, the step log, the captures, fio's job files, the records) has the same rule.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from powerrig.core.errors import PowerrigError

# O_NONBLOCK: a FIFO in a file's place must not hang the open (it is refused after, as not regular)
_FLAGS = {"r": os.O_RDONLY, "w": os.O_WRONLY | os.O_CREAT, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
          "r+": os.O_RDWR | os.O_CREAT}
_FIX = "remove it or choose another output folder (--out)"


class NotOwned(PowerrigError):
    """A name in a run's output folder is a link, not a regular file, or someone else's; nothing was written."""


def _refuse(path, what: str) -> NotOwned:
    return NotOwned(f"{path} {what}: a run writes only its own files there, so nothing was written; {_FIX}")


def _check(path, st: os.stat_result, want_dir: bool = False) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, "is a symbolic link")
    if want_dir and not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, "is not a folder")
    if not want_dir and not stat.S_ISREG(st.st_mode):
        raise _refuse(path, "is not a regular file")
    if st.st_uid != os.geteuid():
        raise _refuse(path, f"belongs to user id {st.st_uid}, not to this user ({os.geteuid()})")
    if not want_dir and st.st_nlink > 1:
        raise _refuse(path, f"has {st.st_nlink - 1} other name(s) (a hard link)")


def open_fd(path: str | Path, mode: str = "a", perm: int = 0o644) -> int:
    """A file descriptor on ``path`` (mode r, w, a or r+; w empties the file only after the checks).
    NotOwned for a link, a non-regular file or another user's file; other OSErrors as they come."""
    try:
        fd = os.open(path, _FLAGS[mode] | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, perm)
    except OSError as e:
        if os.path.islink(path):                       # ELOOP, the O_NOFOLLOW refusal
            raise _refuse(path, "is a symbolic link") from None
        if e.errno == errno.ENXIO:                     # ENXIO: a FIFO or socket with no reader
            raise _refuse(path, "is not a regular file") from None
        raise
    try:
        _check(path, os.fstat(fd))
        os.set_blocking(fd, True)
        if mode == "w":
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_owned(path: str | Path, mode: str = "a", encoding: str = "utf-8", newline: str | None = None):
    """``open(path, mode)`` for a run's own file (see open_fd); a mode ending in "b" is binary."""
    fd = open_fd(path, mode.rstrip("b"))
    if mode.endswith("b"):
        return os.fdopen(fd, mode)
    return os.fdopen(fd, mode, encoding=encoding, newline=newline)


def check_file(path: str | Path) -> None:
    """Refuse ``path`` if something other than this user's regular file is there (absent is fine)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    _check(path, st)


def write_owned(path: str | Path, text: str, atomic: bool = False) -> Path:
    """Write ``text`` to ``path`` (``atomic``: through PATH.tmp and a rename, so a reader never sees half)."""
    path = Path(path)
    if not atomic:
        with open_owned(path, "w") as f:
            f.write(text)
        return path
    check_file(path)
    tmp = path.with_name(path.name + ".tmp")
    with open_owned(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def owned_dir(path: str | Path, top: bool = False) -> Path:
    """Make the folder ``path`` (and its parents) and check it is a folder of this user, not a link.
    ``top``: the output folder the user named, which may itself be reached through a link of theirs."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:                  # a file or a link to one: refused below, by what it is
        pass
    st = os.stat(path) if top else os.lstat(path)
    if top:
        if not stat.S_ISDIR(st.st_mode):
            raise _refuse(path, "is not a folder")
        return path
    _check(path, st, want_dir=True)
    return path


def check_tree(path: str | Path) -> None:
    """Refuse an output folder holding anything that is not this user's own file or folder (a link,
    a hard link, a FIFO, another user's file), before a run writes a byte into it. Links are not
    followed, so a folder reached through one is never looked into."""
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            p = os.path.join(top, name)
            try:
                st = os.lstat(p)
            except FileNotFoundError:       # renamed meanwhile by the run that held the folder just before
                continue
            _check(p, st, want_dir=stat.S_ISDIR(st.st_mode))
