"""Capture files: JLS v2 holding interval signals, events, gaps, clock anchors and metadata."""
from powerrig.capture.reader import CaptureReader
from powerrig.capture.writer import CaptureWriter, software_versions

__all__ = ["CaptureReader", "CaptureWriter", "software_versions"]
