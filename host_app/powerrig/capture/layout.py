"""The capture file layout in one place: sources, signal names, user-data tags, annotation groups.

A capture is a JLS v2 file laid out as the field's own tools expect (format 2): one JLS source per
rail holding ``current``, ``voltage`` and ``power`` (what the Joulescope UI and ``pyjls csv`` read), the
digital inputs as ``gpi[n]`` (0/1 per interval, u8) on the first rail's source, UTC entries on every signal and the
events as annotations on every rail's ``power``. The other per-interval columns (p_min_12V, p_peak_12V,
...) stay as extra signals of their rail's source, and the totals (p_total, dig_or, dig_and) on a last
``powerrig`` source; viewers skip names they do not know. Format 1 (one source, every signal named
field_rail) is still read: the metadata maps every logical name (p_12V, ...) to its signal id either
way, so the reader never depends on the layout. Every signal is fixed-rate at the interval rate
(1 ms intervals -> 1000 Hz), so the file's summary levels answer long-range statistics fast. Structured records (metadata, events,
gaps, clock anchors, the close record) are JSON documents in user-data chunks tagged below; user data
survives an unclean stop (kill -9), the JLS UTC track's tail does not, so placement relies on the
clock anchors in user data.
"""
from __future__ import annotations

from powerrig.core import names

FORMAT = "powerrig-capture"
FORMAT_VERSION = 2

SOURCE_ID = 1            # format 1's only source; in format 2 the first rail's

# user-data chunk_meta tags (u16)
UD_METADATA = 0x101      # JSON: the capture's metadata (written once, when the first block arrives)
UD_METADATA_UPDATE = 0x102  # JSON: keys merged into the metadata (drive identity learnt later, ...)
UD_EVENT = 0x103         # JSON: one Event.to_dict(), written when the event has ended (or at close)
UD_GAP = 0x104           # JSON: {sample_id, intervals, raw_index, reason}
UD_CLOCK = 0x105         # JSON: {sample_id, raw_index, utc, model}: one anchor of the UTC track
UD_SEGMENT = 0x106       # JSON: {sample_id, raw_index}: the device's index restarted here
UD_CLOSE = 0x107         # JSON: {stats, totals, length}: written by a clean close only
UD_CLIP = 0x108          # JSON: {sample_id, span, intervals, rail, quantity, runs: [[offset, n], ...]}: range saturation

# annotation group ids (viewers show them; the JSON in user data is the authoritative record)
GROUP_EVENT = 1
GROUP_GAP = 2
GROUP_CLIP = 3

# per-rail columns of an IntervalBlock and their units
RAIL_FIELDS = tuple((f, f.unit) for f in names.RAIL_FIELDS)
DIGITAL_FIELDS = names.DIGITAL_FIELDS
rail_signal = names.rail_signal
TOTAL_POWER = names.TOTAL_POWER


# the field's names for a rail's mean columns (Joulescope UI, pyjls csv); the rest keep field_rail names
VIEWER_NAMES = {"i": "current", "v": "voltage", "p": "power"}


def gpi_signal(bit: int) -> str:
    """The field's name of digital input ``bit`` (Joulescope: gpi[0]..gpi[3])."""
    return f"gpi[{bit}]"


def rail_source_id(k: int) -> int:
    """JLS source id of rail number k (0-based); 0 is JLS's own global source."""
    return k + 1


def totals_source_id(rails) -> int:
    return len(rails) + 1


def signal_plan(rails) -> list[tuple[str, int, str, str]]:
    """(logical name, source id, name in the file, units) of every float signal, in signal-id order."""
    out = []
    for k, r in enumerate(rails):
        for f, u in RAIL_FIELDS:
            out.append((rail_signal(f, r), rail_source_id(k), VIEWER_NAMES.get(str(f), rail_signal(f, r)), u))
    out.append((TOTAL_POWER, totals_source_id(rails), TOTAL_POWER, "W"))
    return out


def signal_names(rails) -> list[tuple[str, str]]:
    """(logical name, units) of every float signal for these rails, in signal-id order."""
    return [(name, units) for name, _src, _in_file, units in signal_plan(rails)]


def samples_per_chunk(rate_hz: int) -> int:
    """JLS data chunk size: about one second of samples (a kill -9 loses at most this much).

    JLS wants a multiple of the summary decimation (128)."""
    return max(128, -(-rate_hz // 128) * 128)
