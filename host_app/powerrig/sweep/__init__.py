"""Sweeps: a plan (TOML) of power states x workloads x repetitions, run unattended and resumable.

plan.py reads and validates a plan; engine.py runs it step by step into the results store
(powerrig.results); demo.py is the D5-P5336 power-state study `make demo` runs.
"""
