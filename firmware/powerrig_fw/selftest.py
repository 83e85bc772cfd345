"""The device's self-test: what a bench check needs to trust a board before calibrating it.

Reads SAMPLES sample points of every channel (PER_BLOCK from one DMA block in EVERY) while the drive is idle (a block with the activity
input set starts the count again, for up to WAIT_SAMPLES: noise measured across a load step is the
load, not the front end) and reports per channel the mean code, the noise (standard deviation,
codes), min and max; whether it had to give up waiting for an idle drive; the digital inputs; the reference
voltage where the board can measure it (``board.vref_v()``); firmware version and build hash
(powerrig_fw/build_info.py, written by `powerrig flash`). Not a hot path: plain Python.
"""
from powerrig_fw import PROTOCOL_VERSION, VERSION, layout, rails_default

SAMPLES = 1000            # 4 ms at 4 us
# samples taken from a block: the statistics are plain Python, ~150 us per sample point (6 channels and
# the digital word) on the emulated RP2040. 50 samples of one block in four took ~7.7 ms of each 8 ms:
# the main loop fell behind its DMA ring, each block it then read was the oldest, which DMA overwrote
# while it was read, and the self-test lost 22,000-35,500 samples and failed its own "no samples lost"
# check on a good board (issue 43). PER_BLOCK samples of one block in EVERY bound its work to ~1.5 ms
# of each 8 ms there (the other blocks pass through untouched): 1000 samples in 0.8 s on the RP2040,
# 0.4 s on the RP2350. The noise of an idle input needs no contiguous samples, and a sample lost now is
# the capture chain's, not the self-test's own.
PER_BLOCK = 10
EVERY = 4
WAIT_SAMPLES = 750000     # 3 s at 4 us: how long to wait for the drive to go idle
ACTIVITY = 1              # the activity input's bit in the digital word
VREF_TOLERANCE = 0.01     # +-1 % of nominal: the AD7380's internal reference is specified to +-0.1 %

try:
    from powerrig_fw.build_info import BUILD
except ImportError:
    BUILD = "unversioned (not installed by powerrig flash)"


class SelfTest:
    def __init__(self, device, cid):
        self.device = device
        self.cid = cid
        self.rails = rails_default.RAILS
        self.waited = 0
        self.blocks = 0
        self.layout = layout.of(device.board, len(self.rails))
        self.restart()

    def restart(self):
        n = 2 * len(self.rails)
        self.sum = [0] * n
        self.sumsq = [0] * n
        self.ref = None           # per channel, the first code read: the sums are of codes minus it
        self.lo = [32767] * n
        self.hi = [-32768] * n
        self.count = 0
        self.dig_or = 0
        self.dig_and = 0xFF
        self.dig_now = 0
        self.dropped = 0

    def observe(self, raw, n, dropped):
        """Take samples from a block; True when it has enough."""
        if self.count:                    # lost inside the test's samples (before them is not its business)
            self.dropped += dropped
        self.blocks += 1
        if self.blocks % EVERY:
            return False
        bases, step, dbase, dstep, dshift = self.layout
        take = min(n, PER_BLOCK, SAMPLES - self.count)
        if self.waited < WAIT_SAMPLES:
            busy = 0
            for k in range(take):
                busy |= (int(raw[dbase + k * dstep]) & 0xFFFF) >> dshift
            if busy & ACTIVITY:
                self.waited += EVERY * n        # (the blocks passed through waited too)
                self.restart()
                return False
        if self.ref is None:
            self.ref = [int(raw[bases[c // 2] + (c & 1)]) for c in range(2 * len(self.rails))]
        for c in range(2 * len(self.rails)):
            at = bases[c // 2] + (c & 1)
            s1 = s2 = 0
            r = self.ref[c]
            lo, hi = self.lo[c], self.hi[c]
            for k in range(take):
                x = int(raw[at + k * step])     # int: numpy blocks (simulator) must not wrap x * x
                d = x - r                       # small: the block's sums stay small ints (a code's square,
                s1 += d                         # 50 of them, would be big ints on a 32-bit MicroPython:
                s2 += d * d                     # an allocation each, and the collections lost samples)
                if x < lo:
                    lo = x
                if x > hi:
                    hi = x
            self.sum[c] += s1
            self.sumsq[c] += s2
            self.lo[c], self.hi[c] = lo, hi
        for k in range(take):
            d = ((int(raw[dbase + k * dstep]) & 0xFFFF) >> dshift) & 0xFF
            self.dig_or |= d
            self.dig_and &= d
            self.dig_now = d
        self.count += take
        return self.count >= SAMPLES

    def result(self):
        n = self.count
        channels = []
        for c in range(2 * len(self.rails)):
            dm = self.sum[c] / n
            mean = self.ref[c] + dm
            var = max(0.0, self.sumsq[c] / n - dm * dm)
            channels.append({"rail": self.rails[c // 2][0], "signal": "VI"[c & 1], "mean_code": round(mean, 2),
                             "noise_codes": round(var ** 0.5, 3), "min": self.lo[c], "max": self.hi[c]})
        board = self.device.board
        vref = board.vref_v() if hasattr(board, "vref_v") else None
        nominal = rails_default.VREF_V if hasattr(rails_default, "VREF_V") else 2.5
        return {
            "ok": True, "id": self.cid, "firmware": VERSION, "build": BUILD, "protocol": PROTOCOL_VERSION,
            "board": board.name, "serial": board.serial,
            "vref": {"volts": vref, "nominal": nominal,
                     "within_tolerance": None if vref is None else abs(vref - nominal) <= VREF_TOLERANCE * nominal,
                     "note": "measured" if vref is not None else "this board cannot measure its reference"},
            "adc": {"samples": n, "dropped": self.dropped, "channels": channels,
                    "drive_active": bool(self.dig_or & ACTIVITY),
                    "waited_s": self.waited * rails_default.SAMPLE_PERIOD_US / 1e6},
            "digital": {"names": ["activity", "perst", "marker"], "now": self.dig_now, "or": self.dig_or,
                        "and": self.dig_and},
            "link_budget_bps": 500000,
        }
