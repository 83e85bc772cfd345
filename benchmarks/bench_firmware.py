"""The firmware hot path's instruction budget, measured on MicroPython for an emulated Cortex-M.

Runs tests/micropython/fw_board.py (board.reducer: viper + the Thumb-2 rail loop, checked against the
reference first) on QEMU's mps2-an385 with -icount shift=0, where 1 us of ticks_us is exactly 1000
executed instructions, and prints instructions per 4 us sample point
by stage for 1..3 rails at the 100 us and 1 ms intervals, the cycle estimate for a 150 MHz Cortex-M33
(x1.3) and the headroom, and the USB bytes per second per frame size against the link budget.

    .venv/bin/python benchmarks/bench_firmware.py        (docs/firmware-budget.md quotes its output)
"""
from __future__ import annotations

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


def main() -> int:
    reason = qemu.available()
    if reason:
        print(f"bench_firmware: skipped: {reason}")
        return 0
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
    print(f"  CRC-32 (Thumb-2, byte table): {crc_byte:.1f} per frame byte")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
