"""The desktop app (PySide6): a face on the host package that adds no measurement logic.

Layout (after the Joulescope UI): ``core`` holds the application state and its Qt signals and runs
every slow thing (serial I/O, subprocesses, analysis, file reads) on worker threads; each widget
lives in its own folder and talks only to the core, never to another widget; the plot asks its
``source`` for one min/mean/max summary per pixel. Nothing outside this package imports it.
"""
