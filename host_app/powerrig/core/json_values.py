"""numpy and dataclass values as JSON: the one converter the wire protocol and capture files share.

A sweep's ``np.arange`` steps, a block's ``np.float32`` means and an Event (``to_dict``) end up in
commands and in capture metadata; ``json`` knows none of them.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import PurePath

import numpy as np


def plain(o):
    """``json.dumps(default=plain)``: numpy scalars and arrays, objects with ``to_dict()``, dataclasses
    and paths as plain JSON values; anything else is a TypeError (a bug to see, not to hide)."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if isinstance(o, PurePath):
        return str(o)
    raise TypeError(f"{o!r} ({type(o).__name__}) is not JSON serialisable")


def _lenient(o):
    try:
        return plain(o)
    except TypeError:
        return str(o)


def dumps(obj, *, compact: bool = False, lenient: bool = False) -> str:
    """JSON text of ``obj``. ``lenient``: unknown objects become their ``str()`` (metadata a user
    passed in must not stop a recording); NaN and infinity are kept (JSON5-style, as Python reads them)."""
    return json.dumps(obj, default=_lenient if lenient else plain, allow_nan=True,
                      separators=(",", ":") if compact else None)
