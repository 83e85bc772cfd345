"""Capture files: JLS v2 holding interval signals, events, gaps, clock anchors and metadata."""
from powerrig.capture.reader import CaptureReader
from powerrig.capture.recorder import Progress, RecordResult, Recorder
from powerrig.capture.writer import CaptureWriter, software_versions

__all__ = ["CaptureReader", "CaptureWriter", "Progress", "RecordResult", "Recorder", "software_versions"]
