"""matplotlib's pyplot on the file-only Agg backend, loaded at the first figure: the store, the CLI's
listings and the web server's JSON never pay for it (about half a second and tens of MB at import).
The one deliberate function-local import of the results layer."""
from __future__ import annotations


def pyplot():
    """The pyplot module, on Agg (no display needed: every figure here goes to a file or a stream)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
