"""Exports of a capture for other tools: sigrok sessions (.sr, PulseView) and CSV tables.

The sigrok protocol decoders shipped with powerrig live in ``decoders/`` (see docs/sigrok.md).
"""
from pathlib import Path

DECODERS_DIR = Path(__file__).resolve().parent / "decoders"
