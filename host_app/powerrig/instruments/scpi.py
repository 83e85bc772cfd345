"""One SCPI instrument over pyvisa: identify, write with an error check, query, named timeouts.

Every command is followed by ``SYST:ERR?`` so an instrument that rejects a command stops the
procedure at that command, with the instrument's own words, instead of returning stale readings.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from powerrig.core.errors import InstrumentError

log = logging.getLogger(__name__)

SCPI_NAN = 9.91e37            # SCPI-99: "not a number", the reading a meter gives when it has none
SCPI_OVERFLOW = 9.9e37        # SCPI-99: +/- infinity, an overload (the input beyond the range)


class InvalidReading(InstrumentError):
    """The instrument answered, with a value that is no measurement (NaN, overload, not finite)."""


def invalid_reading(x: float) -> str | None:
    """Why ``x`` is no measurement, or None for a real reading."""
    if math.isnan(x) or (SCPI_NAN * 0.9995 <= abs(x) <= SCPI_NAN * 1.0005):
        return "not a number (the meter has no valid reading)"
    if math.isinf(x) or abs(x) >= SCPI_OVERFLOW * 0.9995:
        return "an overload (the input is beyond the range)"
    return None


def _pyvisa():
    """pyvisa, of the 'instruments' extra: imported when an instrument is opened, so everything else
    runs without it (the one deliberate function-local import here)."""
    import pyvisa
    return pyvisa


NOT_A_NUMBER, OVERLOAD = 1, 2          # reading_faults codes (0: a reading)


def reading_faults(x) -> "np.ndarray":
    """``invalid_reading`` over an array: per value 0 (a reading), NOT_A_NUMBER (NaN, SCPI 9.91E37) or
    OVERLOAD (+-9.9E37, +-inf), so a data log can mark each record instead of refusing the whole fetch."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    nan = np.isnan(a) | ((a >= SCPI_NAN * 0.9995) & (a <= SCPI_NAN * 1.0005))
    over = ~nan & (a >= SCPI_OVERFLOW * 0.9995)          # inf included
    return np.where(nan, NOT_A_NUMBER, np.where(over, OVERLOAD, 0)).astype(np.uint8)


def _not_ascii(e: UnicodeDecodeError) -> str:
    bad = e.object[e.start:e.start + 1]
    return (f"a reply that is not ASCII text (byte 0x{bad.hex()} at position {e.start}): a non-SCPI device, a wrong "
            "serial setting or a corrupted link")


@dataclass(frozen=True)
class Identity:
    """The four fields of ``*IDN?``."""
    manufacturer: str
    model: str
    serial: str
    firmware: str

    @classmethod
    def parse(cls, text: str) -> "Identity":
        parts = [p.strip() for p in text.strip().split(",")]
        if len(parts) < 4:
            raise InstrumentError(f"*IDN? answered {text.strip()!r}, not 'maker,model,serial,firmware': "
                                  "is this a SCPI instrument?")
        return cls(parts[0], parts[1], parts[2], ",".join(parts[3:]))

    def __str__(self) -> str:
        return f"{self.manufacturer} {self.model} (serial {self.serial}, firmware {self.firmware})"


def open_resource(resource: str, backend: str | None = None, timeout_ms: int = 5000):
    """A pyvisa resource with SCPI line endings; a missing resource or backend is one clear line."""
    pyvisa = _pyvisa()

    try:
        rm = pyvisa.ResourceManager(backend) if backend else pyvisa.ResourceManager()
    except (OSError, ValueError) as e:
        raise InstrumentError(f"no VISA library ({e}); install pyvisa-py (`pip install pyvisa-py`) or a vendor "
                              "VISA, or name a backend with --visa-backend @py") from None
    try:
        res = rm.open_resource(resource)
    except (pyvisa.errors.VisaIOError, ValueError, OSError, pyvisa.errors.VisaTypeError) as e:
        raise InstrumentError(f"cannot open VISA resource {resource!r}: {e}; check the address "
                              "(`python -m pyvisa info`, or the meter's front panel I/O menu)") from None
    except Exception as e:  # noqa: BLE001 - pyvisa-py raises a bare Exception when it cannot resolve the host
        raise InstrumentError(f"cannot open VISA resource {resource!r}: {e}; check the address and that the meter "
                              "is on the network") from None
    res.timeout = timeout_ms
    res.read_termination = "\n"
    res.write_termination = "\n"
    return res


class ScpiInstrument:
    """Base of the drivers: one open VISA resource and its identity."""

    def __init__(self, res, identity: Identity, resource: str):
        self.res = res
        self.identity = identity
        self.resource = resource

    def close(self) -> None:
        try:
            self.res.close()
        except Exception as e:  # noqa: BLE001 - closing a dead session must not hide the real error
            log.warning("closing %s: %s", self.resource, e)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- I/O -------------------------------------------------------------------------------------
    def _io(self, what: str, fn, *args):
        pyvisa = _pyvisa()

        try:
            return fn(*args)
        except UnicodeDecodeError as e:
            raise InstrumentError(f"{self.identity.model} at {self.resource} answered {what!r} with {_not_ascii(e)}") \
                from None
        except OSError as e:
            raise InstrumentError(f"{self.identity.model} at {self.resource}: lost the connection during {what!r} "
                                  f"({e.strerror or e})") from None
        except pyvisa.errors.VisaIOError as e:
            if e.error_code == pyvisa.constants.StatusCode.error_timeout:
                raise InstrumentError(f"{self.identity.model} at {self.resource} did not answer {what!r} within "
                                      f"{self.res.timeout / 1000:g} s; check the cable and that the meter is "
                                      "not in local mode") from None
            raise InstrumentError(f"{self.identity.model} at {self.resource}: {what!r} failed: {e}") from None

    def write(self, cmd: str) -> None:
        """Send a command, then read the error queue: a rejected command raises, naming it."""
        self._io(cmd, self.res.write, cmd)
        self.check(cmd)

    def query(self, cmd: str) -> str:
        out = self._io(cmd, self.res.query, cmd).strip()
        self.check(cmd)
        return out

    def query_float(self, cmd: str) -> float:
        """One reading; InvalidReading when it is no measurement (9.91E37, an overload, NaN)."""
        text = self.query(cmd)
        try:
            x = float(text)
        except ValueError:
            raise InstrumentError(f"{self.identity.model}: {cmd!r} answered {text!r}, not a number") from None
        why = invalid_reading(x)
        if why:
            raise InvalidReading(f"{self.identity.model} at {self.resource}: {cmd!r} answered {text}, {why}; check "
                                 "the range, the leads and that the channel is on")
        return x

    def query_floats(self, cmd: str) -> list[float]:
        """An array of readings, refused whole when any of them is no measurement."""
        text = self.query(cmd)
        try:
            xs = [float(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise InstrumentError(f"{self.identity.model}: {cmd!r} answered {text[:60]!r}..., not numbers") from None
        bad = [(k, x, why) for k, x in enumerate(xs) if (why := invalid_reading(x))]
        if bad:
            k, x, why = bad[0]
            raise InvalidReading(f"{self.identity.model} at {self.resource}: {cmd!r} answered {len(bad)} invalid "
                                 f"value(s) of {len(xs)}, the first at index {k}: {x:g}, {why}; check the range, "
                                 "the leads and that the channel is on")
        return xs

    def query_values(self, cmd: str) -> list[float]:
        """An array of readings as the instrument sent them, no-reading markers (9.91E37, 9.9E37, NaN)
        included: for a data log, whose records are marked one by one (``reading_faults``), not refused whole."""
        text = self.query(cmd)
        try:
            return [float(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise InstrumentError(f"{self.identity.model}: {cmd!r} answered {text[:60]!r}..., not numbers") from None

    def check(self, after: str) -> None:
        """Raise the first error in the queue (and drain the rest into the log)."""
        first = None
        for _ in range(20):
            text = self._io("SYST:ERR?", self.res.query, "SYST:ERR?").strip()
            code = text.split(",", 1)[0].strip()
            try:
                n = int(code)
            except ValueError:
                raise InstrumentError(f"{self.identity.model}: SYST:ERR? answered {text!r}") from None
            if n == 0:
                break
            if first is None:
                first = text
            else:
                log.warning("%s also reported %s", self.identity.model, text)
        if first is not None:
            raise InstrumentError(f"{self.identity.model} at {self.resource} rejected {after!r}: {first}")


def identify(res, resource: str) -> Identity:
    pyvisa = _pyvisa()

    try:
        return Identity.parse(res.query("*IDN?"))
    except UnicodeDecodeError as e:
        raise InstrumentError(f"{resource} answered *IDN? with {_not_ascii(e)}") from None
    except OSError as e:                  # pyvisa-py connects on first use: refused, unreachable
        raise InstrumentError(f"cannot open VISA resource {resource!r}: {e.strerror or e}; check the address and "
                              "that the meter is on the network") from None
    except pyvisa.errors.VisaIOError as e:
        raise InstrumentError(f"{resource} did not answer *IDN? ({e.description if hasattr(e, 'description') else e}); "
                              "is it a SCPI instrument, and is the address right?") from None
    except InstrumentError:
        raise
    except Exception as e:  # noqa: BLE001 - pyvisa-py raises a bare Exception for a name it cannot resolve
        raise InstrumentError(f"cannot open VISA resource {resource!r}: {e}; check the address and that the meter "
                              "is on the network") from None
