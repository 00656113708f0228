"""Pytest glue that reads device needs from the snippets themselves.

- `@pytest.mark.snippet("snippets/x/y.py", ...)` says which snippet files a test or benchmark
  exercises. The test then needs as many GPUs as the snippet's GPUS_NEEDED; the `snippet`
  fixture is the module of the nearest marker's first file (so a test names its snippet once);
  and a benchmark's record keys the code it can run in those files and its own
  (fieldguide/measuring/codekey.py), so the site knows when a number went stale.
- `gpu_benchmark(fn, *args, rounds=.., warmup_rounds=..)`: a fixture that times GPU work
  properly: the device is synchronized before each round and inside the timed call.
- `@pytest.mark.gpus(n)` marks a claim that only holds on a GPU (a speedup, a race).
- `--require-gpus` turns every skip for lack of GPUs into a failure (that is `make test-gpu`),
  except a test that needs more GPUs than a GPU machine has: it is listed, to run on a bigger one.
- Tests marked `fresh_interpreter` (the long ones) run first; under pytest-xdist each worker's
  share of the queue starts with its share of them, then the tests that share a module
  fixture, then the rest (`long_tests_first`).
- `--after FILE`: collect, then wait for FILE before running (test-gpu's serial half).
- `--outcomes-log PATH`: a JSON line as each test starts and as its call ends, and for a setup
  or teardown that did not pass or took a second or more (outcome, seconds, a failure's text),
  so a run killed by a time limit still says what failed, why, and which tests started and
  never ended (those that hung).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import time
from pathlib import Path

import pytest

from fieldguide import ROOT
from fieldguide.content.snippets import gpus_needed, module_name
from fieldguide.measuring.codekey import code_keys

GPU_SKIP_PREFIX = "needs "
GPU_SKIP = re.compile(r"needs (\d+) CUDA device\(s\); this machine has (\d+)")
_gpu_skips: list[str] = []        # fail a --require-gpus run
_for_bigger_machines: list[str] = []  # tests that need more GPUs than this GPU machine has


def fails_require_gpus(reason: str) -> bool:
    """Under --require-gpus a GPU skip fails the run, unless the machine has GPUs and the test
    needs more of them: a two-GPU test on a one-GPU machine runs on a two-GPU one instead."""
    found = GPU_SKIP.match(reason)
    return not (found and int(found[2]) >= 1 and int(found[1]) > int(found[2]))


@functools.cache
def available_gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def snippet_paths(item: pytest.Item) -> list[str]:
    paths: list[str] = []
    for marker in item.iter_markers("snippet"):
        for path in marker.args:
            if not (ROOT / path).is_file():
                raise pytest.UsageError(f"{item.nodeid}: snippet marker names a missing file {path}")
            paths.append(path)
    return paths


def needed_gpus(item: pytest.Item) -> int:
    if "measured" in getattr(item, "fixturenames", ()):
        return 0  # checks committed measurements: runs anywhere, whatever its snippet needs
    needs = [gpus_needed(ROOT / p) for p in snippet_paths(item)]
    needs += [int(m.args[0]) for m in item.iter_markers("gpus")]
    return max(needs, default=0)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--require-gpus",
        action="store_true",
        help="fail the run if any test is skipped for lack of CUDA devices (make test-gpu); "
             "tests that need more GPUs than this GPU machine has are listed instead",
    )
    parser.addoption(
        "--after",
        metavar="FILE",
        help="collect now, run the tests once FILE exists (make test-gpu: the serial half "
             "collects while the parallel half runs, and starts as soon as it ends)",
    )
    parser.addoption(
        "--outcomes-log",
        metavar="PATH",
        help="append a JSON line as each test starts and as it ends (outcome, seconds, the "
             "failure's text): a run stopped by a time limit still tells what ran, how long, "
             "what failed and why, and which tests started and never ended",
    )


@pytest.hookimpl(trylast=True)  # after -m and -k deselect: the order is of what will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    needs = [(item, needed_gpus(item)) for item in items]
    # Only a run with a GPU test asks torch how many GPUs there are: importing it costs a child
    # pytest that needs none (a timing run's, the tooling tests': 33 of them per `make test`)
    # 1.3 CPU-seconds.
    have = available_gpus() if any(need for _, need in needs) else 0
    for item, need in needs:
        if need > have:
            reason = f"{GPU_SKIP_PREFIX}{need} CUDA device(s); this machine has {have}"
            item.add_marker(pytest.mark.skip(reason=reason))
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = long_tests_first(items, workers)


def long_tests_first(items: list, workers: int) -> list:
    """Tests that start a new Python (5-50 s each, against well under 1 s for most others)
    first, and under pytest-xdist spread over the workers' queues: `--dist worksteal` hands
    worker k the k-th of `workers` equal runs of the list, so each run starts with its share
    of the long tests (round robin), and a parallel run does not end waiting on long tests
    queued behind each other. In each run the tests that share a module's (or a session's)
    fixture come next and those that share nothing last, each in pytest's order: an idle worker
    steals from the end of a busy one's queue, and stolen tests that shared a module fixture
    set it up once more (a torchrun or a training run, 10-20 s; five times over at the end of
    a run on 2026-11-25)."""
    long = [i for i in items if _is_long(i)]
    rest = [i for i in items if not _is_long(i)]
    ordered, left = [], len(items)
    for k in range(workers):
        size = left // (workers - k)  # as worksteal splits the queue among idle workers
        mine = long[k::workers]
        take = max(0, size - len(mine))
        ordered += mine + sorted(rest[:take], key=lambda i: not _shares_a_fixture(i))  # stable
        rest = rest[take:]
        left -= size
    return ordered + rest


def _is_long(item) -> bool:
    """A test that starts a new Python, or drives the browser (one of them loads every page of
    the site at one width and scheme: a minute or two); started last, it is the run's tail."""
    return any(item.get_closest_marker(m) is not None for m in ("fresh_interpreter", "browser"))


def _shares_a_fixture(item) -> bool:
    """Whether the test uses one of the suite's own fixtures that is set up once for several
    tests (wider than function scope); pytest's and plugins' own (tmp_path_factory) have no
    baseid."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(
        defs and defs[-1].scope != "function" and defs[-1].baseid
        for defs in info.name2fixturedefs.values())


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    after = session.config.getoption("--after", None)
    if not after or session.config.option.collectonly or not session.items:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    started = time.monotonic()
    if reporter:
        reporter.write_line(f"collected; the tests start once {after} exists")
    parent = os.getppid()
    while not Path(after).exists():
        if os.getppid() != parent:  # the shell that would make FILE is gone
            pytest.exit(f"--after: the process that was to create {after} ended", returncode=3)
        time.sleep(0.2)
    if reporter:
        reporter.write_line(f"{after} exists: starting after {time.monotonic() - started:.1f} s")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _log_outcome(report)
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = report.longrepr[2].removeprefix("Skipped: ")
        if reason.startswith(GPU_SKIP_PREFIX):
            listed = _gpu_skips if fails_require_gpus(reason) else _for_bigger_machines
            listed.append(f"{report.nodeid}: {reason}")


_outcomes_log: Path | None = None
FAILURE_CHARS = 3000  # the end of a failure's text: the assertion or the exception, and where


def pytest_configure(config: pytest.Config) -> None:
    global _outcomes_log
    path = config.getoption("--outcomes-log", None)
    # Under pytest-xdist the controller receives every worker's reports: only it writes.
    _outcomes_log = Path(path) if path and not hasattr(config, "workerinput") else None


def pytest_runtest_logstart(nodeid: str, location) -> None:
    """A line as each test starts (under pytest-xdist the controller hears of it at once): in a
    run killed by its time limit, a test that started and never ended is one that hung."""
    _log_line({"test": nodeid, "when": "start", "started": round(time.time(), 1)})


def _log_outcome(report: pytest.TestReport) -> None:
    if report.when != "call" and report.passed and report.duration < 1:
        return  # a passed setup or teardown is logged only when slow (module fixtures do work)
    line = {"test": report.nodeid, "when": report.when, "outcome": report.outcome,
            "seconds": round(report.duration, 3), "ended": round(report.stop, 1)}
    if report.failed:  # a failed test, or an error in its setup or teardown
        line["failure"] = report.longreprtext[-FAILURE_CHARS:]
    _log_line(line)


def _log_line(line: dict) -> None:
    if _outcomes_log is None:
        return
    with _outcomes_log.open("a", encoding="utf-8") as log:  # line by line: a kill loses none
        log.write(json.dumps(line) + "\n")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.getoption("--require-gpus") and _gpu_skips:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not config.getoption("--require-gpus"):
        return
    if _for_bigger_machines:
        terminalreporter.section("Not run here: these need more GPUs than this machine has "
                                 "(run make test-gpu on a machine with that many)", yellow=True)
        for line in _for_bigger_machines:
            terminalreporter.write_line(line)
    if _gpu_skips:
        terminalreporter.section("GPU tests skipped under --require-gpus", red=True)
        for line in _gpu_skips:
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _record_timed_code(request: pytest.FixtureRequest) -> None:
    """Benchmarks key the code they can run, so the site can tell when a number went stale."""
    if "benchmark" not in request.fixturenames:
        return
    benchmark = request.getfixturevalue("benchmark")
    root = request.config.rootpath  # the repository, where pytest-benchmark's fullnames start
    bench_file = Path(request.node.path).resolve().relative_to(root).as_posix()
    function = request.node.originalname
    benchmark.extra_info["code"] = code_keys(root, bench_file, function, snippet_paths(request.node))


@pytest.fixture(scope="module")
def snippet(request: pytest.FixtureRequest):
    """The snippet module a test file's `snippet` marker names (its first path)."""
    marker = request.node.get_closest_marker("snippet")
    if marker is None or not marker.args:
        raise pytest.UsageError(f"{request.node.nodeid}: the `snippet` fixture needs a "
                                "`pytest.mark.snippet(path)` marker on the module")
    return importlib.import_module(module_name(ROOT / marker.args[0]))


@pytest.fixture(scope="session")
def _all_timings():
    from fieldguide.measuring.timings import all_timings

    return all_timings()


@pytest.fixture(scope="session")
def _code_keys():
    from fieldguide.measuring.timings import CodeKeys

    return CodeKeys(ROOT)


@pytest.fixture
def measured(request: pytest.FixtureRequest, _all_timings, _code_keys):
    """`measured(*names)`: every recorded run, of every GPU, that measured all of `names` as
    their code is now (a GPU whose runs measured older code is left out until re-measured).

    A page's claim about measured numbers is checked against each run, not only the newest;
    no run at all is a failure (a claim with nothing behind it), never a silent pass, except
    on a page of a draft chapter (mkdocs.yml's draft_docs), which is not measured yet.
    """
    from fieldguide.content.pages import is_draft, pages
    from fieldguide.measuring.timings import TimingError, runs_measuring

    page_name = Path(request.node.path).stem.removeprefix("test_").replace("_", "-")
    draft = any(p.stem == page_name and is_draft(p) for p in pages())

    def runs(*names: str):
        try:
            return runs_measuring(_all_timings, *names, keys=_code_keys)
        except TimingError as exc:
            if draft:
                pytest.skip(f"{page_name} is a draft page (draft_docs in mkdocs.yml): "
                            "not measured yet")
            pytest.fail(str(exc))

    return runs


@pytest.fixture
def gpu_benchmark(benchmark):
    """`gpu_benchmark(fn, *args, rounds=20, warmup_rounds=2)`: time GPU work honestly.

    Synchronizes before each round (no earlier work leaks in) and after the call inside the
    timed region (the work itself is counted, not just its launch).
    """
    import torch

    def synchronized(fn, *args, **kwargs):
        result = fn(*args, **kwargs)
        torch.cuda.synchronize()
        return result

    def run(fn, *args, rounds: int = 20, warmup_rounds: int = 2, **kwargs):
        return benchmark.pedantic(synchronized, args=(fn, *args), kwargs=kwargs,
                                  setup=torch.cuda.synchronize, rounds=rounds,
                                  warmup_rounds=warmup_rounds)

    run.extra_info = benchmark.extra_info
    return run
