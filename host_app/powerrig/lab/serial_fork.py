"""Is the ``serial`` package labgrid's fork? labgrid depends on ``pyserial-labgrid``, which installs
itself as ``serial``; powerrig depends on ``pyserial``, which installs the same files. pip installs
both without a word, and whichever came last owns ``serial/``: with plain pyserial's files labgrid's
RFC 2217 and console fixes are silently gone. This compares the files on disk with the fork's own
record (RECORD hashes) and says how to repair it."""
from __future__ import annotations

import base64
import hashlib
from importlib.metadata import PackageNotFoundError, distribution

REPAIR = ("pip uninstall -y pyserial && pip install --force-reinstall --no-deps pyserial-labgrid "
          "(scripts/setup.sh builds .venv-lab this way)")


def overwritten_files() -> list[str]:
    """The fork's ``serial/*.py`` files whose content is not the fork's (empty when all are its own)."""
    dist = distribution("pyserial-labgrid")
    bad = []
    for f in dist.files or []:
        if not (str(f).startswith("serial/") and str(f).endswith(".py") and f.hash):
            continue
        path = f.locate()
        try:
            digest = hashlib.new(f.hash.mode, path.read_bytes()).digest()
        except OSError:
            bad.append(str(f))
            continue
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != f.hash.value:
            bad.append(str(f))
    return bad


def check() -> None:
    """ImportError (one line, with the repair) unless ``serial`` is labgrid's fork, whole."""
    try:
        bad = overwritten_files()
    except PackageNotFoundError:
        raise ImportError("powerrig.lab needs labgrid's pyserial fork (pyserial-labgrid), which is not "
                          "installed: install powerrig's 'lab' extra in its own virtualenv") from None
    if bad:
        raise ImportError(f"labgrid's pyserial fork was overwritten by plain pyserial ({len(bad)} files of "
                          f"serial/ differ, e.g. {bad[0]}): repair with: {REPAIR}")
