# The Device's command handling and stream state machine with a scripted board.
import array
import json

from fwtest.host_bytes import HostBytes
from powerrig_fw import wire
from powerrig_fw.device import Device, plan_stream

CAL = "powerrig-cal.json"      # in the working directory: parallel runs do not share it
try:
    import os
    os.remove(CAL)
except OSError:
    pass


class FakeBoard(HostBytes):
    name = "fake"
    serial = "F1"
    cal_path = CAL
    burst_capacity = 8192      # fits the emulated MCU's heap; still far below the 20001 refused below

    def __init__(self):
        HostBytes.__init__(self)
        self.index = 1000
        self.block = array.array("h", bytes(2 * 7 * 250))
        for s in range(250):
            self.block[s * 7] = 26000
            self.block[s * 7 + 1] = 4000
            self.block[s * 7 + 2] = 21600
            self.block[s * 7 + 3] = 3900
            self.block[s * 7 + 6] = 2
        self.pending = 0
        self.dropped = 0
        self.last = 0

    def adc_read(self):
        if not self.pending:
            return None
        self.pending -= 1
        d = self.dropped
        self.dropped = 0
        self.index += d
        self.last = self.index
        self.index += 250
        self.adc_n = 250
        self.adc_dropped = d
        return self.block

    def adc_restart(self):
        return self.index

    def block_index(self):
        return self.last

    def sample_index(self):
        return self.index


board = FakeBoard()
dev = Device(board)
reader = wire.FrameReader()


def command(doc, raw=None):
    board.inbox.append(raw if raw is not None else bytes(wire.encode_frame(wire.T_COMMAND, json.dumps(doc).encode())))
    dev.poll()
    while board.inbox:          # more than the reader takes at once: the next passes read the rest
        dev.poll()
    replies = []
    for b in board.sent:
        for t, seq, payload in reader.feed(b):
            if t == wire.T_REPLY:
                replies.append(json.loads(payload))
    board.sent = []
    return replies


d = command({"id": 1, "cmd": "describe"})[0]
assert d["ok"] and d["id"] == 1 and d["device"] == "powerrig-interposer", d
assert [r["name"] for r in d["rails"]] == ["12V", "3V3", "5V"], d["rails"]
assert d["interval_us"]["min"] == 100 and d["link_budget_bps"] == 500000

# malformed and unknown commands: an error reply, never a crash
r = command(None, raw=bytes(wire.encode_frame(wire.T_COMMAND, b"{not json")))[0]
assert not r["ok"] and r["id"] is None, r
r = command({"id": 2, "cmd": "launch"})[0]
assert not r["ok"] and "unknown command" in r["error"] and r["id"] == 2, r
r = command({"id": 3, "cmd": "start", "interval_us": 102})[0]
assert not r["ok"] and "multiple of 4" in r["error"], r
r = command({"id": 4, "cmd": "start", "interval_us": 100, "rails": ["12V", "3V3", "5V"]})[0]
assert not r["ok"] and "link budget" in r["error"] and "interval_us >= " in r["error"], r
r = command({"id": 5, "cmd": "start", "rails": ["48V"]})[0]
assert not r["ok"] and "unknown rail" in r["error"], r
assert dev.state == "idle"

# a stream: 3 blocks of 1 ms -> 3 intervals; per_frame 2 -> one full frame, then one on stop
r = command({"id": 6, "cmd": "start", "interval_us": 1000, "per_frame": 2})[0]
assert r["ok"] and r["rails"] == ["12V", "3V3"] and r["first_index"] == 1000, r
board.pending = 3
dev.poll(); dev.poll(); dev.poll()
frames = []
for b in board.sent:
    frames += [f for f in reader.feed(b) if f[0] == wire.T_DATA]
board.sent = []
assert len(frames) == 1 and len(frames[0][2]) == 2 * wire.record_size(2), frames
# garbage in the middle of a stream costs nothing
r = command(None, raw=b"\x00\x01\xa5\x5a\xff\xff")
assert r == [] and dev.state == "streaming"
r = command({"id": 7, "cmd": "ping"})[0]
assert r["ok"] and r["index"] == board.index, r
# the host's ping byte for byte (powerrig.interposer.frames.encode_command) takes the fast path, which
# answers as the JSON path does: the same fields, the same values (but the clock's microseconds)
fast_in = dev.reader.bad
r_fast = command(None, raw=bytes(wire.encode_frame(wire.T_COMMAND, b'{"id":4711,"cmd":"ping"}')))[0]
r_json = command(None, raw=bytes(wire.encode_frame(wire.T_COMMAND, b'{"cmd":"ping","id":4712}')))[0]
assert sorted(r_fast) == sorted(r_json), (r_fast, r_json)
assert r_fast["id"] == 4711 and r_json["id"] == 4712 and r_fast["ok"] is True and r_fast["echo"] is None, r_fast
assert (r_fast["index"], r_fast["rx_index"]) == (r_json["index"], r_json["rx_index"]) == (board.index, board.index), (r_fast, r_json)
assert 0 <= r_json["us"] - r_fast["us"] < 10000000, (r_fast, r_json)
# a ping that only looks like one (not a number for its id) gets the JSON path's answer
r = command(None, raw=bytes(wire.encode_frame(wire.T_COMMAND, b'{"id":"x1","cmd":"ping"}')))[0]
assert r["ok"] and r["id"] == "x1", r
r = command(None, raw=bytes(wire.encode_frame(wire.T_COMMAND, b'{"id":12a,"cmd":"ping"}')))[0]
assert r["id"] != "12a" and "us" not in r, r
assert dev.reader.bad == fast_in
r = command({"id": 8, "cmd": "cal_set", "calibration": {"rails": {"12V": {"v_gain": 1.01}}}})[0]
assert not r["ok"] and "stop the stream" in r["error"], r

# an overrun: the next frame carries F_OVERRUN and the index jumps by the lost samples
board.dropped = 500
board.pending = 2
dev.poll(); dev.poll()
r = command({"id": 9, "cmd": "stop"})[0]
assert r["ok"], r
data = [f for b in board.sent for f in reader.feed(b)]
board.sent = []
assert dev.overruns == 1 and dev.lost_samples == 500
# idle (no stream, burst or self-test): blocks lost during a long command pass are nobody's, not an
# overrun (the RP2040's describe pass takes 150 ms: status said "overruns" before any stream)
board.dropped = 750
board.pending = 1
dev.poll()
assert dev.overruns == 1 and dev.lost_samples == 500, (dev.overruns, dev.lost_samples)

# calibration: validated, merged, persisted
r = command({"id": 10, "cmd": "cal_set", "calibration": {"rails": {"12V": {"v_gain": 3.0}}}})[0]
assert not r["ok"] and "0.8..1.2" in r["error"], r
r = command({"id": 11, "cmd": "cal_set", "calibration": {"rails": {"12V": {"v_gain": 1.01, "i_offset": 3}}}})[0]
assert r["ok"] and r["calibration"]["rails"]["12V"]["v_gain"] == 1.01 and r["calibration"]["rails"]["3V3"]["v_gain"] == 1.0
dev2 = Device(board)
assert dev2.cal["rails"]["12V"]["i_offset"] == 3, dev2.cal

# burst "now": pre 0, post 300 samples -> uploaded in BURST frames, the last flagged
r = command({"id": 12, "cmd": "burst", "pre": 0, "post": 300})[0]
assert r["ok"], r
board.pending = 2
for _ in range(10):
    dev.poll()
bursts = [f for b in board.sent for f in reader.feed(b) if f[0] == wire.T_BURST]
assert len(bursts) == 1, bursts          # the first chunk at once; the rest waits for link time
board.sent = []
board.pending = 30                       # 30 ms of samples: 15 kB of link budget
for _ in range(40):
    dev.poll()
bursts += [f for b in board.sent for f in reader.feed(b) if f[0] == wire.T_BURST]
total = sum(len(f[2]) for f in bursts) // 14
assert total == 300, total

# a long burst is paced: after its first chunk, never more bytes than the link budget allows
board.sent = []
r = command({"id": 14, "cmd": "burst", "pre": 0, "post": 2000})[0]
assert r["ok"], r
board.pending = 400
t_first = None
sent = 0
first_frame = 0
got = 0
for _ in range(400):
    dev.poll()
    for b in board.sent:
        for f in reader.feed(b):
            if f[0] == wire.T_BURST:
                if t_first is None:
                    t_first = board.index
                    first_frame = len(f[2]) + wire.OVERHEAD
                sent += len(f[2]) + wire.OVERHEAD
                got += len(f[2]) // 14
    board.sent = []
    if t_first is not None:
        allowed = first_frame + (board.index - t_first) * 4 * 500000 // 1000000
        assert sent <= allowed, (sent, allowed)
assert got == 2000, got
r = command({"id": 13, "cmd": "burst", "pre": 20000, "post": 1})[0]
assert not r["ok"] and "burst RAM" in r["error"], r

# a reply too big for one frame becomes an error reply, and the device keeps answering
r = command({"id": 20, "cmd": "ping", "echo": "x" * 2010})[0]   # fits a command, not a reply
assert not r["ok"] and "exceeds" in r["error"] and r["id"] == 20, r
assert command({"id": 21, "cmd": "describe"})[0]["ok"]

# calibration: unknown keys, typos and long strings are refused and change nothing
before = dev.cal
r = command({"id": 22, "cmd": "cal_set", "calibration": {"source": "s" * 500, "rails": {}}})[0]
assert not r["ok"] and "120" in r["error"], r
r = command({"id": 23, "cmd": "cal_set", "calibration": {"rails": {"12V": {"v_ofset": 1}}}})[0]
assert not r["ok"] and "unknown field 'v_ofset'" in r["error"], r
r = command({"id": 24, "cmd": "cal_set", "calibration": {"rails": {}, "colour": 1}})[0]
assert not r["ok"] and "unknown calibration key" in r["error"], r
assert dev.cal == before
# a corrupt stored calibration: defaults, and describe says why
with open(board.cal_path, "w") as f:
    f.write("{broken")
dev3 = Device(board)
assert dev3.cal["rails"]["12V"]["v_gain"] == 1.0 and "not valid JSON" in dev3.cal["load_error"]

# a bad per_frame is refused before anything changes
r = command({"id": 25, "cmd": "start", "per_frame": 2.5})[0]
assert not r["ok"] and "per_frame" in r["error"] and dev.state == "idle", r

# start while streaming is a restart, and the reply says which stream it replaced; a refused start
# leaves the running stream as it was
r = command({"id": 30, "cmd": "start", "interval_us": 1000})[0]
assert r["ok"] and r["restarted"] is None, r
r = command({"id": 31, "cmd": "start", "interval_us": 2000})[0]
assert r["ok"] and r["restarted"]["interval_us"] == 1000 and r["interval_us"] == 2000, r
r = command({"id": 31, "cmd": "start", "interval_us": 2001})[0]
assert not r["ok"] and dev.stream["interval_us"] == 2000 and dev.state == "streaming", r
assert command({"id": 32, "cmd": "status"})[0]["stream"]["interval_us"] == 2000
# status after stop shows no stream
assert command({"id": 33, "cmd": "stop"})[0]["ok"]
st = command({"id": 34, "cmd": "status"})[0]
assert st["state"] == "idle" and st["stream"] is None, st

# a command name that is not a string: the usual unknown-command answer
r = command({"id": 35, "cmd": ["start"]})[0]
assert not r["ok"] and "unknown command" in r["error"] and "unhashable" not in r["error"], r

# a rail listed twice would double its power: refused
r = command({"id": 36, "cmd": "start", "rails": ["12V", "12V"]})[0]
assert not r["ok"] and "listed twice" in r["error"] and dev.state == "idle", r

# an id that makes even the error reply too long: answered, without the id
r = command({"id": "i" * 1990, "cmd": "ping"})[0]
assert not r["ok"] and r["id"] is None and "id is too long" in r["error"], r

# a command frame over the maximum length: answered with an error, and the device keeps answering
big = bytearray(wire.HEADER_SIZE)
wire.put_header(big, wire.T_COMMAND, 0, 0, 3000, 77, 0, 0)
r = command(None, raw=bytes(big) + b"x" * 3004)
assert len(r) == 1 and not r[0]["ok"] and "3000 bytes exceeds" in r[0]["error"] and r[0]["seq"] == 77, r
assert command({"id": 37, "cmd": "describe"})[0]["ok"]

# numbers are numbers, not booleans
for rail in ({"v_gain": True}, {"i_offset": False}):
    r = command({"id": 38, "cmd": "cal_set", "calibration": {"rails": {"12V": rail}}})[0]
    assert not r["ok"] and "must be" in r["error"], r
r = command({"id": 39, "cmd": "burst", "trigger": "edge", "bit": True})[0]
assert not r["ok"] and "bit must be" in r["error"], r
r = command({"id": 40, "cmd": "burst", "pre": True, "post": 10})[0]
assert not r["ok"] and "pre must be" in r["error"], r
r = command({"id": 41, "cmd": "start", "interval_us": True})[0]
assert not r["ok"] and dev.state == "idle", r

# a pass with nothing to do ends in board.idle() (wait for the next interrupt); a pass that read a
# command, reduced a block or handed bytes to the USB does not (its next pass may have more to do)
idles = []
board.idle = lambda: idles.append(1)
idle_dev = Device(board)
idle_dev.poll()
assert len(idles) == 1, idles
board.inbox.append(bytes(wire.encode_frame(wire.T_COMMAND, b'{"id": 40, "cmd": "ping"}')))
idle_dev.poll()
board.pending = 1
idle_dev.poll()
board.pump = lambda: 1
idle_dev._pump = board.pump
idle_dev.poll()
assert len(idles) == 1, idles
board.pump = lambda: 0
idle_dev._pump = board.pump
idle_dev.poll()
assert len(idles) == 2, idles
del board.idle, board.pump
board.sent = []

# plan_stream: 2 rails at 100 us fit the budget, 3 do not
assert plan_stream(100, 2)[1] <= 500000
try:
    plan_stream(100, 3)
    raise AssertionError("3 rails at 100 us must be refused")
except ValueError:
    pass
print("device ok")

# selftest: answered once it has read its samples (idle only), with noise per channel
r = command({"id": 50, "cmd": "selftest"})
assert r == [], r                       # no blocks yet: no reply yet
# it reads PER_BLOCK samples of one block in EVERY (its Python keeps up on the RP2040): this many blocks
from powerrig_fw import selftest as _st
need = _st.EVERY * ((_st.SAMPLES + _st.PER_BLOCK - 1) // _st.PER_BLOCK)
for s in range(0, 250, 50):             # the drive is busy in the first eight blocks: they do not count
    board.block[s * 7 + 6] = 3
    board.block[s * 7 + 1] = 9000
board.pending = 8
for _ in range(8):
    dev.poll()
for s in range(0, 250, 50):
    board.block[s * 7 + 6] = 2
    board.block[s * 7 + 1] = 4000
board.pending = need
replies = []
for _ in range(need + 1):
    dev.poll()
    for b in board.sent:
        replies += [json.loads(f[2]) for f in reader.feed(b) if f[0] == wire.T_REPLY]
    board.sent = []
assert len(replies) == 1 and replies[0]["ok"] and replies[0]["id"] == 50, replies
st = replies[0]
ch = st["adc"]["channels"]
assert st["adc"]["samples"] == 1000 and len(ch) == 6 and st["firmware"] and st["build"], st
assert ch[0]["rail"] == "12V" and ch[0]["signal"] == "V" and ch[0]["mean_code"] == 26000 and ch[0]["noise_codes"] == 0, ch
assert ch[1]["mean_code"] == 4000 and ch[3]["mean_code"] == 3900 and st["digital"]["or"] == 2, st
assert not st["adc"]["drive_active"] and st["adc"]["waited_s"] == 2000 * 4e-6, st["adc"]
assert command({"id": 51, "cmd": "start"})[0]["ok"]
r = command({"id": 52, "cmd": "selftest"})[0]
assert not r["ok"] and "stop the stream" in r["error"], r
assert command({"id": 53, "cmd": "stop"})[0]["ok"]
print("selftest ok")


class WaitBoard(FakeBoard):
    """A board that says how many finished blocks wait unread (board.blocks.BlockRing.waiting)."""

    def waiting(self):
        return self.pending


def passes_until(dev2, board2, ftype, most):
    """Poll until a frame of ``ftype`` goes out: (passes, blocks left unread then), or None."""
    for k in range(most):
        dev2.poll()
        sent = [f for b in board2.sent for f in reader.feed(b)]
        board2.sent = []
        if [f for f in sent if f[0] == ftype]:
            return k + 1, board2.pending
    return None


# Beside a stream a JSON command and a burst chunk wait for a pass that finds no block unread (issue
# 43: on the RP2040 their passes, taken while the loop was still catching up, summed past the DMA
# ring's slack); a clock ping does not wait (its stamps are taken when it is read)
from powerrig_fw.device import WAIT_PASSES  # noqa: E402

board2 = WaitBoard()
dev2 = Device(board2)
board2.inbox.append(bytes(wire.encode_frame(wire.T_COMMAND, json.dumps(
    {"id": 60, "cmd": "start", "interval_us": 1000, "per_frame": 40}).encode())))
assert passes_until(dev2, board2, wire.T_REPLY, 2) == (1, 0) and dev2.state == "streaming"
board2.pending = 3
board2.inbox.append(bytes(wire.encode_frame(wire.T_COMMAND, json.dumps({"id": 61, "cmd": "status"}).encode())))
# the pass that reads it and the next two each take a block; the fourth finds none left: the reply
assert passes_until(dev2, board2, wire.T_REPLY, 8) == (4, 0), board2.pending
board2.pending = 3
board2.inbox.append(bytes(wire.encode_frame(wire.T_COMMAND, b'{"id":62,"cmd":"ping"}')))
assert passes_until(dev2, board2, wire.T_REPLY, 8) == (1, 2), board2.pending
board2.pending = 1000          # a loop that never catches up still answers, WAIT_PASSES passes later
board2.inbox.append(bytes(wire.encode_frame(wire.T_COMMAND, json.dumps({"id": 63, "cmd": "status"}).encode())))
got = passes_until(dev2, board2, wire.T_REPLY, WAIT_PASSES + 4)
assert got == (WAIT_PASSES + 1, 1000 - WAIT_PASSES - 1), got
board2.pending = 0
board2.inbox.append(bytes(wire.encode_frame(wire.T_COMMAND, json.dumps(
    {"id": 64, "cmd": "burst", "trigger": "now", "pre": 0, "post": 100}).encode())))
assert passes_until(dev2, board2, wire.T_REPLY, 2) == (1, 0)
board2.pending = 4             # it fires and completes in the first block; its first chunk waits for the rest
assert passes_until(dev2, board2, wire.T_BURST, 8) == (4, 0), board2.pending
assert dev2.overruns == 0 and dev2.burst.state == "idle", (dev2.overruns, dev2.burst.status())
print("waits ok")
