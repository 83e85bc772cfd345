// The emulated interposer board: MicroPython's rp2 image on rp2040js, firmware/ in its flash
// filesystem, AD7380s at its pins, its USB CDC on a host pseudo-terminal. Normally started by
// emulated_board.py (which builds the flash filesystem, the waveform and the pty); docs/emulator.md.
//
//   node run.mjs --fw firmware.bin [--fs lfs.bin --fs-offset 0xA0000] [--waveform wave.i16 --stride 7]
//       [--pins sclk=2,cs=3,sdi=7,sdo=4:5:6,dig=10:11:12] [--pty-fd 3] [--stats stats.json]
//       [--rate 0.05] [--wall 600] [--echo] [--usb-trace] [--pcs N [--stack-words W]] [--timelog FILE] [--vref 2.5]
//       [--emu-stop S]
//
// --rate R: emulated seconds per wall second at most (0: as fast as it goes). A steady rate is a steady
//           crystal for the host's clock fit (docs/emulator.md, "Time").
// --pcs N: the N most sampled PCs in the stats (pc_top); --stack-words W also counts, at each sample, the
//           words among the W on top of the stack that point into flash (return addresses, mostly:
//           stack_top), so the callers of a hot function show (symbolise both with the image's ELF:
//           arm-none-eabi-addr2line -f -e firmware.elf ADDR).
// --emu-stop S: exit after the first slice that ends at or past S emulated seconds, the stats carrying
//           `digest`, a hash of the emulated state (SRAM, USB DPRAM, core and PIO registers, clock, PIO steps,
//           the converters' counters): without a host on the pty the run is deterministic, so a change
//           to this runner that keeps the emulation identical keeps the digest (docs/testing.md).
// Prints one line "ready" on stdout once the board's USB is enumerated; stats (JSON) are written to
// --stats every half second of wall time, on SIGUSR1 and on exit (SIGTERM, SIGINT, --wall).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Simulator } from 'rp2040js';
import { Lockstep } from './scheduler.mjs';
import { wirePads } from './pads.mjs';
import { AD7380Bank } from './ad7380.mjs';
import { CdcBridge } from './cdc_bridge.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const args = {};
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (!a.startsWith('--')) continue;
  const v = process.argv[i + 1];
  if (v !== undefined && !v.startsWith('--')) { args[a.slice(2)] = v; i++; } else args[a.slice(2)] = '1';
}
const die = (msg) => { process.stderr.write(`rp2emu: ${msg}\n`); process.exit(2); };
if (!args.fw) die('--fw FIRMWARE.bin is required (scripts/build_rp2_mp.py builds it)');
const bootromPath = args.bootrom || path.join(HERE, 'bootrom-b1.mjs');
if (!fs.existsSync(bootromPath)) die(`boot ROM ${bootromPath} missing: copy ../shared/vendor/rp2040js-bootrom-b1.ts there (emulated_board.py does)`);
const { bootromB1 } = await import(bootromPath);

const sim = new Simulator();
const mcu = sim.rp2040;
mcu.logger = { debug() {}, info() {}, warn() {}, error(c, m) { process.stderr.write(`[emu error] ${c} ${m}\n`); } };
mcu.loadBootrom(bootromB1);
mcu.flash.set(fs.readFileSync(args.fw), 0);
if (args.fs) mcu.flash.set(fs.readFileSync(args.fs), Number(args['fs-offset'] || 0xa0000));
mcu.core.PC = 0x10000000;

const clock = new Lockstep(sim);

// exceptions taken, by number (16 + IRQ; 15 SysTick): where the emulated CPU's time goes
const exceptions = {};
const entry = mcu.core.exceptionEntry.bind(mcu.core);
mcu.core.exceptionEntry = (n) => { exceptions[n] = (exceptions[n] || 0) + 1; return entry(n); };

// ---- the pads: a driven pin reads back its own level (pads.mjs) ----
wirePads(mcu);

// ---- the converters and the digital inputs at the pins ----
let adc = null;
if (args.waveform) {
  const o = Object.fromEntries(String(args.pins || 'sclk=2,cs=3,sdi=-1,sdo=4:5:6,dig=10:11:12')
    .split(',').map((kv) => kv.split('=')));
  const pins = { sclk: Number(o.sclk), cs: Number(o.cs), sdi: Number(o.sdi ?? -1),
    sdo: o.sdo.split(':').map(Number), dig: o.dig ? o.dig.split(':').map(Number) : [] };
  const raw = fs.readFileSync(args.waveform);
  const wave = new Int16Array(raw.buffer, raw.byteOffset, raw.length >> 1);
  adc = new AD7380Bank(mcu, () => clock.nowNs(), pins, wave, Number(args.stride || 2 * pins.sdo.length + 1));
}

// ---- the RP2's own ADC: the converters' reference at GPIO 26 (ADC0), what the self-test reads
// (board.rp2350.Board.vref_v); --vref V, default the interposer's 2.5 V (rp2040js reads 0 V there) ----
mcu.adc.channelValues[0] = Math.round(Number(args.vref ?? 2.5) / 3.3 * 4095);

// ---- USB CDC <-> pty ----
const usb = new CdcBridge(mcu, args['pty-fd'] !== undefined ? Number(args['pty-fd']) : -1, !!args.echo);
if (args.timelog) {
  usb.timelog = [];
  usb.rowOf = () => (adc ? adc.row : -1);
}
if (args['usb-trace']) {
  usb.traceOn = true;
  const entry2 = mcu.core.exceptionEntry.bind(mcu.core);
  mcu.core.exceptionEntry = (n) => { if (n === 16 + 5) usb.note('irq', mcu.usbCtrl.buffStatus, mcu.usbCtrl.intRaw); return entry2(n); };
}

// ---- stats ----
const t0 = Date.now();
let readyAt = null;
function stats() {
  const wall = (Date.now() - t0) / 1000, emu = sim.clock.nanos / 1e9;
  return {
    wall_s: wall, emu_s: emu, emu_per_wall: wall > 0 ? emu / wall : 0, ready_emu_s: readyAt,
    cpu_s: (() => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; })(),
    clk_sys_hz: mcu.clkSys, rate, exceptions, pace_slip_s: paceSlipMs / 1000, pio_steps: clock.pioSteps, usb: usb.stats,
    adc: adc ? { ...adc.stats, registers: adc.registers() } : null,
    usb_ctrl: { int_raw: mcu.usbCtrl.intRaw, int_enable: mcu.usbCtrl.intEnable, buff_status: mcu.usbCtrl.buffStatus,
      held_read: !!usb.heldRead, pending_irqs: mcu.core.pendingInterrupts, enabled_irqs: mcu.core.enabledInterrupts },
    usb_trace: usb.trace.slice(-120),
    pc_top: top(pcHist),
    stack_top: top(stackHist),
    digest: emuStop ? digest() : undefined,
  };
}
function digest() {
  const h = crypto.createHash('sha256');
  h.update(mcu.sram); h.update(mcu.usbDPRAM);
  h.update(JSON.stringify([Array.from(mcu.core.registers), sim.clock.nanos, clock.sysCycles, clock.pioSteps,
    exceptions, adc && adc.stats, usb.stats, mcu.pio.map((p) => p.machines.map((m) => [m.pc, m.x, m.y, m.cycles]))]));
  return h.digest('hex');
}
function top(hist) {
  return [...hist.entries()].sort((a, b) => b[1] - a[1]).slice(0, args.pcs === '1' ? 24 : Number(args.pcs))
    .map(([pc, n]) => [pc.toString(16), n]);
}
function writeStats() {
  if (args.timelog && usb.timelog.length) { fs.appendFileSync(args.timelog, usb.timelog.join('\n') + '\n'); usb.timelog = []; }
  if (!args.stats) return;
  const tmp = `${args.stats}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(stats()));
  fs.renameSync(tmp, args.stats);
}
function finish(code) { writeStats(); process.exit(code); }
process.on('SIGTERM', () => finish(0));
process.on('SIGINT', () => finish(0));
// SIGUSR1: the stats and the time log written now (emulated_board.py flush_log: a host that waits for
// them reads them at once instead of sleeping past the half-second write)
process.on('SIGUSR1', () => writeStats());
// SIGUSR2: the emulated SRAM to <stats>.sram (debugging the firmware's state with its ELF's symbols)
process.on('SIGUSR2', () => { if (args.stats) fs.writeFileSync(`${args.stats}.sram`, mcu.sram); });

// ---- main loop: slices of emulated time, I/O between them, paced to --rate ----
const rate = Number(args.rate || 0);
const wallLimit = Number(args.wall || 0) * 1000;
const emuStop = Number(args['emu-stop'] || 0) * 1e9;
let lastStats = 0;
function loop() {
  const turnStart = Date.now();
  while (Date.now() - turnStart < 20) {
    clock.slice(20000);
    if (args.pcs) { const pc = mcu.core.PC & ~1; pcHist.set(pc, (pcHist.get(pc) || 0) + 1); sampleStack(); }
    usb.pump();
    if (emuStop && sim.clock.nanos >= emuStop) finish(0);
  }
  if (usb.connected && readyAt === null) {
    readyAt = sim.clock.nanos / 1e9;
    process.stdout.write('ready\n');
  }
  const now = Date.now();
  if (now - lastStats > 500) { lastStats = now; writeStats(); }
  if (wallLimit && now - t0 > wallLimit) { process.stderr.write('rp2emu: --wall limit reached\n'); finish(3); }
  let wait = 0;
  if (rate > 0) {
    // ahead of the pace: sleep. Behind it (a slow stretch): never race to catch up, which would bend
    // the emulated clock's line twice; move the pace's origin instead (counted as pace_slips).
    wait = (sim.clock.nanos / 1e9) / rate * 1000 - (now - paceOrigin);
    if (wait < -200) { paceOrigin += -200 - wait; paceSlipMs += -200 - wait; wait = -200; }
  }
  if (wait > 1) setTimeout(loop, Math.min(wait, 50)); else setImmediate(loop);
}
let paceOrigin = t0, paceSlipMs = 0;
const pcHist = new Map(), stackHist = new Map();
const stackWords = Number(args['stack-words'] || 0);
function sampleStack() {
  const sp = mcu.core.registers[13] >>> 0;
  for (let k = 0; k < stackWords; k++) {
    const w = mcu.readUint32(sp + 4 * k) >>> 0;
    if (w >= 0x10000000 && w < 0x10200000) { const a = w & ~1; stackHist.set(a, (stackHist.get(a) || 0) + 1); }
  }
}
loop();
