"""What every drive-host transport shares (ssh in remote.py, a QEMU guest's agent in agent.py): the
error a transport failure is, and the files in and out and the clock on top of a transport's own
``run(argv, timeout, stdin) -> bytes``."""
from __future__ import annotations

import io
import logging
import shutil
import tarfile
from pathlib import Path, PurePosixPath

from powerrig.core import owned
from powerrig.core.errors import PowerrigError
from powerrig.dut import commands
from powerrig.dut.commands import helper_argv

logger = logging.getLogger(__name__)
SSH_FAILED = 255        # ssh's own exit code (and the agent's): the connection, not the remote command, failed


class RemoteError(PowerrigError):
    """The drive host cannot be reached or refused us (ssh itself failed)."""


def _unsafe(m: tarfile.TarInfo) -> str | None:
    """Why a member of fio's results may not be written into the run's folder (None: it may)."""
    if m.issym() or m.islnk():
        return f"a {'symbolic' if m.issym() else 'hard'} link to {m.linkname!r}"
    if not (m.isfile() or m.isdir()):
        return "not a regular file or folder"
    if m.name.startswith("/"):
        return "an absolute name"
    if ".." in PurePosixPath(m.name).parts:
        return "a name holding '..'"
    if not [p for p in PurePosixPath(m.name).parts if p != "."] and not m.isdir():
        return "no name"
    return None


class RemoteHost:
    """What every drive host transport offers on top of its ``run(argv, timeout, stdin) -> bytes`` and
    ``invoke(argv, timeout, env) -> subprocess.CompletedProcess`` (a tool's run, for dut/_run.py):
    files in and out (``cat`` and ``tar`` there) and its clock (``to_host``: a time stamped there,
    e.g. by fio, as this host's UTC; identity unless the transport measures the offset)."""

    def to_host(self, t: float) -> float:
        return t

    def sample_clock(self) -> None:
        """Measure the clock's offset now (around a fio run); nothing to do where none is measured."""

    def mkdtemp(self) -> str:
        d = self.run(helper_argv("mktemp", "-d", "/tmp/powerrig-fio.XXXXXX")).decode().strip()
        if not d.startswith("/tmp/powerrig-fio."):
            raise RemoteError(f"drive host {self.url}: mktemp answered {d[:80]!r}, not a /tmp/powerrig-fio.* folder")
        return commands.check_device("drive host folder", d)

    def put_text(self, text: str, path: str) -> None:
        self.put_bytes(text.encode(), path)

    def put_bytes(self, data: bytes, path: str) -> None:
        self.run(helper_argv("sh", "-c", 'cat > "$1"', "sh", path), stdin=data)

    def fetch_dir(self, remote_dir: str, local_dir: Path) -> list[str]:
        """Copy a directory's regular files back (tar through the connection); the names copied.

        Every member is judged before a byte is written: a link (symbolic or hard), a device or FIFO,
        an absolute name or one holding '..' is refused in one line naming it. Each folder and file is
        then made through core/owned, so a link someone left in the run's folder is never followed."""
        data = self.run(helper_argv("tar", "-C", remote_dir, "-cf", "-", "."), timeout=600)
        local = Path(local_dir)
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            members = tf.getmembers()
            for m in members:
                why = _unsafe(m)
                if why:
                    raise RemoteError(f"drive host {self.url}: refusing {m.name!r} in fio's results ({why}); "
                                      "nothing was fetched")
            owned.owned_dir(local, top=True)
            names = []
            for m in members:
                parts = [p for p in PurePosixPath(m.name).parts if p != "."]
                for k in range(1, len(parts) + (1 if m.isdir() else 0)):      # each folder on the way, owned
                    owned.owned_dir(local.joinpath(*parts[:k]))
                if m.isfile():
                    src = tf.extractfile(m)
                    with owned.open_owned(local.joinpath(*parts), "wb") as f:
                        shutil.copyfileobj(src, f)
                    names.append(m.name)
        return names

    def remove(self, remote_dir: str) -> None:
        try:
            self.run(helper_argv("rm", "-rf", "--", remote_dir))
        except RemoteError as e:
            logger.warning("could not remove %s on %s: %s", remote_dir, self.url, e)
