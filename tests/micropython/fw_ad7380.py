# board/ad7380.py's register writes, decoded from the pins the way the converter reads them: a frame
# is CS low, SDI latched on each falling SCLK edge, MSB first.
from board import ad7380


class Bus:
    def __init__(self):
        self.cs = 1
        self.sclk = 1
        self.bits = []
        self.frames = []


class Line:
    def __init__(self, bus, name):
        self.bus = bus
        self.name = name
        self.v = 1

    def value(self, v=None):
        if v is None:
            return self.v
        bus = self.bus
        if self.name == "sclk" and self.v == 1 and v == 0 and bus.cs == 0:
            bus.bits.append(bus.sdi.v)
        if self.name == "cs":
            if v == 0:
                bus.bits = []
            elif self.v == 0:
                word = 0
                for b in bus.bits:
                    word = (word << 1) | b
                bus.frames.append((len(bus.bits), word))
            bus.cs = v
        self.v = v


bus = Bus()
cs, sclk, sdi = Line(bus, "cs"), Line(bus, "sclk"), Line(bus, "sdi")
bus.sdi = sdi
ad7380.set_up(cs, sclk, sdi)
assert bus.frames == [(16, 0x8000 | (1 << 12) | 0x002), (16, 0x8000 | (2 << 12) | 0x100)], bus.frames
print("ad7380 ok")
