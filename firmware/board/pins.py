"""Pin map of the interposer reference design (hw/ has the schematic notes)."""
from micropython import const

ADC_SCLK = const(2)      # shared SCLK of the three AD7380s (PIO side-set)
ADC_CS = const(3)        # shared CS: a falling edge starts a simultaneous conversion on all channels
ADC_SDO_BASE = const(4)  # SDOA of ADC0 (12 V), ADC1 (3.3 V), ADC2 (5 V) in 1-wire mode: GPIO 4..6
ADC_SDO_COUNT = const(3)
ADC_SDI = const(7)       # shared SDI of the three AD7380s: register writes at start-up (board/ad7380.py)
DIG_BASE = const(10)     # activity LED, PERST#, marker input: GPIO 10..12
DIG_COUNT = const(3)
# power actions (powerrig_fw.actions), proposed for hw/: logical 1 = rail on / signal asserted
RAIL_12V_EN = const(13)  # TPS25982 eFuse EN (12 V main)
RAIL_3V3_EN = const(14)  # TPS22918 load switch ON (3.3 Vaux)
PERST_DRIVE = const(15)  # open-drain driver: 1 pulls the slot's PERST# low (asserted)
PWRDIS_DRIVE = const(16) # drives the EDSFF PWRDIS pin high (asserted)
STATUS_LED = const(25)
VREF_SENSE = const(26)   # RP2350 ADC0: the AD7380s' 2.5 V reference through 1k (self-test only)
