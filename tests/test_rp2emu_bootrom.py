"""The emulator tier's boot ROM copy (tools/rp2emu/emulated_board.bootrom) under callers at once: the tier's
test files start their boards together on a fresh clone, and a shared temporary name made all but the
first fail at setup (CI, 1 Dec 2026: nine tests in error)."""
from __future__ import annotations

import sys
import threading

from conftest import REPO

sys.path.insert(0, str(REPO / "tools" / "rp2emu"))
import emulated_board as eb  # noqa: E402


def test_callers_at_once_each_get_the_whole_boot_rom(tmp_path, monkeypatch):
    vendor, here = tmp_path / "vendor", tmp_path / "rp2emu"
    vendor.mkdir()
    here.mkdir()
    rom = bytes(range(256)) * (8 << 10)                # 2 MB: long enough a copy for the callers to overlap
    (vendor / eb.BOOTROM).write_bytes(rom)
    monkeypatch.setattr(eb, "HERE", here)
    monkeypatch.setattr(eb.build_qemu_mp, "_vendor_dirs", lambda: [vendor])
    start, got, errors = threading.Barrier(8), [], []

    def call():
        start.wait()
        try:
            got.append(eb.bootrom())
        except Exception as e:                          # (what the shared name raised: FileNotFoundError)
            errors.append(e)
    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and got == [here / "bootrom-b1.mjs"] * 8
    assert (here / "bootrom-b1.mjs").read_bytes() == rom
    assert sorted(p.name for p in here.iterdir()) == ["bootrom-b1.mjs"]     # no copy left behind
