// The emulated board's USB CDC on a host file descriptor (the master side of a pseudo-terminal).
//
// Why a pty: the host's own serial code (pyserial in powerrig.link) opens the slave side exactly as it
// opens /dev/ttyACM0, so `powerrig stream --port /dev/pts/N` runs unmodified against the emulated board.
// The launcher (emulated_board.py) creates the pty and hands its master to this process as an fd.
// I/O is non-blocking and polled between emulation slices, so the emulator never waits on the host.
import fs from 'node:fs';
import { USBCDC } from 'rp2040js';

const MAX_PENDING = 8 << 20;   // bytes held for a host that does not read (then dropped, counted)

export class CdcBridge {
  constructor(mcu, fd, echo) {
    this.mcu = mcu;
    this.fd = fd;
    this.echo = echo;
    this.cdc = new USBCDC(mcu.usbCtrl);
    this.connected = false;
    this.toDevice = [];          // host bytes not yet in the CDC FIFO
    this.toHost = [];            // device bytes not yet written to the pty
    this.toHostBytes = 0;
    this.buf = Buffer.alloc(4096);
    this.stats = { host_to_device: 0, device_to_host: 0, dropped_for_host: 0, connected_ns: null,
      in_packets: 0, last_in_ns: null, out_reads: 0, held_reads: 0, last_out_ns: null };
    this.cdc.onDeviceConnected = () => { this.connected = true; };
    // the last USB events (a ring), for finding where the device side stops (--usb-trace)
    this.trace = [];
    this.traceOn = false;
    const note = (kind, a, b) => {
      if (!this.traceOn) return;
      this.trace.push([Math.round(mcu.clock.nanos / 1000), kind, a, b]);
      if (this.trace.length > 400) this.trace.splice(0, 100);
    };
    this.note = note;
    const dpram = mcu.usbCtrl.DPRAMUpdated.bind(mcu.usbCtrl);
    mcu.usbCtrl.DPRAMUpdated = (offset, value) => {
      if (offset >= 0x80 && offset <= 0xfc && (value & (1 << 10))) note('arm', (offset - 0x80) >> 2, value & 0x3ff);
      dpram(offset, value);
    };
    const wr = mcu.usbCtrl.onEndpointWrite;
    mcu.usbCtrl.onEndpointWrite = (ep, buf) => { note('sent', ep, buf.length); wr(ep, buf); };
    // A USB host leaves an OUT transfer pending until it has bytes to send. rp2040js's CDC host
    // completes it at once with 0 bytes when its FIFO is empty, and TinyUSB re-arms it: an interrupt
    // every 10 us that ate most of the emulated CPU (a main-loop pass took 20 ms). Hold the read instead.
    const usb = mcu.usbCtrl, read = usb.onEndpointRead;
    this.heldRead = null;
    // --timelog: when each host byte reached the device and each device byte left it, in emulated ns and
    // in the converters' conversion count (the waveform's own clock): the truth a clock fit is checked
    // against (benchmarks/bench_rp2_emulator.py --pings). Lines "o NS ROW BYTES_SO_FAR" (an OUT packet
    // handed to the device, the count after it) and "i NS ROW BYTES_BEFORE LEN" (an IN packet).
    this.timelog = null;
    this.rowOf = () => -1;
    this.outBytes = 0;
    this.inBytes = 0;
    usb.onEndpointRead = (endpoint, size) => {
      if (endpoint === this.cdc.outEndpoint) { this.stats.out_reads++; this.stats.last_out_ns = mcu.clock.nanos; }
      if (endpoint === this.cdc.outEndpoint && this.cdc.txFIFO.itemCount === 0) { this.heldRead = [endpoint, size]; return; }
      logged(endpoint, size);
    };
    const logged = (endpoint, size) => {
      if (endpoint === this.cdc.outEndpoint && this.timelog !== null) {
        this.outBytes += Math.min(size, this.cdc.txFIFO.itemCount);
        this.timelog.push(`o ${mcu.clock.nanos} ${this.rowOf()} ${this.outBytes}`);
      }
      read(endpoint, size);
    };
    this.releaseRead = () => {
      if (this.heldRead && this.cdc.txFIFO.itemCount > 0) { const [e, n] = this.heldRead; this.heldRead = null; logged(e, n); }
    };
    this.cdc.onSerialData = (data) => {
      const b = Buffer.from(data);
      if (this.timelog !== null) {
        this.timelog.push(`i ${mcu.clock.nanos} ${this.rowOf()} ${this.inBytes} ${b.length}`);
        this.inBytes += b.length;
      }
      this.stats.in_packets++;
      this.stats.last_in_ns = mcu.clock.nanos;
      this.stats.device_to_host += b.length;
      if (this.echo) process.stderr.write(b.toString('latin1'));
      if (this.toHostBytes + b.length > MAX_PENDING) { this.stats.dropped_for_host += b.length; return; }
      this.toHost.push(b);
      this.toHostBytes += b.length;
    };
  }

  /** Move bytes both ways without blocking. */
  pump() {
    if (this.fd >= 0) {
      for (;;) {                         // host -> device
        let n = 0;
        try { n = fs.readSync(this.fd, this.buf, 0, this.buf.length, null); } catch (e) {
          if (e.code === 'EAGAIN' || e.code === 'EIO') break;   // nothing, or no host has the port open
          throw e;
        }
        if (n <= 0) break;
        this.stats.host_to_device += n;
        for (let i = 0; i < n; i++) this.toDevice.push(this.buf[i]);
      }
      while (this.toHost.length) {       // device -> host
        const b = this.toHost[0];
        let n = 0;
        try { n = fs.writeSync(this.fd, b); } catch (e) {
          if (e.code === 'EAGAIN' || e.code === 'EIO') break;
          throw e;
        }
        this.toHostBytes -= n;
        if (n < b.length) { this.toHost[0] = b.subarray(n); break; }
        this.toHost.shift();
      }
    }
    // the emulated host controller's FIFO drops bytes when full: feed it only while it has room
    const fifo = this.cdc.txFIFO;
    let k = 0;
    while (k < this.toDevice.length && fifo.itemCount < fifo.size) this.cdc.sendSerialByte(this.toDevice[k++]);
    if (k) this.toDevice.splice(0, k);
    this.releaseRead();
  }

  send(bytes) {
    for (const b of Buffer.from(bytes, 'latin1')) this.toDevice.push(b);
  }
}
