##
## powerrig timeline decoder (libsigrokdecode API v3). MIT licence, part of powerrig.
##

import sigrokdecode as srd

PHASE, NVME, LABEL, GAP, PS_VALID, PS_B0 = range(6)
PS_BITS = 5                 # NVMe power states 0..31

A_PHASE, A_NVME, A_PS, A_GAP, A_LABEL, A_WARN = range(6)


class Decoder(srd.Decoder):
    api_version = 3
    id = 'powerrig_timeline'
    name = 'powerrig timeline'
    longname = 'powerrig capture timeline'
    desc = 'fio phases, nvme-cli commands and NVMe power states of a powerrig export.'
    license = 'mit'
    inputs = ['logic']
    outputs = []
    tags = ['Debug/trace']
    channels = (
        {'id': 'phase', 'name': 'PHASE', 'desc': 'High during each fio phase'},
        {'id': 'nvme', 'name': 'NVME', 'desc': 'High during each nvme-cli command'},
        {'id': 'label', 'name': 'LABEL', 'desc': 'Event names, UART 8N1 at one bit per sample'},
    )
    optional_channels = (
        {'id': 'gap', 'name': 'GAP', 'desc': 'High in lost intervals'},
        {'id': 'ps_valid', 'name': 'PS_VALID', 'desc': 'High where the power state is known'},
    ) + tuple({'id': 'ps_b%d' % k, 'name': 'PS_B%d' % k, 'desc': 'Power state bit %d' % k}
              for k in range(PS_BITS))
    annotations = (
        ('phase', 'fio phase'),
        ('nvme', 'nvme-cli command'),
        ('power-state', 'Power state'),
        ('gap', 'Lost intervals'),
        ('label', 'Name on LABEL'),
        ('warning', 'Warning'),
    )
    annotation_rows = (
        ('phases', 'Phases', (A_PHASE,)),
        ('commands', 'Commands', (A_NVME,)),
        ('power-states', 'Power states', (A_PS,)),
        ('gaps', 'Gaps', (A_GAP,)),
        ('labels', 'Labels', (A_LABEL,)),
        ('warnings', 'Warnings', (A_WARN,)),
    )

    def __init__(self):
        self.reset()

    def reset(self):
        self.events = []        # [lane, ss, es, done] in order of their rising edges
        self.labels = []        # names in order of arrival
        self.open = {}          # lane -> index into events
        self.rx = None          # [ss of the name, bytes, next bit sample, bit count, byte]
        self.name_ss = None
        self.gap_ss = None
        self.ps = None          # (ss, value) of the power state being shown
        self.name_bytes = []

    def start(self):
        self.out_ann = self.register(srd.OUTPUT_ANN)

    # ---- events and their names ----------------------------------------------------------------
    def emit_ready(self):
        for k, ev in enumerate(self.events):
            lane, ss, es, done = ev
            if done or es is None or k >= len(self.labels):
                continue
            ev[3] = True
            name = self.labels[k]
            if lane == PHASE:
                self.put(ss, es, self.out_ann, [A_PHASE, [name, 'phase']])
            else:
                self.put(ss, es, self.out_ann, [A_NVME, [name, 'nvme']])

    def edge(self, lane, level):
        if level:
            self.open[lane] = len(self.events)
            self.events.append([lane, self.samplenum, None, False])
        elif lane in self.open:
            self.events[self.open.pop(lane)][2] = self.samplenum
            self.emit_ready()

    # ---- LABEL: UART 8N1, one bit per sample ---------------------------------------------------
    def label_bit(self, level):
        rx = self.rx
        n = rx[3]
        if n < 8:
            rx[4] |= level << n
        elif not level:            # stop bit low: framing error, drop the name being received
            self.put(rx[0], self.samplenum + 1, self.out_ann, [A_WARN, ['LABEL framing error']])
            self.rx = None
            self.name_ss = None
            self.name_bytes = []
            return
        else:
            self.name_bytes.append(rx[4])
            if rx[4] == 0x0A:
                text = bytes(self.name_bytes[:-1]).decode('utf-8', 'replace')
                self.put(self.name_ss, self.samplenum + 1, self.out_ann, [A_LABEL, [text]])
                self.labels.append(text)
                self.name_bytes = []
                self.name_ss = None
                self.emit_ready()
            self.rx = None
            return
        rx[3] += 1
        rx[2] += 1

    # ---- power state ---------------------------------------------------------------------------
    def ps_value(self, pins):
        if pins[PS_VALID] != 1:
            return None
        v = 0
        for k in range(PS_BITS):
            if pins[PS_B0 + k] == 1:
                v |= 1 << k
        return v

    def ps_update(self, pins):
        v = self.ps_value(pins)
        cur = self.ps[1] if self.ps else None
        if v == cur:
            return
        if self.ps is not None and self.ps[1] is not None:
            self.put(self.ps[0], self.samplenum, self.out_ann, [A_PS, ['PS%d' % self.ps[1]]])
        self.ps = (self.samplenum, v)

    # ---- main loop -----------------------------------------------------------------------------
    def decode(self):
        # An unassigned optional channel reads 0xff. (has_channel() is not used: in
        # libsigrokdecode 0.5.3 it returns True/False without a reference, which
        # crashes the interpreter at exit.)
        pins = self.wait()
        watch = [c for c in (PHASE, NVME, GAP) if pins[c] in (0, 1)]
        ps_chans = [c for c in [PS_VALID] + [PS_B0 + k for k in range(PS_BITS)] if pins[c] in (0, 1)]
        prev = list(pins)
        for c in watch:                        # spans already high at the first sample start there
            if pins[c]:
                self.level(c, 1)
        self.ps_update(pins)
        while True:
            conds = [{c: 'e'} for c in watch + ps_chans]
            if self.rx is None:
                conds.append({LABEL: 'e'})     # both edges: prev[LABEL] stays exact, so a start bit
                                               # after a broken byte is still seen
            else:
                conds.append({'skip': self.rx[2] - self.samplenum})
            pins = self.wait(conds)
            for c in watch:
                if pins[c] != prev[c]:
                    self.level(c, pins[c])
            if ps_chans and any(pins[c] != prev[c] for c in ps_chans):
                self.ps_update(pins)
            if self.rx is not None and self.samplenum == self.rx[2]:
                self.label_bit(pins[LABEL])
            elif self.rx is None and prev[LABEL] == 1 and pins[LABEL] == 0:
                self.rx = [self.samplenum, None, self.samplenum + 1, 0, 0]
                if self.name_ss is None:
                    self.name_ss = self.samplenum
            prev = list(pins)

    def level(self, c, v):
        if c == GAP:
            if v:
                self.gap_ss = self.samplenum
            elif self.gap_ss is not None:
                n = self.samplenum - self.gap_ss
                self.put(self.gap_ss, self.samplenum, self.out_ann,
                         [A_GAP, ['%d lost intervals' % n, 'lost', 'L']])
                self.gap_ss = None
        else:
            self.edge(c, v)
