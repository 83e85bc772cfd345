// The AD7380s at the emulated RP2040's pins: what the board's PIO program clocks, bit by bit.
//
// The converter as its datasheet and the Linux driver (drivers/iio/adc/ad7380.c) describe it, for the
// parts of it the board uses (docs/emulator.md, "The emulated AD7380"):
// - SPI mode 3 (CPOL 1, CPHA 1): SCLK idles high; the converter puts the next bit on SDOA at each SCLK
//   falling edge, MSB first, and takes SDI at each rising edge. A CS falling edge starts a conversion
//   of both channels at once; the bits clocked out in a frame are those of the PREVIOUS conversion
//   (the driver toggles CS once before a read for this reason), so sample k carries the analog input
//   of conversion k - 1.
// - Output: in 2-wire mode (the reset default) SDOA carries channel A only (16 bits; channel B goes out
//   on SDOB, which the board does not wire); in 1-wire mode (CONFIG2 bit 8) SDOA carries A then B,
//   32 bits. Channel A is the current-sense amplifier, B the voltage divider (hw/README.md), so a
//   1-wire word is (I << 16) | V. Codes are 16-bit two's complement.
// - Register access over SDI: a 16-bit word per CS frame, bit 15 = write, bits 14..12 the register,
//   bits 11..0 the value. CONFIG1 (1): REFSEL bit 1 (1 = external reference); CONFIG2 (2): SDO bit 8,
//   RESET bits 7..0 (0xFF hard reset: registers to their defaults; 0x3C soft reset). A read command
//   (bit 15 = 0, register != 0) puts (register << 12) | value in the first 16 bits of the next frame.
// - Timing checked on every frame, each breach counted (never silently accepted): SCLK edges during
//   the 190 ns conversion, a throughput above 4 MSPS (CS falling edges < 250 ns apart), SCLK faster
//   than 80 MHz (falling edges < 12.5 ns apart).
// All converters share CS, SCLK and SDI; each has its own SDOA pin.
//
// The analog inputs come from a waveform: rows of int16 (v0 i0 v1 i1 ... digital), the host
// simulator's front-end layout (powerrig.sim.interposer.frontend). Row r is the input at the r-th conversion the
// PIO clocks (CS driven by PIO0); earlier frames (register set-up from the CPU) convert row 0. The
// digital bits of row r are driven on the digital input pins at that conversion's CS falling edge.

import { GPIOPinState } from 'rp2040js';

const T_CONVERT_NS = 190;
const T_CYCLE_NS = 250;        // 4 MSPS
const T_SCLK_NS = 12.5;        // 80 MHz
const FUNCTION_PIO0 = 6;
const REG_CONFIG1 = 1, REG_CONFIG2 = 2;
const CONFIG1_REFSEL = 1 << 1;
const CONFIG2_SDO_1WIRE = 1 << 8;
const RESET_HARD = 0xff, RESET_SOFT = 0x3c;

const high = (v) => v === GPIOPinState.High || v === GPIOPinState.InputPullUp;

export class AD7380Bank {
  /**
   * mcu: the RP2040; now(): emulated ns; pins: {sclk, cs, sdi (or -1), sdo: [..], dig: [..]};
   * waveform: Int16Array of rows; stride: int16 per row (2 * sdo.length + 1).
   */
  constructor(mcu, now, pins, waveform, stride) {
    this.mcu = mcu;
    this.now = now;
    this.pins = pins;
    this.wave = waveform;
    this.stride = stride;
    this.rows = Math.floor(waveform.length / stride);
    this.n = pins.sdo.length;
    if (stride < 2 * this.n + 1) throw new Error(`waveform stride ${stride} < ${2 * this.n + 1} for ${this.n} converters`);
    this.regs = Array.from({ length: this.n }, () => new Uint16Array(6));
    this.out = new Uint32Array(this.n);       // the frame being shifted out, MSB first
    this.nextOut = new Uint32Array(this.n);   // result of the conversion in progress (next frame's data)
    this.readback = -1;                       // a register read answered in the next frame
    this.csLow = false;
    this.frameStart = -1e18;
    this.lastSclkFall = -1e18;
    this.bitsOut = 0;
    this.sdiWord = 0;
    this.sdiBits = 0;
    this.row = 0;
    this.firstPioFrameSeen = false;
    this.stats = {
      conversions: 0, pio_conversions: 0, frames_cpu: 0, waveform_wraps: 0, register_writes: [],
      register_reads: 0, sclk_during_conversion: 0, conversion_rate_breaches: 0, sclk_too_fast: 0,
      short_frames: 0, writes_to_no_register: 0, first_pio_conversion_ns: null,
    };
    mcu.gpio[pins.cs].addListener((v) => this.onCs(high(v)));
    mcu.gpio[pins.sclk].addListener((v, was) => this.onSclk(high(v), high(was)));
    this.driveDigital(0);
  }

  registers() {
    return this.regs.map((r) => ({ config1: r[REG_CONFIG1], config2: r[REG_CONFIG2],
      one_wire: !!(r[REG_CONFIG2] & CONFIG2_SDO_1WIRE), external_ref: !!(r[REG_CONFIG1] & CONFIG1_REFSEL) }));
  }

  driveDigital(row) {
    const d = this.wave[row * this.stride + this.stride - 1];
    this.pins.dig.forEach((p, i) => this.mcu.gpio[p].setInputValue(((d >> i) & 1) === 1));
  }

  onCs(isHigh) {
    const t = this.now();
    if (!isHigh && !this.csLow) {
      this.csLow = true;
      if (t - this.frameStart < T_CYCLE_NS) this.stats.conversion_rate_breaches++;
      this.frameStart = t;
      this.bitsOut = 0;
      this.sdiWord = 0;
      this.sdiBits = 0;
      // the previous conversion's result (or a register read-back) goes out in this frame
      for (let k = 0; k < this.n; k++) {
        this.out[k] = this.readback >= 0 ? (this.readback << 16) >>> 0 : this.nextOut[k];
      }
      this.readback = -1;
      // and this edge starts the next conversion
      const fromPio = this.mcu.gpio[this.pins.cs].functionSelect === FUNCTION_PIO0;
      let row = 0;
      if (fromPio) {
        if (!this.firstPioFrameSeen) { this.firstPioFrameSeen = true; this.stats.first_pio_conversion_ns = t; }
        row = this.row % this.rows;
        if (row === 0 && this.row > 0) this.stats.waveform_wraps++;
        this.row++;
        this.stats.pio_conversions++;
        this.driveDigital(row);
      } else {
        this.stats.frames_cpu++;
      }
      this.stats.conversions++;
      const base = row * this.stride;
      for (let k = 0; k < this.n; k++) {
        const v = this.wave[base + 2 * k] & 0xffff, i = this.wave[base + 2 * k + 1] & 0xffff;
        const oneWire = this.regs[k][REG_CONFIG2] & CONFIG2_SDO_1WIRE;
        this.nextOut[k] = oneWire ? ((i << 16) | v) >>> 0 : (i << 16) >>> 0;   // 2-wire: B leaves on SDOB
      }
    } else if (isHigh && this.csLow) {
      this.csLow = false;
      if (this.sdiBits >= 16) this.command((this.sdiWord >>> (this.sdiBits - 16)) & 0xffff);
      else if (this.sdiBits > 0) this.stats.short_frames++;
    }
  }

  onSclk(isHigh, wasHigh) {
    if (!this.csLow) return;
    const t = this.now();
    if (!isHigh && wasHigh) {               // falling edge: the next bit out, MSB first
      if (t - this.frameStart < T_CONVERT_NS) this.stats.sclk_during_conversion++;
      if (t - this.lastSclkFall < T_SCLK_NS) this.stats.sclk_too_fast++;
      this.lastSclkFall = t;
      const bit = 31 - this.bitsOut;
      this.bitsOut++;
      for (let k = 0; k < this.n; k++) {
        const b = bit >= 0 ? (this.out[k] >>> bit) & 1 : 0;
        this.mcu.gpio[this.pins.sdo[k]].setInputValue(b === 1);
      }
    } else if (isHigh && !wasHigh && this.pins.sdi >= 0) {   // rising edge: SDI in
      const b = high(this.mcu.gpio[this.pins.sdi].value) ? 1 : 0;
      this.sdiWord = ((this.sdiWord << 1) | b) >>> 0;
      this.sdiBits++;
    }
  }

  command(word) {
    const addr = (word >> 12) & 7, data = word & 0xfff;
    if (word & 0x8000) {
      if (addr < 1 || addr > 5) { this.stats.writes_to_no_register++; return; }
      if (this.stats.register_writes.length < 64) this.stats.register_writes.push(word);
      for (const r of this.regs) {
        if (addr === REG_CONFIG2 && (data & 0xff) === RESET_HARD) { r.fill(0); continue; }
        if (addr === REG_CONFIG2 && (data & 0xff) === RESET_SOFT) { r[REG_CONFIG2] = data & 0xf00; continue; }
        r[addr] = data;
      }
    } else if (addr !== 0) {
      this.stats.register_reads++;
      this.readback = (addr << 12) | this.regs[0][addr];
    }
  }
}
