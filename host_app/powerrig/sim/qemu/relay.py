"""The drive host's door: a unix socket in front of the guest's one agent port, so that many
programs (nvme-cli and fio runners, the guard, a second shell) reach the guest at once, as sshd lets
many ssh sessions into one machine.

One JSON request per connection, one JSON reply:
  {"op": "run", "script": "...", "stdin": base64 | null, "timeout": s}
      -> {"ok": true, "rc": n, "stdout": base64, "stderr": base64, "t_guest_start": s, "t_guest_end": s}
  {"op": "sync", "rounds": n} -> {"ok": true, "t_guest": s, "samples": [[t_send, t_guest, t_recv], ...]}
      (the guest's clock, read on arrival; each sample bracketed by this host's clock at the agent's
      socket, so the relay's own delays and its client's stay out of the bounds; t_recv less the
      guest's own time between the request's arrival and its answer: AgentLink.sync_sample)
  failures       -> {"ok": false, "error": "..."}
The client is powerrig.dut.agent (it shares no code with this side).
"""
from __future__ import annotations

import base64
import json
import os
import socketserver
import threading

from powerrig.sim.qemu.machine import AgentLink, GuestError


class Relay:
    def __init__(self, agent: AgentLink, path: str):
        self.agent, self.path = agent, str(path)
        self._server = None

    def start(self) -> "Relay":
        if os.path.exists(self.path):
            os.unlink(self.path)
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                try:
                    reply = outer.handle(json.loads(self.rfile.readline()))
                except (ValueError, TypeError, KeyError) as e:
                    reply = {"ok": False, "error": f"bad request: {e}"}
                self.wfile.write((json.dumps(reply) + "\n").encode())

        class Server(socketserver.ThreadingUnixStreamServer):
            daemon_threads = True

        self._server = Server(self.path, Handler)
        threading.Thread(target=self._server.serve_forever, name="qemu-relay", daemon=True).start()
        return self

    def handle(self, req: dict) -> dict:
        try:
            if req.get("op") == "sync":
                samples = [self.agent.sync_sample() for _ in range(max(1, min(int(req.get("rounds", 1)), 100)))]
                return {"ok": True, "t_guest": samples[-1][1], "samples": samples}
            if req.get("op") == "run":
                stdin = base64.b64decode(req["stdin"]) if req.get("stdin") else None
                r = self.agent.run(str(req["script"]), stdin, req.get("timeout"))
                return {"ok": True, "rc": r.rc, "stdout": base64.b64encode(r.stdout).decode(),
                        "stderr": base64.b64encode(r.stderr).decode(), "t_guest_start": r.t_guest_start,
                        "t_guest_end": r.t_guest_end}
            return {"ok": False, "error": f"unknown op {req.get('op')!r}"}
        except (GuestError, TimeoutError) as e:
            return {"ok": False, "error": str(e)}

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if os.path.exists(self.path):
            os.unlink(self.path)
