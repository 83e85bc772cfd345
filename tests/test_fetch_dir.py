"""fio's results fetched back from a drive host (RemoteHost.fetch_dir): every file written through
core/owned (no link followed in the run's folder), and a tar member that is a link, absolute or holds
'..' refused in one line naming it, before anything is written."""
from __future__ import annotations

import io
import os
import tarfile

import pytest

from powerrig.core.errors import PowerrigError
from powerrig.dut.transport import RemoteError, RemoteHost


def _tar(members) -> bytes:
    """A tar as ``tar -C DIR -cf - .`` sends it; members: (name, kind, data or link target)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, kind, what in members:
            ti = tarfile.TarInfo(name)
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
                tf.addfile(ti)
            elif kind == "file":
                ti.size = len(what)
                tf.addfile(ti, io.BytesIO(what))
            else:
                ti.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                ti.linkname = what
                tf.addfile(ti)
    return buf.getvalue()


class _Host(RemoteHost):
    url = "ssh://drive"

    def __init__(self, data: bytes):
        self.data = data

    def run(self, argv, timeout=None, stdin=None):
        return self.data


GOOD = [("./", "dir", None), ("./fio.json", "file", b'{"jobs": []}'), ("./logs/", "dir", None),
        ("./logs/fio_bw.1.log", "file", b"0, 1, 0, 0\n")]


def test_the_results_come_back(tmp_path):
    names = _Host(_tar(GOOD)).fetch_dir("/tmp/powerrig-fio.x", tmp_path)
    assert sorted(names) == ["./fio.json", "./logs/fio_bw.1.log"]
    assert (tmp_path / "fio.json").read_bytes() == b'{"jobs": []}'
    assert (tmp_path / "logs" / "fio_bw.1.log").read_bytes() == b"0, 1, 0, 0\n"


def test_an_existing_own_file_is_replaced(tmp_path):
    (tmp_path / "fio.json").write_text("a much longer old content than the new one " * 10)
    _Host(_tar(GOOD)).fetch_dir("/tmp/powerrig-fio.x", tmp_path)
    assert (tmp_path / "fio.json").read_bytes() == b'{"jobs": []}'


@pytest.mark.parametrize("inside", [True, False])
def test_a_link_left_in_the_output_folder_is_not_followed(tmp_path, inside):
    out = tmp_path / "out"
    out.mkdir()
    victim = (out if inside else tmp_path) / "thesis.tex"
    victim.write_text("precious")
    os.symlink(victim, out / "fio.json")
    with pytest.raises(PowerrigError) as e:
        _Host(_tar(GOOD)).fetch_dir("/tmp/powerrig-fio.x", out)
    assert "fio.json" in str(e.value) and "link" in str(e.value) and "\n" not in str(e.value)
    assert victim.read_text() == "precious"


def test_a_linked_folder_left_in_the_output_folder_is_not_followed(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    os.symlink(elsewhere, out / "logs")
    with pytest.raises(PowerrigError) as e:
        _Host(_tar(GOOD)).fetch_dir("/tmp/powerrig-fio.x", out)
    assert "logs" in str(e.value) and "\n" not in str(e.value)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("member", [
    ("./fio.json", "sym", "/home/user/thesis.tex"),
    ("./fio.json", "sym", "fio.fio"),
    ("./logs/x.log", "hard", "./fio.fio"),
    ("/etc/powerrig-test", "file", b"x"),
    ("./logs/../../escape", "file", b"x"),
    ("../escape", "file", b"x"),
])
def test_a_member_that_is_a_link_absolute_or_climbs_is_refused_naming_it(tmp_path, member):
    data = _tar([("./", "dir", None), ("./fio.fio", "file", b"[job]\n"), member])
    with pytest.raises(RemoteError) as e:
        _Host(data).fetch_dir("/tmp/powerrig-fio.x", tmp_path / "out")
    msg = str(e.value)
    assert repr(member[0]) in msg and "\n" not in msg
    assert not (tmp_path / "out" / "fio.fio").exists()      # refused before anything was written
    assert not (tmp_path / "escape").exists()
