"""Pin map of the interposer reference design (hw/ has the schematic notes)."""
from micropython import const

ADC_SCLK = const(2)      # shared SCLK of the three AD7380s (PIO side-set)
ADC_CS = const(3)        # shared CS: a falling edge starts a simultaneous conversion on all channels
ADC_SDO_BASE = const(4)  # SDOA of ADC0 (12 V), ADC1 (3.3 V), ADC2 (5 V) in 1-wire mode: GPIO 4..6
ADC_SDO_COUNT = const(3)
DIG_BASE = const(10)     # activity LED, PERST#, marker input: GPIO 10..12
DIG_COUNT = const(3)
STATUS_LED = const(25)
VREF_SENSE = const(26)   # RP2350 ADC0: the AD7380s' 2.5 V reference through 1k (self-test only)
ADC_SDI = const(7)       # shared SDI of the three AD7380s: the register set-up at boot (board/adc_setup.py)
PWR_CUT_12V = const(13)  # high: the 12 V eFuse's UVLO is pulled low, the drive's 12 V is cut
PWR_CUT_3V3 = const(14)  # high: the 3.3 Vaux load switch is off
PWR_CUT_5V = const(15)   # high: the 5 V load switch is off (U.2)
PERST_ALLOW = const(16)  # low: PERST0#/PERST1# to the drive held asserted; high (pull-up): the host's pass
PWRDIS_ASSERT = const(17)  # high: PWRDIS to the drive asserted (ORed with the host's)
RAIL_FAULT = const(18)   # low: the 12 V eFuse reports a fault (FLT#, open drain)
TEMP_SDA = const(20)     # I2C0 to the TMP117 between the shunts (board temperature for the calibration)
TEMP_SCL = const(21)
