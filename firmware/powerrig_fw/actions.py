"""Timed power actions: cut or restore a rail, assert PERST#, PWRDIS, at a chosen raw sample.

Why from the sample clock: a power-loss test must know where in the I/O and in the captured samples
the cut fell, to one raw sample (4 us). The main loop cannot be that punctual (a pass takes up to a
millisecond, a Python statement microseconds), so the actions due within ``HORIZON_SAMPLES`` go to the
board's ``fire(plan, n)``: machine code that waits on the exact sample clock and writes each edge's
register (rows of ``plan``: sample index mod 2**32, register address, value, then the sample it was
written in, filled in). The ADC's DMA ring absorbs the wait. Each edge is recorded with the sample
index it was set at, and sent as a NOTICE.

Safety: nothing runs unless the host enabled power actions for this session (``power`` op
``enable``; the host's guard decides whether it may, e.g. never on the rig's own drive); while enabled
with power not in its safe state, a host silent for ``watchdog_ms`` gets the safe state back (every
rail on, PERST# and PWRDIS released) and a NOTICE saying so.

The board gives ``outputs`` (name -> ``(level -> (register address, value))``, the write that sets it),
``fire(plan, n)`` and ``sample_now()``; the levels are logical: 1 = rail on / signal asserted.
"""
import array

from powerrig_fw import rails_default

SAFE = {"12V": 1, "3V3": 1, "PERST": 0, "PWRDIS": 0}   # rails on, nothing asserted
MAX_ACTIONS = 32
HORIZON_SAMPLES = 500          # 2 ms: longer than the slowest pass (docs/firmware-budget.md)
EDGES_PER_NOTICE = 12          # a "power" NOTICE's edges (~70 bytes each): 32 in one did not fit a frame
MAX_WATCHDOG_MS = 60000


def _whole(x):
    return isinstance(x, int) and not isinstance(x, bool)


class PowerActions:
    def __init__(self, device):
        self.device = device
        board = device.board
        self.outputs = getattr(board, "outputs", None) or {}
        self.clock = getattr(board, "sample_now", None)
        self.fire = getattr(board, "fire", None)
        self.plan = array.array("I", bytes(16 * MAX_ACTIONS))
        self.enabled = False
        self.watchdog = 0           # samples of host silence after which the safe state comes back
        self.queue = []             # (index, output, level), in time order
        self.edges = []             # executed, not yet reported: (output, level, requested, executed)
        self.state = dict(SAFE)
        self.busy = False           # Device.poll looks at this one attribute: anything to do?

    def _update(self):
        self.busy = bool(self.queue or self.edges or (self.enabled and self.watchdog and self.state != SAFE))

    def command(self, msg):
        op = msg.get("op")
        if op == "status":
            return {"enabled": self.enabled, "state": self.state, "pending": len(self.queue),
                    "outputs": sorted(self.outputs)}
        if op == "enable":
            wd = msg.get("watchdog_ms", 1000)
            if not _whole(wd) or not 10 <= wd <= MAX_WATCHDOG_MS:
                raise ValueError("watchdog_ms must be a whole number within 10..%d" % MAX_WATCHDOG_MS)
            if not self.outputs or self.clock is None or self.fire is None:
                raise ValueError("this board cannot switch power (no outputs or sample clock)")
            self.enabled = True
            self.watchdog = wd * 1000 // rails_default.SAMPLE_PERIOD_US
            self._update()
            return {"enabled": True, "watchdog_ms": wd}
        if op == "disable":
            self.restore("disabled")
            self.enabled = False
            self._update()
            return {"enabled": False, "state": self.state}
        if not self.enabled:
            raise ValueError("power actions are off for this session; send {\"cmd\": \"power\", \"op\": "
                             "\"enable\"} first (the host's guard decides whether this drive may be switched)")
        if op == "sequence":
            return self.schedule(msg.get("actions"))
        if op == "cancel":
            n = len(self.queue)
            self.queue = []
            self._update()
            return {"cancelled": n}
        raise ValueError("op must be enable, disable, status, sequence or cancel")

    def schedule(self, actions):
        """[{"output", "level", "at": sample index | "after_us": from the action before (or from now)}]"""
        if not isinstance(actions, list) or not 1 <= len(actions) <= MAX_ACTIONS:
            raise ValueError("actions must be a list of 1..%d actions" % MAX_ACTIONS)
        now = self.clock()          # read once: "after_us 0" means this very sample, never "already past"
        at = now
        out = []
        for a in actions:
            if not isinstance(a, dict):
                raise ValueError("each action must be an object")
            name = a.get("output")
            if name not in self.outputs:
                raise ValueError("unknown output %r; outputs are %s" % (name, ", ".join(sorted(self.outputs))))
            level = a.get("level")
            if level not in (0, 1) or isinstance(level, bool):
                raise ValueError("level must be 0 or 1")
            if "at" in a:
                at = a["at"]
                if not _whole(at):
                    raise ValueError("at must be a sample index")
            else:
                us = a.get("after_us", 0)
                if not _whole(us) or us < 0:
                    raise ValueError("after_us must be a whole number of microseconds, 0 or more")
                at += (us + rails_default.SAMPLE_PERIOD_US - 1) // rails_default.SAMPLE_PERIOD_US
            out.append((at, name, level))
        if any(out[k][0] > out[k + 1][0] for k in range(len(out) - 1)):
            raise ValueError("actions must be in time order")
        if out[0][0] < now:
            raise ValueError("the first action at sample %d is already past (now %d)" % (out[0][0], now))
        self.queue = out
        self._update()
        return {"scheduled": [{"index": i, "output": n, "level": v} for i, n, v in out], "now": now}

    def _set(self, name, level):
        addr, value = self.outputs[name](level)
        self.plan[0] = self.clock() & 0xFFFFFFFF
        self.plan[1] = addr
        self.plan[2] = value
        self.fire(self.plan, 1)
        self.state[name] = level

    def poll(self):
        """Once a pass while busy: when an action is due within the horizon, it and those due within
        the horizon after it run by the board's fire() at their samples (one plan a pass: the pass waits
        at most two horizons, 4 ms, which the DMA ring's slack absorbs; the later actions are the next
        passes'; issue 43: a sequence of 32 edges 1.5 ms apart held one pass 36.6 ms and lost 26,500
        samples), edges reported once none is due soon, the watchdog checked. An action the next pass
        comes too late for is set late rather than samples lost, and its report says at which sample
        (``index`` beside ``requested``)."""
        clock = self.clock
        queue = self.queue
        plan = self.plan
        if queue and queue[0][0] <= clock() + HORIZON_SAMPLES:
            horizon = queue[0][0] + HORIZON_SAMPLES      # the first due and those within the horizon after it
            n = 0
            while n < len(queue) and n < MAX_ACTIONS and queue[n][0] <= horizon:
                at, name, level = queue[n]
                addr, value = self.outputs[name](level)
                plan[4 * n] = at & 0xFFFFFFFF
                plan[4 * n + 1] = addr
                plan[4 * n + 2] = value
                n += 1
            self.fire(plan, n)
            for k in range(n):
                at, name, level = queue.pop(0)
                late = (plan[4 * k + 3] - plan[4 * k]) & 0xFFFFFFFF
                if late >= 0x80000000:
                    late -= 0x100000000
                self.state[name] = level
                self.edges.append((name, level, at, at + late))
        if self.edges and not (queue and queue[0][0] <= clock() + HORIZON_SAMPLES):
            # reported once no action is due soon: the NOTICE's JSON takes milliseconds of the pass,
            # which the next action's pass must not wait behind
            edges = self.edges[:EDGES_PER_NOTICE]        # one NOTICE a pass, each fits its frame
            self.edges = self.edges[EDGES_PER_NOTICE:]
            self.device.notice({"event": "power", "edges": [{"output": n, "level": v, "requested": r, "index": x}
                                                             for n, v, r, x in edges]})
        if self.enabled and self.watchdog and self.state != SAFE and \
                clock() - self.device.rx_index > self.watchdog:
            self.restore("watchdog: no word from the host for %d ms" % (self.watchdog * 4 // 1000))
        self._update()

    def restore(self, why):
        """The safe state now, the queue dropped; said in a NOTICE when anything changed."""
        changed = [n for n in self.outputs if self.state.get(n, SAFE.get(n)) != SAFE.get(n, 0)]
        self.queue = []
        for n in self.outputs:
            self._set(n, SAFE.get(n, 0))
        if changed:
            self.device.notice({"event": "power_restored", "why": why, "outputs": changed,
                                "index": self.clock() if self.clock else None})
        self._update()
