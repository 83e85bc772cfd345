"""The one recorder (powerrig.capture.recorder, helper `stream`); until it is merged, a stand-in
with the same interface (_recorder_standin.py, deleted by the integrator)."""
try:
    from powerrig.capture.recorder import Progress, RecordResult, Recorder
except ImportError:  # the real recorder is not in this branch yet
    from powerrig.sweep._recorder_standin import Progress, RecordResult, Recorder

__all__ = ["Progress", "RecordResult", "Recorder"]
