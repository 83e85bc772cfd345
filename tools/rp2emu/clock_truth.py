"""The clock error of the emulated board against the waveform's own clock (issue 43, item 6).

The host's clock fit (powerrig.core.clock.ClockFit) maps the board's sample index to the host's time
from clock pings: the time a ping was sent, the board's index when it read it (``rx_index``), the
index when the reply left, the time the reply came. Here the same fit runs on the same pings, but with
the times taken where the truth is known: the emulator's time log (run.mjs --timelog) says when each
host byte reached the board and each board byte left it, counted in the converters' conversions (the
waveform's rows, one every 4 us of the PIO's clock). The fit's line against the conversion count is
the clock error: a stamp taken at a block's start instead of at the sample shows as a bias of half a
block (about 1 ms on the RP2040's 2 ms blocks); with stamps at the sample it is the USB's and the main
loop's asymmetry. One constant is not known to the sample: which row a sample index carries (the
AD7380 clocks a conversion out in the next frame), so the error is within +-4 us of the one given.
"""
from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from powerrig.core.clock import ClockFit
from powerrig.interposer import frames as wire

PERIOD_S = 4e-6


def _log(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(out rows: [ns, row, bytes so far]), (in rows: [ns, row, bytes before, length])."""
    outs, ins = [], []
    for line in path.read_text().splitlines():
        p = line.split()
        if p and p[0] == "o":
            outs.append([int(p[1]), int(p[2]), int(p[3])])
        elif p and p[0] == "i":
            ins.append([int(p[1]), int(p[2]), int(p[3]), int(p[4])])
    return np.array(outs, dtype=np.int64).reshape(-1, 3), np.array(ins, dtype=np.int64).reshape(-1, 4)


def ping_board(port: str, n: int, gap_s: float, timelog: Path, reply_timeout_s: float = 900.0,
               describe_first: bool = False, flush: Callable[[], None] | None = None) -> list[dict]:
    """n clock pings in the host's own form over the raw pty, one at a time: per ping the host->board
    byte offset just after its last byte, the board->host offset of its reply's first byte, and the
    reply's indices. Opens the port after a resync preamble, as the host does. The offsets count from
    the board's boot (the time log's): what earlier hosts exchanged is read from the log first, with
    the link quiet (the runner writes its log every half second). ``describe_first``: a describe
    answered before the first ping, as the host's open does (powerrig.interposer.client): right
    after boot a ping sent before the board's main loop runs is read only when the loop starts.
    ``flush``: writes the runner's log now (EmulatedBoard.flush_log), instead of waiting 1.5 s for it.
    ``reply_timeout_s`` is host time, as the tier's other commands' 900 s: right after boot the describe
    waits for the board's start-up (~0.7 s emulated), which took over 120 s at 0.3 % of real time
    (two xdist workers beside load 15-23: the boot test's clock fixture failed there)."""
    if flush is None:
        time.sleep(1.5)
    else:
        flush()
    outs, ins = _log(timelog) if timelog.exists() else (np.zeros((0, 3), np.int64), np.zeros((0, 4), np.int64))
    fd = os.open(port, os.O_RDWR | os.O_NOCTTY)
    sent = int(outs[-1, 2]) if len(outs) else 0
    got = bytearray()
    base = int(ins[-1, 2] + ins[-1, 3]) if len(ins) else 0     # board->host offset of got[0]
    out = []
    try:
        os.write(fd, bytes(wire.fw.RESYNC_PREAMBLE))
        sent += wire.fw.RESYNC_PREAMBLE
        for k in range(-1 if describe_first else 0, n):
            f = wire.encode_command({"id": 1000 + k, "cmd": "ping" if k >= 0 else "describe"}, seq=k & 0xFFFF)
            os.write(fd, f)
            sent += len(f)
            end = time.monotonic() + reply_timeout_s
            reply = None
            while reply is None:
                if time.monotonic() > end:
                    raise TimeoutError(f"no reply to ping {k} within {reply_timeout_s} s")
                r, _, _ = select.select([fd], [], [], 0.2)
                if r:
                    got += os.read(fd, 65536)
                while reply is None:
                    i = got.find(wire.SYNC)
                    if i < 0 or len(got) - i < wire.fw.HEADER_SIZE:
                        break
                    _s, _v, ftype, _f, _c, length, _seq, index = wire.HEADER.unpack_from(got, i)
                    if len(got) - i < wire.fw.OVERHEAD + length:
                        break
                    payload = bytes(got[i + wire.fw.HEADER_SIZE:i + wire.fw.HEADER_SIZE + length])
                    at = base + i
                    del got[:i + wire.fw.OVERHEAD + length]
                    base = at + wire.fw.OVERHEAD + length
                    if ftype == wire.T_REPLY:
                        import json
                        doc = json.loads(payload)
                        if doc.get("id") == 1000 + k:
                            reply = {"sent_end": sent, "reply_at": at, "rx_index": doc.get("rx_index"),
                                     "index": doc.get("index"), "header_index": index}
            if k >= 0:
                out.append(reply)
            time.sleep(gap_s)
    finally:
        os.close(fd)
    return out


def clock_error(pings: list[dict], timelog: Path, row_lag: int = 1) -> dict:
    """The fit's error against the conversion count, over the pinged span: p50, p99 and max of
    |fit(index) - (index + row_lag) * 4 us| in us, and how the stamps fall within the 2 ms block."""
    outs, ins = _log(timelog)
    fit = ClockFit(period_s=PERIOD_S)
    rows = []
    for p in pings:
        o = outs[np.searchsorted(outs[:, 2], p["sent_end"])]           # the OUT packet with its last byte
        j = np.searchsorted(ins[:, 2], p["reply_at"], side="right") - 1  # the IN packet with the reply's first
        t_send = o[1] * PERIOD_S
        t_recv = ins[j, 1] * PERIOD_S
        tx = max(p["index"], p["header_index"])
        fit.add(t_send, float(p["rx_index"]), t_recv, float(tx))
        rows.append((p["rx_index"], tx, o[1], ins[j, 1]))
    model = fit.model()
    idx = np.array([r[0] for r in rows] + [r[1] for r in rows], dtype=float)
    err_us = (np.array([model.utc(i) for i in idx]) - (idx + row_lag) * PERIOD_S) * 1e6
    a = np.abs(err_us)
    block = 500
    return {"pings": len(pings), "p50_us": float(np.percentile(a, 50)), "p99_us": float(np.percentile(a, 99)),
            "max_us": float(a.max()), "mean_us": float(err_us.mean()),
            "rx_on_block_start": int(sum(1 for r in rows if r[0] % block == 0)),
            "read_latency_us_p50": float(np.median([(r[0] + row_lag - r[2]) * 4 for r in rows]))}
