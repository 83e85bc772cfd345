"""Sweep panel: run a plan through the sweep engine with progress, pause, stop, resume, results and charts."""
