// The emulated RP2040's clock: CPU, DMA alarms and PIO state machines advanced in lockstep.
//
// Why: rp2040js 1.4.1 steps its PIO from a setTimeout loop (1000 steps a turn, unrelated to emulated
// time; CLKDIV and [n] delays ignored), so a PIO program's timing means nothing there. Here every
// enabled state machine runs on its own CLKDIV grid (x256 fixed point) of the emulated clk_sys, delay
// cycles included, right after the CPU instruction that brings the clock past its next step.
// State machines blocked in WAIT or on a FIFO are parked: rp2040js re-checks their condition on every
// pin, IRQ and FIFO event, so the scheduler only resumes them on their grid once `waiting` clears.
// (../shared/vendor/rp2040js/README.md has the measurements behind this design.)

const QUANTUM = 32;                          // clk_sys cycles the CPU may run ahead of the PIO

export class Lockstep {
  constructor(sim) {
    this.sim = sim;
    this.mcu = sim.rp2040;
    this.nsPerCycle = 1e9 / this.mcu.clkSys;
    this.sms = [];
    for (const pio of this.mcu.pio) {
      pio.run = () => {};                    // stop rp2040js's own setTimeout-driven PIO loop
      for (const m of pio.machines) {
        this.sms.push({ m, pio, next: 0, parked: false, div: 256 });
        // a parked machine resumes only when its `waiting` clears, which rp2040js does in checkWait (or
        // restart(), a CTRL write): flagged here, so a PIO step looks for released machines only then
        const check = m.checkWait.bind(m);
        m.checkWait = () => { check(); if (!m.waiting) this.released = true; };
      }
      // The enabled set and the dividers change only by a register write (CTRL, SMx_CLKDIV) or stop():
      // the active list is rebuilt after one, not on every batch (the rebuild cost 5 % of the runner).
      const write = pio.writeUint32.bind(pio), stop = pio.stop.bind(pio);
      pio.writeUint32 = (offset, value) => { write(offset, value); this.dirty = true; this.released = true; };
      pio.stop = () => { stop(); this.dirty = true; };
      pio.checkChangedPins = fastCheckChangedPins;
    }
    this.sysCycles = 0;                      // emulated clk_sys cycles since boot
    this.pioSteps = 0;
    this.stepCycle256 = 0;                   // clk_sys x 256 of the PIO step running now (nowNs())
    this.inPio = false;
    this.active = [];                        // the enabled state machines (refreshActive)
    this.dirty = true;                       // a PIO register was written since refreshActive
    this.released = false;                   // a machine's wait may have ended since the last look
  }

  /** Emulated ns now: within a PIO step, the step's own instant (pin edges are timed by it). */
  nowNs() {
    return this.inPio ? (this.stepCycle256 / 256) * this.nsPerCycle : this.sim.clock.nanos;
  }

  static divOf(m) {                          // clock divider x 256 (an integer part of 0 means 65536)
    const d = ((m.clockDivInt || 65536) << 8) | m.clockDivFrac;
    return d < 256 ? 256 : d;
  }

  /** The enabled state machines and their dividers (rebuilt after a PIO register write). */
  refreshActive() {
    const act = this.active;
    act.length = 0;
    this.dirty = false;
    for (const s of this.sms) {
      if (!s.m.enabled) { s.next = 0; s.parked = false; continue; }
      if (s.next === 0) s.next = this.sysCycles * 256;      // freshly enabled
      s.div = Lockstep.divOf(s.m);
      act.push(s);
    }
    return act.length;
  }

  unparkAll(now) {
    const act = this.active;
    for (let k = 0; k < act.length; k++) {
      const s = act[k];
      if (s.parked && !s.m.waiting) {
        s.parked = false;
        const div = s.div;
        const late = (now - s.next) % div;   // keep the machine's phase on its grid
        s.next = late > 0 ? now + div - late : Math.max(now, s.next);
      }
    }
  }

  /** Step every enabled state machine whose grid falls before clk_sys cycle sysCycles + cycles. */
  stepPIO(cycles) {
    if (this.dirty) this.refreshActive();
    const act = this.active, n = act.length;
    if (n === 0) { this.sysCycles += cycles; return; }
    const target = (this.sysCycles + cycles) * 256;
    for (let k = 0; k < n; k++) {
      const s = act[k];
      if (s.parked && !s.m.waiting) { this.unparkAll(this.sysCycles * 256); break; }
    }
    this.inPio = true;
    let steps = 0;
    for (;;) {
      let best = null, bestNext = target;
      for (let k = 0; k < n; k++) {
        const s = act[k];
        if (!s.parked && s.next < bestNext) { best = s; bestNext = s.next; }
      }
      if (best === null) break;
      const m = best.m, pio = best.pio;
      const before = m.cycles;
      this.stepCycle256 = bestNext;
      this.released = false;
      m.step();
      steps++;
      const d = m.cycles - before;           // 1 + the delay cycles of the instruction just run
      if ((pio.oldPinDirections ^ pio.pinDirections) | (pio.oldPinValues ^ pio.pinValues)) pio.checkChangedPins();
      best.next = bestNext + best.div * (d > 1 ? d : 1);
      if (m.waiting) best.parked = true;
      // a step may have released a parked machine (a pin edge, an IRQ flag, FIFO room)
      if (this.released) {
        for (let k = 0; k < n; k++) {
          const s = act[k];
          if (s.parked && !s.m.waiting) { this.unparkAll(bestNext); break; }
        }
      }
    }
    this.pioSteps += steps;
    this.inPio = false;
    this.sysCycles += cycles;
  }

  /**
   * Run about `budget` CPU cycles. The CPU runs ahead of the PIO by at most QUANTUM cycles (0.26 us
   * at 125 MHz), then the state machines catch up on their own grids: a PIO word reaches its FIFO
   * (and so the DMA) at most that much later than on silicon, far inside the 4 us between samples,
   * while pin edges keep their exact step times (nowNs()). A sleeping core skips ahead to its next
   * alarm, by at most 1 us while PIO runs.
   */
  slice(budget) {
    const { core } = this.mcu, clock = this.sim.clock, ns = this.nsPerCycle;
    let done = 0;
    while (done < budget) {
      let cycles = 0;
      if (core.waiting) {
        let dt = clock.nanosToNextAlarm;
        if (this.dirty) this.refreshActive();
        if (this.active.length > 0) dt = Math.min(dt > 0 ? dt : 1000, 1000);
        if (dt <= 0) dt = 1000;
        cycles = Math.max(1, Math.round(dt / ns));
        clock.tick(cycles * ns);
      } else {
        while (cycles < QUANTUM && !core.waiting) {
          const c = core.executeInstruction();
          // clock.tick(c * ns) without the call when no alarm falls due (the same sum, the same order)
          const t = clock.nanosCounter + c * ns, alarm = clock.nextAlarm;
          if (alarm && alarm.nanos <= t) clock.tick(c * ns); else clock.nanosCounter = t;
          cycles += c;
        }
      }
      this.stepPIO(cycles);
      done += cycles;
    }
  }
}

/** RPPIO.checkChangedPins, visiting only the changed pins' bits (rp2040js walks all 30 GPIOs). */
function fastCheckChangedPins() {
  let changed = (this.oldPinDirections ^ this.pinDirections) | (this.oldPinValues ^ this.pinValues);
  if (!changed) return;
  this.oldPinDirections = this.pinDirections;
  this.oldPinValues = this.pinValues;
  const { gpio } = this.rp2040;
  changed &= gpio.length >= 32 ? -1 : (1 << gpio.length) - 1;
  while (changed) {
    const low = changed & -changed;
    gpio[31 - Math.clz32(low)].checkForUpdates();
    changed ^= low;
  }
}
