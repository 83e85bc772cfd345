"""The host's side of the command link for the unix-port scripts (fw_device, fw_burst, fw_link): what
the host sent waits in ``inbox`` as whole writes, handed out as the board's ``read_into`` asks (a write
may be split across reads), and every frame the board writes is kept in ``sent``."""


class HostBytes:
    def __init__(self):
        self.inbox = []
        self.sent = []

    def read_into(self, buf, at, room):
        if not self.inbox:
            return 0
        d = self.inbox[0]
        n = min(room, len(d))
        buf[at:at + n] = d[:n]
        if n < len(d):
            self.inbox[0] = d[n:]
        else:
            self.inbox.pop(0)
        return n

    def write(self, buf, n=-1):
        self.sent.append(bytes(buf[:n] if n >= 0 else buf))
