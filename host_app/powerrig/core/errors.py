"""Errors a user can act on. The CLI prints them as one line (no traceback) and exits non-zero."""


class PowerrigError(Exception):
    """Base: the message says what went wrong and how to fix it."""


class LinkError(PowerrigError):
    """The serial port or the device on it is unusable (missing, not an interposer, stalled)."""


class DeviceError(PowerrigError):
    """The interposer answered a command with an error."""


class ToolError(PowerrigError):
    """nvme-cli or fio is missing, failed, or printed something we cannot parse."""


class CaptureError(PowerrigError):
    """A capture file is missing, truncated, foreign or lacks what was asked."""


class InstrumentError(PowerrigError):
    """A reference meter is missing, unsupported, timed out or reported an error."""
