"""Analysis: pure functions over arrays and events (numpy; no Qt, no I/O).

Entry point: ``analyse(source, events, metadata) -> Analysis`` where source is any AnalysisSource (a
CaptureReader or an ArraySource); the building blocks (windows, stats, phases, checks, efficiency, steady state, WAF)
are usable on their own.
"""
from powerrig.analysis.pipeline import Analysis, analyse
from powerrig.analysis.source import AnalysisSource, ArraySource

__all__ = ["Analysis", "AnalysisSource", "ArraySource", "analyse"]
