"""Pytest plugin: each test's CPU seconds (its process and the children it waited for), to
profile the suite on a machine that other work shares, where wall times say little.

    python -m pytest -p benchmarks.loop.cpu_times --cpu-times=out.json

Writes {nodeid: {"cpu_s": ..., "wall_s": ...}} for setup, call and teardown together, and the
session's totals under "" (the whole run, collection included), into PATH.<pid>: one file per
process that ran tests, since `make test` runs two pytest sessions and the first on several
pytest-xdist workers (a controller that ran no test writes nothing, so no CPU second is counted
twice). benchmarks/loop/run.py merges them (`read_all`).
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-times", metavar="PATH", help="write each test's CPU and wall seconds (JSON)")


_times: dict[str, dict[str, float]] = {}
_start = (_cpu(), time.perf_counter())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _cpu(), time.perf_counter()
    yield
    _times[item.nodeid] = {"cpu_s": round(_cpu() - cpu, 3), "wall_s": round(time.perf_counter() - wall, 3)}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = session.config.getoption("--cpu-times")
    if path and _times:
        _times[""] = {"cpu_s": round(_cpu() - _start[0], 3),
                      "wall_s": round(time.perf_counter() - _start[1], 3)}
        Path(f"{path}.{os.getpid()}").write_text(json.dumps(_times, indent=1), encoding="utf-8")

