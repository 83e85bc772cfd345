"""The capture file layout in one place: signal names, user-data tags, annotation groups.

A capture is a JLS v2 file. Every per-interval column of an IntervalBlock becomes a fixed-rate
float32 signal at the interval rate (1 ms intervals -> 1000 Hz), so JLS viewers can open it and the
file's summary levels answer long-range statistics fast. Structured records (metadata, events,
gaps, clock anchors, the close record) are JSON documents in user-data chunks tagged below; user data
survives an unclean stop (kill -9), the JLS UTC track's tail does not, so placement relies on the
clock anchors in user data.
"""
from __future__ import annotations

from powerrig.core import names

FORMAT = "powerrig-capture"
FORMAT_VERSION = 1

SOURCE_ID = 1

# user-data chunk_meta tags (u16)
UD_METADATA = 0x101      # JSON: the capture's metadata (written once, when the first block arrives)
UD_METADATA_UPDATE = 0x102  # JSON: keys merged into the metadata (drive identity learnt later, ...)
UD_EVENT = 0x103         # JSON: one Event.to_dict(), written when the event has ended (or at close)
UD_GAP = 0x104           # JSON: {sample_id, intervals, raw_index, reason}
UD_CLOCK = 0x105         # JSON: {sample_id, raw_index, utc, model}: one anchor of the UTC track
UD_SEGMENT = 0x106       # JSON: {sample_id, raw_index}: the device's index restarted here
UD_CLOSE = 0x107         # JSON: {stats, totals, length}: written by a clean close only

# annotation group ids (viewers show them; the JSON in user data is the authoritative record)
GROUP_EVENT = 1
GROUP_GAP = 2

# per-rail columns of an IntervalBlock and their units
RAIL_FIELDS = tuple((f, f.unit) for f in names.RAIL_FIELDS)
DIGITAL_FIELDS = names.DIGITAL_FIELDS
rail_signal = names.rail_signal
TOTAL_POWER = names.TOTAL_POWER


def signal_names(rails) -> list[tuple[str, str]]:
    """(name, units) of every float signal for these rails, in signal-id order."""
    out = [(rail_signal(f, r), u) for r in rails for f, u in RAIL_FIELDS]
    out.append((TOTAL_POWER, "W"))
    return out


def samples_per_chunk(rate_hz: int) -> int:
    """JLS data chunk size: about one second of samples (a kill -9 loses at most this much).

    JLS wants a multiple of the summary decimation (128)."""
    return max(128, -(-rate_hz // 128) * 128)
