##
## powerrig wire protocol decoder (libsigrokdecode API v3). MIT licence, part of powerrig.
##

'''
Decodes the powerrig interposer's wire protocol (docs/protocol.md) from the
bytes of sigrok's uart decoder: sync A5 5A, version, frame type, flags, count,
payload length, sequence number, sample index, payload and CRC-32 (checked;
a CRC error is a warning). Like the host, it resynchronises one byte after a
bad frame, and counts bytes outside frames as a warning.

Stack it on uart (8N1, LSB first, the link's baud rate), e.g.
-P uart:rx=RX:baudrate=1000000,powerrig_wire
'''

from .pd import Decoder
