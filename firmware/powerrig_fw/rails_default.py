"""Default channel calibration, generated from hw/rails.toml by `make firmware-defaults`.

Do not edit: change hw/rails.toml and regenerate; a test checks the two agree.
"""

SAMPLE_PERIOD_US = 4
PEAK_WINDOW_US = 100
ADC_PART = 'AD7380'
ADC_BITS = 16
T_REF_C = 25.0

# name, volts per code, amps per code, optional
RAILS = (
    ('12V', 0.0004570004810716104, 0.00030517578125, False),
    ('3V3', 0.000152587890625, 3.0517578125e-05, False),
    ('5V', 0.00022888206481956483, 0.000152587890625, True),
)
