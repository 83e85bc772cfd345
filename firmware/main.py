"""Board entry point: build the RP2350 board and run the interposer application forever."""
from board.rp2350 import Board
from powerrig_fw.device import Device

Device(Board()).run()
