"""Kept because benchmarks/bench_async_execution.py imports `timeline_from_trace`
from here, inside a benchmark whose code key holds that import: changing it would make its runs stale.
The diagrams, ring_all_reduce among them (a caption names this file), are
fieldguide/rendering/diagrams.py."""

import importlib


def __getattr__(name: str):
    return getattr(importlib.import_module("fieldguide.rendering.diagrams"), name)
