"""The simulated interposer's USB OUT endpoint, as its own small process.

On the board, the USB peripheral takes the host's bytes and its interrupt stamps them at once,
whatever the firmware is doing. In the simulator a thread in the sim's process did that, and it had
to win the GIL from the device thread first: 90 us to 800 us late (median 170 us, measured against
the host's send time), noise on exactly the host-to-device latency floor the clock fit rests on,
which real hardware does not have (docs/link.md). This process holds no GIL anyone else wants: it
waits on the pty, stamps each read with CLOCK_MONOTONIC (the same clock in every process) and passes
(stamp, length, bytes) down a pipe to the sim.

Run by path with ``python -S usb_rx.py PTY_FD PIPE_FD SIM_PID`` (standard library only, so it starts
in milliseconds). It exits when the pipe's reader is gone or the sim has died (SIM_PID is passed, not
read at start: a sim killed while this starts would otherwise go unnoticed). It waits on the pipe as
well as the pty: the kernel closes a killed sim's end of the pipe at once, and this process, holding
the pty's master, must go with it; else the port lingers for up to a poll's timeout and a host that
reconnects in that moment opens a dead board's port (a GUI test counted a second reconnect so).
"""
import errno
import os
import select
import struct
import sys
import time

RECORD = struct.Struct("<dI")    # monotonic seconds, byte count; the bytes follow


def relay(pty_fd: int, pipe_fd: int, parent: int) -> None:
    poll = select.poll()
    poll.register(pty_fd, select.POLLIN)
    poll.register(pipe_fd, 0)                # POLLERR: the sim's end of the pipe closed (it died)
    while os.getppid() == parent:            # else the sim died without closing us (SIGKILL)
        try:
            ready = dict(poll.poll(500))
        except InterruptedError:
            continue
        if ready.get(pipe_fd):
            return
        if not ready.get(pty_fd, 0) & select.POLLIN:
            if ready.get(pty_fd):            # POLLHUP alone: no one has the port open: wait for a host
                time.sleep(0.05)
            continue
        try:
            data = os.read(pty_fd, 4096)
        except BlockingIOError:
            continue
        except OSError as e:
            if e.errno == errno.EIO:         # no one has the port open: wait for a host
                time.sleep(0.05)
                continue
            return
        if not data:
            return
        try:
            os.write(pipe_fd, RECORD.pack(time.monotonic(), len(data)) + data)
        except (BrokenPipeError, OSError):
            return


if __name__ == "__main__":
    relay(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
