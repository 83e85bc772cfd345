"""One SCPI instrument over pyvisa: identify, write with an error check, query, named timeouts.

Every command is followed by ``SYST:ERR?`` so an instrument that rejects a command stops the
procedure at that command, with the instrument's own words, instead of returning stale readings.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from powerrig.core.errors import InstrumentError

log = logging.getLogger(__name__)


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
    import pyvisa

    try:
        rm = pyvisa.ResourceManager(backend) if backend else pyvisa.ResourceManager()
    except (OSError, ValueError) as e:
        raise InstrumentError(f"no VISA library ({e}); install pyvisa-py (`pip install pyvisa-py`) or a vendor "
                              "VISA, or name a backend with --visa-backend @py") from None
    try:
        res = rm.open_resource(resource)
    except (pyvisa.errors.VisaIOError, ValueError, OSError) as e:
        raise InstrumentError(f"cannot open VISA resource {resource!r}: {e}; check the address "
                              "(`python -m pyvisa info`, or the meter's front panel I/O menu)") from None
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
        import pyvisa

        try:
            return fn(*args)
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
        text = self.query(cmd)
        try:
            return float(text)
        except ValueError:
            raise InstrumentError(f"{self.identity.model}: {cmd!r} answered {text!r}, not a number") from None

    def query_floats(self, cmd: str) -> list[float]:
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
    import pyvisa

    try:
        return Identity.parse(res.query("*IDN?"))
    except OSError as e:                  # pyvisa-py connects on first use: refused, unreachable
        raise InstrumentError(f"cannot open VISA resource {resource!r}: {e.strerror or e}; check the address and "
                              "that the meter is on the network") from None
    except pyvisa.errors.VisaIOError as e:
        raise InstrumentError(f"{resource} did not answer *IDN? ({e.description if hasattr(e, 'description') else e}); "
                              "is it a SCPI instrument, and is the address right?") from None
