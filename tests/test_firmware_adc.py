"""board/adc.py against MicroPython's rp2 API, recorded at that boundary (CPython, stub rp2/machine).

What no emulator here shows without the rp2 port: how the capture chain configures the DMA. Every
channel must have its end-of-block interrupt armed (rp2's pack_ctrl defaults to IRQ_QUIET, and then the
handler never runs), each stream's two channels chained to each other and pointed at the ring's first
two slots, the handler hard and on the digital stream, and the AD7380s set up over SDI (GPIO 7) before
the state machines start. The rp2040js tier runs the same code on the real rp2 port.
"""
from __future__ import annotations

import builtins
import importlib
import sys
import types

import pytest

from conftest import REPO


@pytest.fixture
def rp2_api(monkeypatch):
    log = {"ctrl": {}, "config": {}, "irq": {}, "pins": {}, "order": []}

    class Pin:
        OUT, IN = 1, 0

        def __init__(self, n, mode=None, value=None):
            self.n = n
            self.v = value
            log["pins"][n] = mode

        def value(self, v=None):
            if v is None:
                return self.v
            if self.n == 7:
                log["order"].append("sdi")
            self.v = v

    class StateMachine:
        def __init__(self, n, prog, **kw):
            self.n = n

        def active(self, v):
            if v:
                log["order"].append("sm%d" % self.n)

    class DMA:
        next_channel = 0

        def __init__(self):
            self.channel = DMA.next_channel
            DMA.next_channel += 1

        def pack_ctrl(self, **kw):
            log["ctrl"][self.channel] = kw
            return kw

        def config(self, **kw):
            log["config"][self.channel] = kw

        def irq(self, handler=None, hard=False):
            log["irq"][self.channel] = (handler, hard)

        def active(self, v=None):
            pass

    rp2 = types.ModuleType("rp2")
    rp2.PIO = types.SimpleNamespace(OUT_HIGH=3, OUT_LOW=2, SHIFT_LEFT=0, SHIFT_RIGHT=1)
    rp2.asm_pio = lambda **kw: (lambda f: f)
    rp2.StateMachine = StateMachine
    rp2.DMA = DMA
    machine = types.ModuleType("machine")
    machine.Pin = Pin
    mp = types.ModuleType("micropython")
    mp.const = lambda x: x
    mp.viper = mp.native = mp.asm_thumb = lambda f: f
    for name in ("rp2", "machine", "micropython"):
        monkeypatch.setitem(sys.modules, name, {"rp2": rp2, "machine": machine, "micropython": mp}[name])
    for name in ("ptr8", "ptr16", "ptr32"):           # viper's annotations, and _address(buf) -> an address
        monkeypatch.setattr(builtins, name, lambda b=None: 0x20010000, raising=False)
    monkeypatch.setattr(sys.implementation, "_machine", "Raspberry Pi Pico2 with RP2350", raising=False)
    monkeypatch.syspath_prepend(str(REPO / "firmware"))
    for name in [m for m in sys.modules if m == "board" or m.startswith("board.")]:
        monkeypatch.delitem(sys.modules, name)
    adc_mod = importlib.import_module("board.adc")
    yield adc_mod, log
    for name in [m for m in sys.modules if m == "board" or m.startswith("board.")]:
        del sys.modules[name]


def test_capture_chain_arms_irqs_and_chains_into_the_ring(rp2_api):
    adc_mod, log = rp2_api
    adc = adc_mod.Adc()
    adc.start()
    ring = adc.ring
    assert len(log["ctrl"]) == 8
    for ch, kw in log["ctrl"].items():
        assert kw.get("irq_quiet") == 0, (ch, kw)        # the end-of-block interrupt is not silenced
    for stream, (a, b) in enumerate(adc.dmas):
        assert log["ctrl"][a.channel]["chain_to"] == b.channel and log["ctrl"][b.channel]["chain_to"] == a.channel
        assert log["config"][a.channel]["write"] == ring.address(0, stream)
        assert log["config"][b.channel]["write"] == ring.address(1, stream)
        assert log["config"][a.channel]["count"] == adc_mod.BLOCK
        assert log["ctrl"][a.channel]["treq_sel"] == 4 + stream
    digital = adc.dmas[-1]
    for ch in digital:
        handler, hard = log["irq"][ch.channel]
        assert hard and handler == ring.on_block
    assert log["pins"][7] == 1                         # SDI is an output
    assert log["order"].index("sdi") < log["order"].index("sm0")     # set up before capture starts
    assert adc.layout()[4] == 13                       # the digital inputs are read where the PIO puts them
