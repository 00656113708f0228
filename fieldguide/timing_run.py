"""Kept so that `python3 -m fieldguide.timing_run` (the README of old, the GPU machines'
notes, scripts outside the repository) still runs the timing run, now
fieldguide/measuring/timing_run.py; `from fieldguide.timing_run import X` forwards too."""

import importlib
import runpy

if __name__ == "__main__":
    runpy.run_module("fieldguide.measuring.timing_run", run_name="__main__", alter_sys=True)


def __getattr__(name: str):
    return getattr(importlib.import_module("fieldguide.measuring.timing_run"), name)
