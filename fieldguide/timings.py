"""Kept so that scripts outside the repository that read the runs (`from
fieldguide.timings import Timings, CodeKeys`) still work; the runs' data model is
fieldguide/measuring/timings.py, and the number formats fieldguide/measuring/numbers.py."""

import importlib


def __getattr__(name: str):
    for module in ("fieldguide.measuring.timings", "fieldguide.measuring.numbers"):
        found = importlib.import_module(module)
        if hasattr(found, name):
            return getattr(found, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
