##
## powerrig timeline decoder (libsigrokdecode API v3). MIT licence, part of powerrig.
##

'''
Annotates the timeline channels of a powerrig export (powerrig export --sigrok):
PHASE (high during each fio phase), NVME (high during each nvme-cli command),
LABEL (the events' names as UART 8N1 bytes, one bit per sample, each name ended
by a newline; the k-th name belongs to the k-th rising edge of PHASE or NVME,
PHASE first on a tie), GAP (lost intervals) and the power state (PS_VALID high
where it is known, PS_B0.. its value in binary).

PulseView assigns the channels by name. sigrok-cli assigns them by position
when none are named; an export's first ten logic channels are in this decoder's
order, so -P powerrig_timeline is enough. Otherwise name them, e.g.
-P powerrig_timeline:phase=PHASE:nvme=NVME:label=LABEL:gap=GAP:ps_valid=PS_VALID:ps_b0=PS_B0
'''

from .pd import Decoder
