"""One interposer board, bottom to top: `frames` (the wire format), `rfc2217` and `serial_link` (the
transport and its reader thread), `client` (describe, stream, ping, burst, calibration) and
`discovery` (which boards and virtual rigs are there). Import the module you need; this package
imports nothing, so the frame codec stays cheap to load."""
