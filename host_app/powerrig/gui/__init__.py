"""The desktop app (PySide6): a face on the host package that adds no measurement logic.

Layout (after the Joulescope UI): ``core`` is a small domain-free bus (worker threads for every slow
thing, the error/status/busy/tick signals, the order things stop in); ``services`` hold what the
window can do, one concern each (connection, recording, captures, markers, drive, workload, sweeps);
each widget lives in its own folder and talks only to the services and the core's signals, never to
another widget or a domain package (.importlinter says so); the plot asks its ``source`` for one
min/mean/max summary per pixel. Nothing outside this package imports it.
"""
