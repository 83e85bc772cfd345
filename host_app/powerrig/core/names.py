"""Names every layer shares, defined once: rail fields and signal names, event and phase kinds,
verdicts, and the interposer's identity as the firmware states it.

The link, the capture file, the analysis, the report, the sweep and the GUI all spell these the
same way because they take them from here. The kinds and verdicts are StrEnums: a member *is* its
string, so JSON, capture files and comparisons with plain strings are unchanged, while a misspelt
member is an AttributeError instead of a silent mismatch. This module sits at the bottom of the
host package: it imports only the firmware's pure logic.
"""
from __future__ import annotations

from enum import StrEnum

import powerrig_fw
from powerrig_fw import device as _fw_device

# ---- the interposer, as the firmware describes itself (never retyped on the host) ----------------
DEVICE_NAME: str = powerrig_fw.DEVICE_NAME          # describe()["device"]
PROTOCOL: int = powerrig_fw.PROTOCOL_VERSION        # describe()["protocol"]
DIGITAL_INPUTS: tuple[str, ...] = tuple(_fw_device.DIGITAL)   # bit k of dig_or / dig_and is input k
STATE_IDLE: str = _fw_device.IDLE                   # describe()["state"] / status()["state"]
STATE_STREAMING: str = _fw_device.STREAMING
# (interval limits, scales and rails are NOT taken from here: the connected device's describe() reply
# is authoritative for those, since its firmware may be another version than the host's copy)


def digital_bit(name: str) -> int:
    """Bit mask of a digital input in dig_or / dig_and ("activity" -> 1, "perst" -> 2, ...)."""
    try:
        return 1 << DIGITAL_INPUTS.index(name)
    except ValueError:
        raise KeyError(f"no digital input {name!r}; the interposer has {', '.join(DIGITAL_INPUTS)}") from None


# ---- per-interval columns and capture signals -----------------------------------------------------
class RailField(StrEnum):
    """The per-rail columns of an IntervalBlock; a capture signal is named field_rail (p_12V)."""
    V = "v"              # mean voltage
    I = "i"              # noqa: E741  mean current
    P = "p"              # mean of instantaneous V*I
    P_MIN = "p_min"      # lowest instantaneous (4 us) power
    P_MAX = "p_max"      # highest instantaneous power
    P_PEAK = "p_peak"    # highest 100 us window mean power

    @property
    def unit(self) -> str:
        return "V" if self is RailField.V else "A" if self is RailField.I else "W"


RAIL_FIELDS: tuple[RailField, ...] = tuple(RailField)
DIGITAL_FIELDS = ("dig_or", "dig_and")   # digital inputs seen high during / throughout the interval
TOTAL = "total"                          # the sum over rails, where figures are keyed by rail
TOTAL_POWER = "p_total"                  # the capture signal of total power (W)


def rail_signal(field: str, rail: str) -> str:
    """Signal name of a rail's column, e.g. ('p', '12V') -> 'p_12V'."""
    return f"{field}_{rail}"


class GapReason(StrEnum):
    """Why intervals are missing (an IntervalBlock.gap's flags["gap"], a capture's gap record)."""
    LINK = "link"          # frames lost on the way (sequence gap, CRC error)
    OVERRUN = "overrun"    # the device lost samples itself
    MISSING = "missing"    # the capture writer was handed blocks with a hole between them
    RESTART = "restart"    # the device's sample index restarted (no intervals lost, a new segment)
    INVALID = "invalid"    # the instrument gave no valid reading (an overload, its not-a-number, out of range)


# ---- the timeline ---------------------------------------------------------------------------------
class EventKind(StrEnum):
    """What an Event stands for."""
    NVME = "nvme"                  # one nvme-cli invocation
    FIO = "fio"                    # one fio invocation (the whole run)
    PHASE = "phase"                # a workload phase (a fio job, an idle window, a dwell)
    POWER_STATE = "power_state"    # a power-state change requested (and confirmed or not)
    MARKER = "marker"              # a user marker
    GAP = "gap"                    # samples lost (link or device overrun)
    NOTE = "note"


# ---- analysis -------------------------------------------------------------------------------------
class PhaseKind(StrEnum):
    """What stretch of a capture a Phase is."""
    CAPTURE = "capture"            # the whole capture
    WORKLOAD = "workload"
    IDLE = "idle"
    DWELL = "dwell"                # from one power-state change to the next
    IDLE_WINDOW = "idle_window"    # the IDLP / PWR-6 measurement window inside an idle phase
    WAF_INTERVAL = "waf_interval"  # between two write-amplification counter samples
    WINDOW = "window"              # a span measured to compare with a claim (a drive's self-report): no checks


class Verdict(StrEnum):
    """A check's outcome (decided in one place: powerrig.analysis.checks.judge). PASS, MARGINAL and FAIL
    are verdicts on the drive; the rest say why there is none."""
    PASS = "pass"
    MARGINAL = "marginal"          # within the limit's marginal band or its measurement uncertainty
    FAIL = "fail"
    PARTIAL = "partial"            # under the limit, but on incomplete or too short data
    INVALID = "invalid"            # the data cannot be trusted (thermal throttling)
    NA = "n/a"                     # nothing to judge (no value)
    INFO = "info"                  # a measurement with no limit
