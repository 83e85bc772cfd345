"""The plot's data sources: "summaries for [t0, t1] at N points" from memory (live) or a capture file."""
from powerrig.gui.source.base import Summary
from powerrig.gui.source.file import FileSource
from powerrig.gui.source.live import LiveSource

__all__ = ["Summary", "LiveSource", "FileSource"]
