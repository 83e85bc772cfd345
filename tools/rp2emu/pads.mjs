// The RP2040's pads as the runner wires them, and rp2040js's per-edge GPIO paths done without its getters.
//
// Why: the board's PIO clocks 32 SCLK edges and reads 96 `in pins` per 4 us sample; at each edge
// rp2040js's GPIOPin.setInputValue walks its accessors (irqValue twice, inputEnable, functionSelect)
// and RP2040.gpioValues calls inputValue, with its override switch, on all 30 pins for every `in`.
// These are the same computations on the same fields, in the same order with the same side effects,
// inlined (rp2040js 1.4.1, dist/esm/gpio-pin.js and rp2040.js): the emulation is identical (run.mjs
// --emu-stop's digest), for less host CPU per emulated second (docs/testing.md, "The emulator's host CPU").
import { GPIOPinState } from 'rp2040js';

const IRQ_EDGE_HIGH = 1 << 3, IRQ_EDGE_LOW = 1 << 2, IRQ_LEVEL_HIGH = 1 << 1, IRQ_LEVEL_LOW = 1 << 0;
const PAD_IE = 0x40;              // pad's input enable (GPIOPin.inputEnable)
const FUNCTION_PWM = 4;
const WAIT_PIN = 1;               // rp2040js's WaitType.Pin

/** applyOverride(value, type) of gpio-pin.js: 0 as is, 1 inverted, 2 low, 3 high. */
const override = (value, type) => (type === 0 ? value : type === 1 ? !value : type === 3);

/**
 * Wires the pads: a driven pin reads back its own level (rp2040js changes a pin's input only through
 * setInputValue, so a PIO program that waits on a pin another state machine drives, like the board's
 * followers on SCLK, would wait forever), and installs the inlined paths on this RP2040's instances.
 */
export function wirePads(mcu) {
  const machines = [];
  for (const pio of mcu.pio) for (const m of pio.machines) machines.push(m);
  const gpio = mcu.gpio;
  for (const pin of gpio) {
    pin.setInputValue = setInputValue;
    pin.machines = machines;
    pin.addListener((v) => {
      if (v === GPIOPinState.High || v === GPIOPinState.Low) pin.setInputValue(v === GPIOPinState.High);
    });
  }
  Object.defineProperty(mcu, 'gpioValues', {
    configurable: true,
    get() {
      let result = 0;
      for (let i = 0; i < gpio.length; i++) {
        const p = gpio[i];
        if (override(p.rawInputValue && (p.padValue & PAD_IE) !== 0, (p.ctrl >> 16) & 3)) result |= 1 << i;
      }
      return result;
    },
  });
}

/** GPIOPin.setInputValue (gpio-pin.js), the accessors inlined. */
function setInputValue(value) {
  this.rawInputValue = value;
  const irqOverride = (this.ctrl >> 28) & 3;
  const rawBefore = ((this.irqStatus & this.irqEnableMask) | this.irqForceMask) !== 0;
  if (value && (this.padValue & PAD_IE) !== 0) {
    this.irqStatus |= IRQ_EDGE_HIGH | IRQ_LEVEL_HIGH;
    this.irqStatus &= ~IRQ_LEVEL_LOW;
  } else {
    this.irqStatus |= IRQ_EDGE_LOW | IRQ_LEVEL_LOW;
    this.irqStatus &= ~IRQ_LEVEL_HIGH;
  }
  // irqValue changed: overrides 0 and 1 follow the raw interrupt (1 inverted), 2 and 3 are constant
  if (irqOverride < 2 && (((this.irqStatus & this.irqEnableMask) | this.irqForceMask) !== 0) !== rawBefore) {
    this.rp2040.updateIOInterrupt();
  }
  if ((this.ctrl & 0x1f) === FUNCTION_PWM) this.rp2040.pwm.gpioOnInput(this.index);
  const ms = this.machines, index = this.index;
  for (let k = 0; k < ms.length; k++) {
    const m = ms[k];
    if (m.enabled && m.waiting && m.waitType === WAIT_PIN && m.waitIndex === index) m.checkWait();
  }
}
