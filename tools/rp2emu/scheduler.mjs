// The emulated RP2040's clock: CPU, DMA alarms and PIO state machines advanced in lockstep.
//
// Why: rp2040js 1.4.1 steps its PIO from a setTimeout loop (1000 steps a turn, unrelated to emulated
// time; CLKDIV and [n] delays ignored), so a PIO program's timing means nothing there. Here every
// enabled state machine runs on its own CLKDIV grid (x256 fixed point) of the emulated clk_sys, delay
// cycles included, right after the CPU instruction that brings the clock past its next step.
// State machines blocked in WAIT or on a FIFO are parked: rp2040js re-checks their condition on every
// pin, IRQ and FIFO event, so the scheduler only resumes them on their grid once `waiting` clears.
// (../shared/vendor/rp2040js/README.md has the measurements behind this design.)

export class Lockstep {
  constructor(sim) {
    this.sim = sim;
    this.mcu = sim.rp2040;
    this.nsPerCycle = 1e9 / this.mcu.clkSys;
    this.sms = [];
    for (const pio of this.mcu.pio) {
      pio.run = () => {};                    // stop rp2040js's own setTimeout-driven PIO loop
      for (const m of pio.machines) this.sms.push({ m, pio, next: 0, parked: false });
    }
    this.sysCycles = 0;                      // emulated clk_sys cycles since boot
    this.pioSteps = 0;
    this.stepCycle256 = 0;                   // clk_sys x 256 of the PIO step running now (nowNs())
    this.inPio = false;
  }

  /** Emulated ns now: within a PIO step, the step's own instant (pin edges are timed by it). */
  nowNs() {
    return this.inPio ? (this.stepCycle256 / 256) * this.nsPerCycle : this.sim.clock.nanos;
  }

  static divOf(m) {                          // clock divider x 256 (an integer part of 0 means 65536)
    const d = ((m.clockDivInt || 65536) << 8) | m.clockDivFrac;
    return d < 256 ? 256 : d;
  }

  anyEnabled() {
    for (const s of this.sms) if (s.m.enabled) return true;
    return false;
  }

  unparkAll(now) {
    for (const s of this.sms) {
      if (s.parked && (!s.m.waiting || !s.m.enabled)) {
        s.parked = false;
        const div = Lockstep.divOf(s.m);
        const late = (now - s.next) % div;   // keep the machine's phase on its grid
        s.next = late > 0 ? now + div - late : Math.max(now, s.next);
      }
    }
  }

  stepPIO(cycles) {
    const target = (this.sysCycles + cycles) * 256;
    let anyParked = false;
    for (const s of this.sms) if (s.parked) { anyParked = true; break; }
    if (anyParked) this.unparkAll(this.sysCycles * 256);
    this.inPio = true;
    for (;;) {
      let best = null;
      for (const s of this.sms) {
        if (!s.m.enabled) { s.next = 0; s.parked = false; continue; }
        if (s.parked) continue;
        if (s.next === 0) s.next = this.sysCycles * 256;   // freshly enabled
        if (best === null || s.next < best.next) best = s;
      }
      if (best === null || best.next >= target) break;
      const s = best, m = s.m;
      const before = m.cycles;
      this.stepCycle256 = s.next;
      m.step();
      this.pioSteps++;
      const d = m.cycles - before;           // 1 + the delay cycles of the instruction just run
      s.pio.checkChangedPins();
      const t = s.next;
      s.next += Lockstep.divOf(m) * (d > 1 ? d : 1);
      if (m.waiting) { s.parked = true; anyParked = true; }
      if (anyParked) {
        this.unparkAll(t);
        anyParked = false;
        for (const x of this.sms) if (x.parked) { anyParked = true; break; }
      }
    }
    this.inPio = false;
    this.sysCycles += cycles;
  }

  /** Run about `budget` CPU cycles (a sleeping core skips ahead to its next alarm, <= 1 us while PIO runs). */
  slice(budget) {
    const { core } = this.mcu, clock = this.sim.clock, ns = this.nsPerCycle;
    let done = 0;
    while (done < budget) {
      let cycles;
      if (core.waiting) {
        let dt = clock.nanosToNextAlarm;
        const pio = this.anyEnabled();
        if (pio) dt = Math.min(dt > 0 ? dt : 1000, 1000);
        if (dt <= 0) dt = 1000;
        cycles = Math.max(1, Math.round(dt / ns));
        clock.tick(cycles * ns);
        if (pio) this.stepPIO(cycles); else this.sysCycles += cycles;
      } else {
        cycles = core.executeInstruction();
        clock.tick(cycles * ns);
        if (this.anyEnabled()) this.stepPIO(cycles); else this.sysCycles += cycles;
      }
      done += cycles;
    }
  }
}
