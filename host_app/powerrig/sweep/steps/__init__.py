"""Plan step kinds, one module each (steps/base.py: the interface and the registry). Every module in this
folder is imported here, so a new kind registers itself by being a file in it: nothing else changes."""
from __future__ import annotations

import importlib
import pkgutil

from powerrig.sweep.steps.base import REGISTRY, Step, StepKind, StepRun, kind_of, kinds, parse_kinds, register

for _m in pkgutil.iter_modules(__path__):
    if _m.name not in ("base", "values"):
        importlib.import_module(f"{__name__}.{_m.name}")

__all__ = ["REGISTRY", "Step", "StepKind", "StepRun", "kind_of", "kinds", "parse_kinds", "register"]
