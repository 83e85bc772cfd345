"""Is the drive still there? A watcher on the drive host while a workload runs: a removed controller
(hot-removal, a link down, a drive pulled) and its return become events with their times, so a
workload it cut short is recorded as interrupted by removal, not as lost data.

The watcher is a POSIX shell loop run on the drive host beside fio (through the same transport):
it notes each change of /sys/class/nvme/CTRL with the host's clock, mapped here onto this host's.
A drive gone when the workload ends is waited for (GRACE_S), so its return is on the timeline too.
"""
from __future__ import annotations

import threading

from powerrig.core.timeline import NOTE, Event
from powerrig.dut.commands import helper_argv

POLL_S = 0.02
GRACE_S = 15.0     # after the workload, how long a drive that went away is waited for to come back
# one line (the door refuses control characters in a command's words, newlines included)
# $1: the controllers, comma-separated (every one must be there for the drive to be); $4: the drive host's
# sysfs root (/sys; the virtual rig's tree stands for it)
SCRIPT = ('cs=$1; stop=$2; grace=$3; sys=$4; p=1; n=0; '
          'now() { if [ -n "$EPOCHREALTIME" ]; then echo "$EPOCHREALTIME"; else date +%s.%N; fi; }; '
          'while :; do s=1; IFS=,; for c in $cs; do if [ ! -e "$sys/class/nvme/$c" ]; then s=0; fi; done; '
          'unset IFS; '
          'if [ "$s" != "$p" ]; then echo "$(now) $s"; fi; p=$s; '
          'if [ -e "$stop" ]; then if [ "$s" = 1 ]; then break; fi; n=$((n + 1)); '
          'if [ "$n" -gt "$grace" ]; then break; fi; fi; '
          'usleep %d 2>/dev/null || sleep 0.02; done').replace("%d", str(int(POLL_S * 1e6)))


class PresenceWatch:
    """``with PresenceWatch(remote, "nvme0") as w: ...``; then ``w.changes``: [(host UTC, present)].
    ``controller``: one name or several (a namespace reached through two controllers): the drive is
    there while every one of them is. ``sys_root``: the drive host's sysfs as its guard view reads it."""

    def __init__(self, remote, controller, sys_root: str = "/sys"):
        names = (controller,) if isinstance(controller, str) else tuple(controller)
        if not names or any(not n.startswith("nvme") or not n[4:].isdigit() for n in names):
            raise ValueError(f"not NVMe controller names: {names!r}")
        self.remote, self.controller, self._names, self._sys = remote, ", ".join(names), names, sys_root
        self.changes: list[tuple[float, bool]] = []
        self._stop_file = f"/tmp/.powerrig-presence-{id(self)}"
        self._thread = threading.Thread(target=self._run, name="presence", daemon=True)
        self.error: str | None = None

    def _run(self) -> None:
        try:
            out = self.remote.run(helper_argv("sh", "-c", SCRIPT, "sh", ",".join(self._names), self._stop_file,
                                              str(int(GRACE_S / POLL_S)), self._sys), timeout=None)
        except Exception as e:  # noqa: BLE001 - a watcher that fails must not end the workload
            self.error = str(e)
            return
        for line in out.decode(errors="replace").splitlines():
            t, _, s = line.partition(" ")
            try:
                self.changes.append((self.remote.to_host(float(t)), s.strip() == "1"))
            except ValueError:
                continue

    def __enter__(self) -> "PresenceWatch":
        self.remote.run(helper_argv("rm", "-f", self._stop_file))
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.remote.run(helper_argv("touch", self._stop_file))
        except Exception as e:  # noqa: BLE001
            self.error = str(e)
        self._thread.join(GRACE_S + 30.0)
        try:
            self.remote.run(helper_argv("rm", "-f", self._stop_file))
        except Exception:  # noqa: BLE001
            pass

    @property
    def removed(self) -> bool:
        return any(not present for _, present in self.changes)

    def events(self) -> list[Event]:
        """A NOTE per change: "drive removed" / "drive back", at the time the drive host saw it."""
        return [Event(NOTE, "drive back" if present else "drive removed", t, t, ok=True,
                      meta={"controller": self.controller, "present": present, "removal": True})
                for t, present in self.changes]
