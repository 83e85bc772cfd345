"""powerrig interposer firmware: pure logic.

Runs unchanged on CPython, MicroPython's unix port, MicroPython on an emulated Cortex-M and the RP2350. Hardware access
lives in ../board; nothing here imports machine, rp2 or uses viper.
"""

VERSION = "0.1.0"
PROTOCOL_VERSION = 1
DEVICE_NAME = "powerrig-interposer"   # what describe() answers as "device"; the host checks it
