"""What every drive-host transport shares (ssh in remote.py, a QEMU guest's agent in agent.py): the
error a transport failure is, and the files in and out and the clock on top of a transport's own
``run(argv, timeout, stdin) -> bytes``."""
from __future__ import annotations

import io
import logging
import tarfile
from pathlib import Path

from powerrig.core.errors import PowerrigError
from powerrig.dut import commands
from powerrig.dut.commands import helper_argv

logger = logging.getLogger(__name__)
SSH_FAILED = 255        # ssh's own exit code (and the agent's): the connection, not the remote command, failed


class RemoteError(PowerrigError):
    """The drive host cannot be reached or refused us (ssh itself failed)."""


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
        """Copy a directory's regular files back (tar through the connection); the names copied."""
        data = self.run(helper_argv("tar", "-C", remote_dir, "-cf", "-", "."), timeout=600)
        names = []
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            members = [m for m in tf.getmembers() if m.isfile() or m.isdir()]
            for m in members:
                if m.name.startswith("/") or ".." in Path(m.name).parts:
                    raise RemoteError(f"drive host {self.url}: refusing a path outside the results: {m.name!r}")
            tf.extractall(local_dir, members=members, filter="data")
            names = [m.name for m in members if m.isfile()]
        return names

    def remove(self, remote_dir: str) -> None:
        try:
            self.run(helper_argv("rm", "-rf", "--", remote_dir))
        except RemoteError as e:
            logger.warning("could not remove %s on %s: %s", remote_dir, self.url, e)
