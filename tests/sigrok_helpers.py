"""Helpers for the sigrok tests: run the real sigrok-cli, bit-bang a UART line into a logic session."""
from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np

from powerrig.export import DECODERS_DIR
from powerrig.export.srzip import SrZipWriter

SIGROK_CLI = shutil.which("sigrok-cli")
# sigrok-cli 0.7.2 (Debian 12) ends every `-O analog` run with this glib assertion and exit status 1,
# after printing all values, also on session files written by sigrok-cli itself (`-d demo -o x.sr`).
TEARDOWN_BUG = "g_atomic_ref_count_dec: assertion 'old_value > 0' failed"


def sigrok(*args: str, timeout: float = 120) -> str:
    """stdout of sigrok-cli with powerrig's decoders on its path; fails on a non-zero exit or a crash."""
    env = dict(os.environ, SIGROKDECODE_DIR=str(DECODERS_DIR))
    r = subprocess.run([SIGROK_CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode == 1 and r.stderr.strip() == TEARDOWN_BUG:
        return r.stdout
    assert r.returncode == 0, f"sigrok-cli {' '.join(args)} exited {r.returncode}: {r.stderr}"
    assert "Traceback" not in r.stderr and "Fatal Python error" not in r.stderr, r.stderr
    return r.stdout


def uart_bits(data: bytes, samples_per_bit: int) -> np.ndarray:
    """The 8N1 waveform (LSB first, idle high) of some bytes, back to back: one value per sample."""
    b = np.frombuffer(bytes(data), np.uint8)
    frame = np.ones((len(b), 10), np.uint8)
    frame[:, 0] = 0
    frame[:, 1:9] = (b[:, None] >> np.arange(8)) & 1
    return np.repeat(frame.ravel(), samples_per_bit)


def write_uart_capture(path, chunks: list[bytes], samplerate: int = 8_000_000, baud: int = 1_000_000,
                       idle_bits: int = 20, channel: str = "RX") -> list[tuple[int, int]]:
    """A logic session of one UART line sending each chunk after ``idle_bits`` of idle line.

    Returns the (first, end) sample of each chunk, for expected annotation positions."""
    spb = samplerate // baud
    assert spb * baud == samplerate, "whole samples per bit keep the expected positions exact"
    parts, spans, at = [], [], 0
    for c in chunks:
        idle = np.ones(idle_bits * spb, np.uint8)
        wave = uart_bits(c, spb)
        parts += [idle, wave]
        at += len(idle)
        spans.append((at, at + len(wave)))
        at += len(wave)
    parts.append(np.ones(idle_bits * spb, np.uint8))
    with SrZipWriter(path, samplerate, logic=[channel]) as w:
        w.write(np.concatenate(parts), {})
    return spans
