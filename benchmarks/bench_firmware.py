"""The firmware's instruction budget, measured on MicroPython for an emulated Cortex-M: the whole main-loop
pass first (Device(Board()) per 1 ms DMA block, as firmware/main.py runs it, heap locked), then the hot
path by stage.

Runs tests/micropython/fw_board.py (board.reducer: viper + the Thumb-2 rail loop, checked against the
reference first) on QEMU's mps2-an385 with -icount shift=0, where 1 us of ticks_us is exactly 1000
executed instructions, and prints instructions per 4 us sample point
by stage for 1..3 rails at the 100 us and 1 ms intervals, the cycle estimate for a 150 MHz Cortex-M33
(x1.3) and the headroom, and the USB bytes per second per frame size against the link budget.

    .venv/bin/python benchmarks/bench_firmware.py [--blocks 2000]   (docs/firmware-budget.md quotes it)

Prints LAST a JSON object: whole_pass_instr_per_point (2 rails, 100 us, average, target <= 300),
worst_pass_us (the slowest single block pass at 150 MHz x 1.3, target < 1000) and
burst_armed_instr_per_point (a threshold or edge burst armed on top, target <= 600 / 1.3).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "micropython"))
sys.path.insert(0, str(REPO / "firmware"))
import qemu  # noqa: E402
from powerrig_fw import wire  # noqa: E402
from powerrig_fw.device import FRAME_TARGET_US, LINK_BUDGET_BPS  # noqa: E402

CPU_HZ = 150_000_000
SAMPLE_US = 4
CYCLES_PER_INSTRUCTION = 1.3
BUDGET = CPU_HZ * SAMPLE_US // 1_000_000          # 600 cycles per sample point



def per_frame(interval_us: int, n_rails: int) -> int:
    return max(1, min(255, FRAME_TARGET_US // interval_us, wire.MAX_PAYLOAD // wire.record_size(n_rails)))


def whole_pass(blocks: int) -> dict:
    """tests/micropython/mcu_whole_pass.py's per-mode figures: {mode: (passes, total us, worst us, idle us)}."""
    out = qemu.run_script(REPO / "tests" / "micropython" / "mcu_whole_pass.py", [str(blocks)], timeout=1800)
    rows = {}
    for line in out.splitlines():
        p = line.split()
        if p and p[0] == "pass":
            rows[p[1]] = (int(p[2]), int(p[3]), int(p[4]), int(p[5]))
        elif line.startswith("heap free"):
            print(line)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=2000, help="blocks (1 ms each) in the 2-rail 100 us run")
    args = ap.parse_args()
    reason = qemu.available()
    if reason:
        print(f"bench_firmware: cannot run: {reason}", file=sys.stderr)
        return 3
    rows = whole_pass(max(2000, args.blocks))
    print("\nWhole main-loop passes: Device(Board()) per 1 ms DMA block (250 samples), heap locked (no allocation,")
    print("so no collection: GC 0), copying writes through the USB queue into a RingIO CDC stand-in")
    print(f"{'mode':>26} {'passes':>6} {'avg/point':>9} {'worst pass':>10} {'worst/point':>11} {'worst us':>9} {'idle pass':>9}")
    for mode, (n, total, worst, idle) in rows.items():
        avg = total * 1000 / (n * 250)
        print(f"{mode:>26} {n:>6} {avg:>9.0f} {worst * 1000:>10} {worst * 1000 / 250:>11.0f} "
              f"{worst * 1000 * CYCLES_PER_INSTRUCTION / (CPU_HZ / 1e6):>9.0f} {idle * 1000 // 200:>9}")
    print(f"(instructions; worst us = slowest single pass at {CPU_HZ // 1_000_000} MHz x {CYCLES_PER_INSTRUCTION}; "
          f"idle pass = a pass with no block ready)\n")
    # the same measurement tests/test_firmware_qemu.py asserts on: fw_board.py prints it after its checks
    out = qemu.run_script(REPO / "tests" / "micropython" / "fw_board.py", ["/rom/vectors"], timeout=900)
    m, crc_byte = {}, None
    for line in out.splitlines():
        p = line.split()
        if p and p[0] == "budget":
            m[(int(p[1]), int(p[2]))] = (float(p[3]), float(p[4]))
        elif p and p[0] == "crc_per_byte_x100":
            crc_byte = int(p[1]) / 100
    # per-rail cost of the Thumb-2 loop: the increment per rail at the longer interval
    rail = (m[(3, 250)][1] - m[(1, 250)][1]) / 2
    print("emulated Cortex-M (QEMU mps2-an385, ARMv7-M, -icount shift=0), instructions per 4 us sample point")
    print(f"  rail loop (Thumb-2: load, offset, clamp, V*I, sums, min/max, window, peak): {rail:6.1f} per rail")
    print(f"  CRC-32 (Thumb-1, slicing by 4): {crc_byte:.1f} per frame byte")
    print()
    hdr = (f"{'rails':>5} {'interval':>8} {'rail loops':>10} {'runs+digital+records+framing':>29} {'CRC':>6} "
           f"{'total':>7} {'cycles':>7} {'headroom':>9}")
    print(hdr)
    for nr in (1, 2, 3):
        for spi in (25, 250):
            total, without_crc = m[(nr, spi)]
            crc = total - without_crc
            loops = rail * nr
            rest = without_crc - loops
            cycles = total * CYCLES_PER_INSTRUCTION
            print(f"{nr:>5} {spi * SAMPLE_US:>6}us {loops:>10.0f} {rest:>29.0f} {crc:>6.0f} "
                  f"{total:>7.0f} {cycles:>7.0f} {100 * (1 - cycles / BUDGET):>8.0f}%")
    print(f"\n(cycles = instructions x {CYCLES_PER_INSTRUCTION}; headroom against {BUDGET} cycles per sample point "
          f"of one {CPU_HZ // 1_000_000} MHz Cortex-M33 core; CRC = with it minus without it)")
    burst = qemu.run_script(REPO / "tests" / "micropython" / "fw_burst.py", [], timeout=900)
    print("\nAn armed raw burst (board layout: Thumb-2 trigger scan + copy into the interleaved ring, per block),")
    print("on top of the hot path while it waits for its trigger:")
    for line in burst.splitlines():
        p = line.split()
        if p and p[0] == "armed":
            armed = int(p[2])
            total = m[(2, 25)][0] + armed
            print(f"  {p[1]:>9} trigger: {armed} per sample point (scan {p[4]}, copy {p[6]}); with 2 rails at 100 us "
                  f"{total:.0f} instructions = {total * CYCLES_PER_INSTRUCTION:.0f} cycles, "
                  f"headroom {100 * (1 - total * CYCLES_PER_INSTRUCTION / BUDGET):.0f}%")
    print("\nUSB link, bytes per second (budget %d B/s)" % LINK_BUDGET_BPS)
    print(f"{'rails':>5} {'interval':>8} " + " ".join(f"{'%d/frame' % k:>10}" for k in (1, 5, 10, 22, 44)))
    for nr in (2, 3):
        for us in (100, 1000):
            rec = wire.record_size(nr)
            cells = []
            for k in (1, 5, 10, 22, 44):
                if rec * k > wire.MAX_PAYLOAD:
                    cells.append(f"{'-':>10}")
                else:
                    cells.append(f"{(wire.OVERHEAD + rec * k) * 1_000_000 // (k * us):>10}")
            print(f"{nr:>5} {us:>6}us " + " ".join(cells))
    n, total, worst, _idle = rows["r2_100us"]
    burst = [rows[m] for m in ("r2_100us_burst_threshold", "r2_100us_burst_edge")]
    result = {
        "whole_pass_instr_per_point": round(total * 1000 / (n * 250), 1),
        "worst_pass_us": round(worst * 1000 * CYCLES_PER_INSTRUCTION / (CPU_HZ / 1e6), 1),
        "burst_armed_instr_per_point": round(max(b[1] * 1000 / (b[0] * 250) for b in burst), 1),
        "burst_armed_cycles_per_point": round(max(b[1] * 1000 / (b[0] * 250) for b in burst) * CYCLES_PER_INSTRUCTION, 1),
        "blocks": n, "gc_collections": 0, "heap_locked": True,
        "targets": {"whole_pass_instr_per_point": 300, "worst_pass_us": 1000, "burst_armed_cycles_per_point": 600},
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
