"""The TMP117 between the shunts (I2C0 on pins.TEMP_SDA/TEMP_SCL, address 0x48, 1/128 K a code): the
board temperature the calibration's temperature coefficients use (hw/rails.toml [calibration]).
The board exposes it as ``Board.temperature_c`` (powerrig_fw.device reports it as board_temp_c)."""
import machine

from board import pins

ADDRESS = 0x48
TEMP_RESULT = 0x00
_i2c = None


def read_c():
    """Degrees C, or None when the sensor does not answer (a board without one)."""
    global _i2c
    try:
        if _i2c is None:
            _i2c = machine.I2C(0, sda=machine.Pin(pins.TEMP_SDA), scl=machine.Pin(pins.TEMP_SCL), freq=400_000)
        raw = _i2c.readfrom_mem(ADDRESS, TEMP_RESULT, 2)
    except OSError:
        return None
    code = (raw[0] << 8) | raw[1]
    return (code - 65536 if code & 0x8000 else code) / 128
