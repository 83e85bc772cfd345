# Timed power actions (powerrig_fw.actions) on the emulated Cortex-M, whose clock is the instruction
# count (QEMU -icount shift=0: 1 us = 1000 instructions), here the sample clock: sample = ticks_us // 4.
# Each edge must be set during the sample it was asked for, and reported with that index; nothing runs
# before the host enabled it; a silent host gets the safe state back (the watchdog).
import array
import gc
import json
import time

import micropython

from board.rp2350 import Board
from fwtest.fake_dma import FakeAdc, HALFWORDS
from fwtest.fake_usb import Host
from fwtest.icount_clock import fire, sample_now
from powerrig_fw import wire
from powerrig_fw.device import Device

clock = sample_now
NAMES = ("12V", "3V3", "PERST", "PWRDIS")
regs = array.array("I", [7] * len(NAMES))      # one RAM word per output: the level last written


@micropython.viper
def _address(buf) -> int:
    return int(ptr8(buf))


def output(k):
    return lambda level: (_address(regs) + 4 * k, level)


class Console:
    def kbd_intr(self, c):
        pass


host = Host()
board = Board(adc=FakeAdc(array.array("h", bytes(2 * HALFWORDS))), usb_in=host.to_board,
              usb_out=host.from_board, console=Console(),
              outputs={n: output(k) for k, n in enumerate(NAMES)}, clock=clock, fire=fire)
board.sample_index = clock          # the device's own time stamps on the same clock


def clock_into(out, k):
    s = clock()
    out[k] = s >> 24
    out[k + 1] = s & 0xFFFFFF


board.sample_index_into = clock_into     # (the same, as the clock ping's (hi, lo))
dev = Device(board)
reader = wire.FrameReader()


def frames():
    return [(t, json.loads(p)) for t, _s, p in reader.feed(host.received()) if t in (wire.T_REPLY, wire.T_NOTICE)]


def command(doc):
    f = wire.encode_frame(wire.T_COMMAND, json.dumps(doc).encode())
    passes = 3 + len(f) // 256       # (a long command is read over several passes: READ_PER_PASS)
    for k in range(passes):
        host.send(f[512 * k:512 * (k + 1)])        # (the host's stand-in FIFO holds 1 kB)
        dev.poll()
        host.take()
    got = [d for t, d in frames() if t == wire.T_REPLY]
    assert len(got) == 1, (got, doc)
    return got[0]


def run_until(pred, ms):
    """Passes until pred(notice) for a notice, at most ms of emulated time; the notices seen."""
    seen = []
    end = time.ticks_add(time.ticks_ms(), ms)
    while time.ticks_diff(end, time.ticks_ms()) > 0:
        dev.poll()
        host.take()
        for t, d in frames():
            if t == wire.T_NOTICE:
                seen.append(d)
                if pred(d):
                    return seen
    raise AssertionError("no such notice within %d ms: %r" % (ms, seen))


r = command({"id": 1, "cmd": "power", "op": "sequence", "actions": [{"output": "12V", "level": 0}]})
assert not r["ok"] and "enable" in r["error"], r
assert list(regs) == [7] * 4
print("refused ok")

r = command({"id": 2, "cmd": "power", "op": "enable", "watchdog_ms": 40})
assert r["ok"], r
seq = [{"output": "12V", "level": 0, "after_us": 3000},     # cut 12 V 3 ms from now
       {"output": "PERST", "level": 1, "after_us": 100},    # PERST# for 1 ms, 100 us later
       {"output": "PERST", "level": 0, "after_us": 1000},
       {"output": "12V", "level": 1, "after_us": 4}]        # restore one sample after
gc.collect()        # (as below: an automatic collection in the pass that plans the first edges set them
                    # 43-56 samples late, and reported so, once the burst's upload frame moved the heap's fill)
r = command({"id": 3, "cmd": "power", "op": "sequence", "actions": seq})
assert r["ok"], r
want = [(a["output"], a["level"], a["index"]) for a in r["scheduled"]]
assert [w[2] - want[0][2] for w in want] == [0, 25, 275, 276], want
edges = []
end = time.ticks_add(time.ticks_ms(), 60)
while len(edges) < 4 and time.ticks_diff(end, time.ticks_ms()) > 0:
    dev.poll()
    host.take()
    for t, d in frames():
        if t == wire.T_NOTICE and d.get("event") == "power":
            edges += d["edges"]
assert [(e["output"], e["level"], e["requested"]) for e in edges] == want, (edges, want)
for e in edges:
    assert e["index"] == e["requested"], (e, edges)      # set in the sample asked for
assert regs[0] == 1 and regs[2] == 0, list(regs)
print("timed ok:", ", ".join("%s=%d at %d" % w for w in want))

# the watchdog: 12 V cut, then the host says nothing for longer than 40 ms
gc.collect()        # (an automatic collection, 2-3 ms here, between the command's arrival and its
                    # handling would move the cut that much after the stamp the watchdog counts from)
r = command({"id": 4, "cmd": "power", "op": "sequence", "actions": [{"output": "12V", "level": 0, "after_us": 400}]})
assert r["ok"], r
cut = r["scheduled"][0]["index"]
notes = run_until(lambda d: d.get("event") == "power_restored", 200)
restored = [d for d in notes if d.get("event") == "power_restored"][0]
assert "watchdog" in restored["why"] and restored["outputs"] == ["12V"] and regs[0] == 1, (restored, list(regs))
assert 40000 // 4 - 200 <= restored["index"] - cut <= 60000 // 4, (cut, restored)  # 40 ms after the command
print("watchdog ok: 12 V back after %d us of host silence" % ((restored["index"] - cut) * 4))

# a sequence of 32 edges 1.5 ms apart: each pass waits at most two horizons (4 ms), the rest are the next
# passes', every edge still in its sample; the report in NOTICEs that each fit a frame (issue 43: one pass
# of 36.6 ms, and its 2,269-byte report replaced by "reply exceeds 2048")
r = command({"id": 7, "cmd": "power", "op": "enable", "watchdog_ms": 5000})
assert r["ok"], r
seq = [{"output": "PERST", "level": 1 - k % 2, "after_us": 10000 if k == 0 else 1500} for k in range(32)]
gc.collect()            # the passes below allocate nothing on the host's side either (frames parsed after
r = command({"id": 8, "cmd": "power", "op": "sequence", "actions": seq})
assert r["ok"] and len(r["scheduled"]) == 32, r
want = [(a["output"], a["level"], a["index"]) for a in r["scheduled"]]
edges = []
notes = 0
worst = 0
waits = [0]                              # the longest a pass waited in fire() for its edges
_fire = dev.actions.fire


def timed_fire(plan, n):
    t0 = time.ticks_us()
    out = _fire(plan, n)
    waits[0] = max(waits[0], time.ticks_diff(time.ticks_us(), t0))
    return out


dev.actions.fire = timed_fire
last = want[-1][2]      # the last edge): a collection of 2-3 ms between two passes would set an edge late
while clock() < last + 200:
    t0 = time.ticks_us()
    dev.poll()
    d = time.ticks_diff(time.ticks_us(), t0)
    if d > worst:
        worst = d
    host.take()
for _ in range(8):      # the report: once no edge is due, a NOTICE of at most 12 edges a pass
    dev.poll()
    host.take()
for t, d in frames():
    assert t != wire.T_NOTICE or d.get("event") != "error", d
    if t == wire.T_NOTICE and d.get("event") == "power":
        edges += d["edges"]
        notes += 1
assert [(e["output"], e["level"], e["requested"]) for e in edges] == want, (len(edges), edges[:3], want[:3])
assert all(e["index"] == e["requested"] for e in edges), edges
assert waits[0] <= 4000 + 100, ("a pass waited longer than two horizons", waits[0])
dev.actions.fire = _fire
print("sequence ok: 32 edges in their samples, longest wait %d us, worst pass %d us, %d notices"
      % (waits[0], worst, notes))

r = command({"id": 5, "cmd": "power", "op": "disable"})
assert r["ok"] and r["state"]["12V"] == 1, r
r = command({"id": 6, "cmd": "power", "op": "sequence", "actions": [{"output": "PWRDIS", "level": 1}]})
assert not r["ok"], r
print("ok")
