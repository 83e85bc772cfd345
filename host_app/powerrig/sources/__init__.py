"""Measurement sources: anything that delivers IntervalBlocks of a drive's rails on a clock mapped
to the host's, declaring its sampling and accuracy (powerrig.core.sampling). The interposer is one
(powerrig.interposer.client.Interposer); this folder holds the lab's own instruments behind the same
protocol, so `record`, sweeps and the desktop app take any of them:

    n6705c.py    Keysight N6705C-class DC power analyzer (SMU modules), its data logger over pyvisa
    joulescope.py  Joulescope JS220/JS110, one unit per rail, through pyjoulescope_driver's v1 API
    spec.py      "interposer", "n6705c:RESOURCE[,12V=1,3V3=2]", "joulescope:12V=SERIAL,3V3=SERIAL" -> a source
"""
from powerrig.sources.base import MeasurementSource
from powerrig.sources.spec import open_source, parse_spec

__all__ = ["MeasurementSource", "open_source", "parse_spec"]
