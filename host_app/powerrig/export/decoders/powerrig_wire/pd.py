##
## powerrig wire protocol decoder (libsigrokdecode API v3). MIT licence, part of powerrig.
##

import binascii
import json
import sigrokdecode as srd

SYNC = (0xA5, 0x5A)
VERSION = 1
HEADER = 18
MAX_PAYLOAD = 2048
TYPES = {1: 'DATA', 2: 'COMMAND', 3: 'REPLY', 4: 'BURST', 5: 'NOTICE'}
FLAGS = ((0x01, 'OVERRUN'), (0x02, 'LAST'), (0x04, 'RESTART'))
DIRS = ('rx', 'tx')

# annotation classes: per direction (rx = 0, tx = 1) a field, a frame and a warning class
A_FIELD, A_FRAME, A_WARN = range(3)


def ann(rxtx, kind):
    return 3 * rxtx + kind


def flag_text(f):
    names = [n for bit, n in FLAGS if f & bit]
    if f & ~0x07:
        names.append('0x%02X' % (f & ~0x07))
    return '|'.join(names) if names else '-'


def payload_text(ftype, count, payload):
    if ftype == 1:
        return '%d records' % count
    if ftype == 4:
        words = count or 1
        return '%d samples x %d words' % (len(payload) // 2 // words, count)
    text = bytes(payload).decode('utf-8', 'replace')
    try:
        json.loads(text)
    except ValueError:
        return 'not JSON: ' + text
    return text


class Decoder(srd.Decoder):
    api_version = 3
    id = 'powerrig_wire'
    name = 'powerrig wire'
    longname = 'powerrig interposer wire protocol'
    desc = 'Frames of the powerrig interposer link (sync, type, sequence, length, CRC).'
    license = 'mit'
    inputs = ['uart']
    outputs = []
    tags = ['Embedded/industrial']
    annotations = tuple(
        (d + '-' + k, d.upper() + ' ' + desc) for d in DIRS
        for k, desc in (('field', 'frame fields'), ('frame', 'frames'), ('warning', 'warnings')))
    annotation_rows = tuple(
        (d + '-' + k + 's', d.upper() + ' ' + k + 's', (ann(r, c),)) for r, d in enumerate(DIRS)
        for k, c in (('field', A_FIELD), ('frame', A_FRAME), ('warning', A_WARN)))

    def __init__(self):
        self.reset()

    def reset(self):
        self.buf = ([], [])         # per direction: [(byte, ss, es)]
        self.junk = ([None, 0], [None, 0])   # per direction: ss and count of bytes outside frames

    def start(self):
        self.out_ann = self.register(srd.OUTPUT_ANN)

    def put_ann(self, ss, es, rxtx, kind, texts):
        self.put(ss, es, self.out_ann, [ann(rxtx, kind), texts])

    def decode(self, ss, es, data):
        ptype, rxtx, pdata = data
        if ptype != 'FRAME':
            return
        value, valid = pdata
        buf = self.buf[rxtx]
        if not valid:
            self.put_ann(ss, es, rxtx, A_WARN, ['UART framing error', 'framing'])
        buf.append((value if valid else -1, ss, es))
        self.scan(rxtx)

    def drop(self, rxtx, n):
        """Move n bytes on: they are outside any frame."""
        buf, junk = self.buf[rxtx], self.junk[rxtx]
        if n <= 0:
            return
        if junk[0] is None:
            junk[0] = buf[0][1]
        junk[1] += n
        junk.append(buf[n - 1][2])
        del buf[:n]

    def flush_junk(self, rxtx):
        junk = self.junk[rxtx]
        if junk[0] is not None:
            n = junk[1]
            self.put_ann(junk[0], junk[-1], rxtx, A_WARN,
                         ['%d byte%s outside a frame' % (n, '' if n == 1 else 's'), 'junk'])
        self.junk = tuple([None, 0] if k == rxtx else j for k, j in enumerate(self.junk))

    def scan(self, rxtx):
        buf = self.buf[rxtx]
        while True:
            at = next((k for k in range(len(buf) - 1) if buf[k][0] == SYNC[0] and buf[k + 1][0] == SYNC[1]), None)
            if at is None:
                keep = 1 if buf and buf[-1][0] == SYNC[0] else 0
                self.drop(rxtx, len(buf) - keep)
                return
            self.drop(rxtx, at)
            if len(buf) < HEADER:
                return
            b = [x[0] for x in buf[:HEADER]]
            length = b[6] | b[7] << 8
            if b[2] != VERSION or length > MAX_PAYLOAD:
                why = ('version %d, not %d' % (b[2], VERSION)) if b[2] != VERSION else \
                    ('length %d > %d' % (length, MAX_PAYLOAD))
                self.flush_junk(rxtx)
                self.put_ann(buf[0][1], buf[HEADER - 1][2], rxtx, A_WARN, ['not a frame: ' + why, 'bad header'])
                self.drop(rxtx, 1)
                continue
            end = HEADER + length
            if len(buf) < end + 4:
                return
            self.flush_junk(rxtx)
            self.frame(rxtx, buf[:end + 4], length)

    def frame(self, rxtx, fb, length):
        b = [x[0] for x in fb]
        end = HEADER + length
        got = b[end] | b[end + 1] << 8 | b[end + 2] << 16 | b[end + 3] << 24
        want = binascii.crc32(bytes(x & 0xFF for x in b[2:end])) & 0xFFFFFFFF
        ss, es = fb[0][1], fb[-1][2]
        ftype = b[3]
        tname = TYPES.get(ftype, 'type %d' % ftype)
        seq = b[8] | b[9] << 8
        if got != want or -1 in b:
            self.put_ann(ss, es, rxtx, A_WARN, ['CRC error: frame says %08x, bytes give %08x' % (got, want),
                                                'CRC error'])
            self.drop(rxtx, 1)      # like the host: a bad frame costs one byte, then look again
            return
        index = 0
        for k in range(8):
            index |= b[10 + k] << (8 * k)

        def field(a, z, texts):
            self.put_ann(fb[a][1], fb[z - 1][2], rxtx, A_FIELD, texts)

        field(0, 2, ['sync A5 5A', 'sync'])
        field(2, 3, ['version %d' % b[2], 'v%d' % b[2]])
        field(3, 4, [tname])
        field(4, 5, ['flags ' + flag_text(b[4]), flag_text(b[4])])
        field(5, 6, ['count %d' % b[5], '%d' % b[5]])
        field(6, 8, ['length %d' % length, '%d' % length])
        field(8, 10, ['seq %d' % seq, '%d' % seq])
        field(10, 18, ['index %d' % index, '%d' % index])
        if length:
            field(HEADER, end, [payload_text(ftype, b[5], b[HEADER:end]), '%d bytes' % length])
        field(end, end + 4, ['CRC %08x ok' % got, 'CRC ok'])
        self.put_ann(ss, es, rxtx, A_FRAME, ['%s seq %d, %d bytes, CRC ok' % (tname, seq, length),
                                             '%s %d' % (tname, seq)])
        del self.buf[rxtx][:end + 4]
