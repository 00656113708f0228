"""`make timings`: run the benchmarks on this CUDA machine and add the run to timings/<machine>/.

<machine> is the GPU model's slug, with the GPU count before it on a machine of several
(`2x-nvidia-h200`): a copy between GPUs or an all-reduce measures the machine, not one GPU. On
such a machine, `CUDA_VISIBLE_DEVICES=0 make timings` measures the single-GPU benchmarks as a
run of that GPU model.

    python3 -m fieldguide.timing_run                 # every benchmark: a new complete run
    python3 -m fieldguide.timing_run --stale         # only those this GPU never measured, or
                                           # whose code changed since: a partial run
    python3 -m fieldguide.timing_run --only NAME ... # re-measure some: a new partial run
    python3 -m fieldguide.timing_run --list          # the benchmark names
    python3 -m fieldguide.timing_run --stale --list  # what --stale would measure here
    python3 -m fieldguide.timing_run --wanted        # --stale, and those short of 3 runs from 2
                                           # leases (at most 2 of them from this lease)
    python3 -m fieldguide.timing_run --deadline 420  # start no module after 420 s: a partial run

A run ends by saying how long a full run takes on this GPU: measured, or estimated from the
kept runs' wall times (`--stale` with nothing to measure says it too).

Every run is kept, as its own file in pytest-benchmark's JSON format
(timings/<machine>/<date>_<commit>.json), so runs on different days and machines can be
compared (`make timings-report`, or `pytest-benchmark compare`). Uses the interpreter it is
started with and installs nothing. The file is written only when every selected benchmark
produced a measurement (with --keep-going or --deadline, what was measured, as a partial run:
`complete` false), and then atomically: a crash, an error or an out-of-memory in one benchmark
leaves the committed timings as they were.

Each benchmark module runs in a Python process of its own, started for it and ended after it:
what one module leaves behind (tensors its snippets made on import, the allocator's cache,
global switches such as TF32, threads) cannot change what another one measures.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fieldguide import ROOT
from fieldguide.measuring.codekey import code_keys
from fieldguide.measuring.timings import (
    LEASES_WANTED,
    RUNS_WANTED,
    TIMINGS_DIR,
    TimingError,
    Timings,
    benchmark_name,
    machine_slug,
    matches,
)

BENCH_DIR = ROOT / "benchmarks"
PYTEST_ARGS = [
    "-o", "python_files=bench_*.py",
    "-o", "python_functions=bench_*",
    "-p", "no:cacheprovider",
    "-p", "fieldguide.measuring.pytest_plugin",  # keys each benchmark's code, wherever the benchmarks live
    "--import-mode=importlib",  # benchmark modules from different trees never collide
    "--benchmark-enable",
    "--benchmark-only",
    "--benchmark-disable-gc",
    "-q",
    "--no-header",
]


class TimingRunError(RuntimeError):
    """The run cannot produce a trustworthy file; the message says why."""


class _Selector:
    """Pytest plugin: picks the benchmarks to run and remembers what happened to each."""

    def __init__(self, only: list[str] | None, gpus: int, list_only: bool, keys: bool = False):
        self.only = only
        self.gpus = gpus
        self.list_only = list_only
        self.keys = keys                       # key each benchmark's code as it is now
        self.codes: dict[str, dict[str, str]] = {}  # name -> its code keys (with `keys`)
        self.names: dict[str, str] = {}        # name -> nodeid, everything collected
        self.files: dict[str, str] = {}        # name -> path of its benchmark module
        self.needs: dict[str, int] = {}        # name -> GPUs it needs
        self.selected: list[str] = []
        self.not_here: dict[str, int] = {}      # name -> GPUs it needs, more than this machine has
        self.problems: dict[str, str] = {}      # name -> what went wrong

    def pytest_collection_modifyitems(self, session, config, items) -> None:
        from fieldguide.measuring.pytest_plugin import needed_gpus

        self.names = {benchmark_name(item.nodeid): item.nodeid for item in items}
        self.files = {benchmark_name(item.nodeid): str(item.path) for item in items}
        self.needs = {benchmark_name(item.nodeid): needed_gpus(item) for item in items}
        if self.keys:  # as fieldguide.measuring.pytest_plugin keys a benchmark's record when it runs
            self.codes = {benchmark_name(item.nodeid): _code_now(config.rootpath, item) for item in items}
        keep, drop = [], []
        for item in items:
            name = benchmark_name(item.nodeid)
            wanted = not self.only or any(matches(p, name) for p in self.only)
            need = needed_gpus(item)
            if wanted and need > self.gpus:
                self.not_here[name] = need
                wanted = False
            if self.list_only:
                wanted = False
            (keep if wanted else drop).append(item)
            if wanted:
                self.selected.append(name)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep

    def pytest_runtest_logreport(self, report) -> None:
        name = benchmark_name(report.nodeid)
        if report.failed:
            self.problems[name] = _describe_failure(report)
        elif report.skipped and name not in self.problems:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
            self.problems[name] = f"was skipped ({reason}), so nothing was measured"

    def pytest_benchmark_update_machine_info(self, config, machine_info) -> None:
        from fieldguide.measuring import fingerprint

        machine_info["fieldguide"] = {**fingerprint.collect(), "complete": not self.only}

    def pytest_benchmark_update_commit_info(self, config, commit_info) -> None:
        # A GPU runner may get the tree without .git; the caller can name the commit instead.
        if os.environ.get("FIELDGUIDE_GIT_COMMIT"):
            commit_info.update(id=os.environ["FIELDGUIDE_GIT_COMMIT"], dirty=False,
                               error=None)

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.problems[report.nodeid or "collection"] = (
                "could not be collected:\n" + _indent(report.longreprtext)
            )


def _code_now(root: Path, item) -> dict[str, str] | None:
    from fieldguide.measuring.pytest_plugin import snippet_paths

    try:
        return code_keys(root, Path(item.path).resolve().relative_to(root).as_posix(),
                         item.originalname, snippet_paths(item))
    except (LookupError, SyntaxError, ValueError):
        return None  # never equal to a record's: measured again


def _describe_failure(report) -> str:
    text = report.longreprtext
    if "OutOfMemoryError" in text or "out of memory" in text.lower():
        return "ran out of GPU memory (torch.OutOfMemoryError); lower its sizes or free memory"
    last = [line for line in text.splitlines() if line.startswith("E ")]
    detail = "\n".join(last[-3:] or text.strip().splitlines()[-1:])
    return f"failed during {report.when}:\n{_indent(detail)}"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _cuda_device_count() -> int:
    try:
        import torch
    except ImportError as exc:
        raise TimingRunError(
            f"cannot import torch ({exc}); run `make timings` with a python3 that has torch"
        ) from None
    if not torch.cuda.is_available():
        raise TimingRunError(
            "no CUDA device: the timing run measures GPU work and needs a CUDA GPU "
            "(torch.cuda.is_available() is False). Committed timings are unchanged."
        )
    return torch.cuda.device_count()


def _validated(bench_json: Path, selected: list[str]) -> dict[str, Any]:
    """pytest-benchmark's JSON for the run, checked to hold every selected benchmark."""
    data = json.loads(bench_json.read_text(encoding="utf-8"))
    measured = {benchmark_name(b["fullname"]) for b in data["benchmarks"]}
    missing = [n for n in selected if n not in measured]
    if missing:
        raise TimingRunError(
            "these benchmarks ran but recorded no measurement (did they call `benchmark`?): "
            + ", ".join(missing)
        )
    return data


def write_atomically(path: Path, document: dict[str, Any]) -> None:
    """Write to a temporary file beside `path`, then rename over it: all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _measure(targets: list[str], only: list[str] | None, gpus: int, bench_json: Path | None,
             state_json: Path, keys: bool = False) -> None:
    """In a child process: pytest over `targets`; what happened goes to `state_json`. With
    `keys`, also each benchmark's code keys as the code is now, and this machine's fingerprint
    (a child's CUDA context ends with it, before anything is measured)."""
    import pytest

    selector = _Selector(only, gpus, list_only=bench_json is None, keys=keys)
    args = [*targets, *PYTEST_ARGS]
    args += [f"--benchmark-json={bench_json}"] if bench_json else ["--collect-only"]
    exit_code = pytest.main(args, plugins=[selector])
    state = {"exit_code": int(exit_code), "files": selector.files, "needs": selector.needs,
             "selected": selector.selected, "not_here": selector.not_here,
             "problems": selector.problems, "codes": selector.codes}
    if keys:
        from fieldguide.measuring import fingerprint

        state["fingerprint"] = fingerprint.collect()
    state_json.write_text(json.dumps(state), encoding="utf-8")


def _in_child(tmp: Path, tag: str, targets: list[str], only: list[str] | None, gpus: int,
              measure: bool, keys: bool = False) -> tuple[dict[str, Any], Path]:
    """Run _measure in a new Python; its state, and where its benchmark JSON is."""
    state_json, bench_json = tmp / f"{tag}.state.json", tmp / f"{tag}.benchmark.json"
    command = [sys.executable, "-m", "fieldguide.measuring.timing_run", "--child", str(state_json),
               "--gpus", str(gpus)]
    if measure:
        command += ["--bench-json", str(bench_json)]
    if keys:
        command += ["--keys"]
    if only:
        command += ["--only", *only]
    # Not PYTEST_XDIST_WORKER, when started from a test under pytest-xdist: in an xdist worker
    # pytest-benchmark turns itself off, and --benchmark-only is then an error.
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    ended = subprocess.run([*command, "--", *targets], cwd=ROOT, env=env)
    if not state_json.is_file():  # killed, or crashed in C (a segfault, an abort)
        where = ", ".join(Path(t).name for t in targets)
        return {"exit_code": ended.returncode, "files": {}, "needs": {}, "selected": [],
                "not_here": {}, "problems": {where: (
                    f"ended the process measuring it with exit code {ended.returncode} before "
                    "it could report (its output is above)")}}, bench_json
    return json.loads(state_json.read_text(encoding="utf-8")), bench_json


def _merged(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """One pytest-benchmark document from the modules' own, in the order they ran."""
    merged = dict(documents[0])
    merged["benchmarks"] = [b for document in documents for b in document["benchmarks"]]
    gpus = {d["machine_info"]["fieldguide"]["gpu_name"] for d in documents}
    if len(gpus) != 1:
        raise TimingRunError(f"the modules ran on different GPUs ({', '.join(sorted(gpus))})")
    return merged


def stale_or_new(folder: Path, codes: dict[str, dict[str, str] | None]) -> list[str]:
    """Of the benchmarks `codes` keys as they are now, those with no record in `folder` (one
    machine's runs) or whose newest records measured other code: what the strict build would
    call stale or missing for this machine."""
    try:
        timings = Timings.load(folder)
    except TimingError:  # no folder, or no run in it yet: everything is new here
        if folder.is_dir() and any(folder.glob("*.json")):
            raise
        return list(codes)
    recorded = set(timings.names)
    return [name for name, code in codes.items()
            if name not in recorded or code is None or timings.benchmark(name).code != code]


def runs_wanted_here(records: list[tuple[str | None, str]], lease: str | None) -> int:
    """How many more runs of a benchmark this lease should make, given the (lease, run id) of each
    run that measured its current code: enough for RUNS_WANTED in all and a run from a lease that
    has none yet, but where no other lease measured it, no more than RUNS_WANTED - 1 here, so the
    last run comes from another lease. A run without a lease counts toward the runs, never as a
    lease; a machine that records none (`lease` None) cannot tell leases apart and is told so by
    the caller."""
    leases = {found for found, _ in records if found}
    here = sum(1 for found, _ in records if lease and found == lease)
    others = leases - {lease}
    if others:
        need = max(0, RUNS_WANTED - len(records))
        if lease not in leases and len(leases) < LEASES_WANTED:
            need = max(need, 1)  # three runs from one lease still want a second lease
        return need
    need = min(RUNS_WANTED - 1 - here, RUNS_WANTED - len(records))
    return max(need, 1 if lease and lease not in leases else 0, 0)


def wanted_here(folder: Path, codes: dict[str, dict[str, str] | None], lease: str | None) -> list[str]:
    """Of the benchmarks `codes` keys as they are now, those this lease should measure (again):
    new or stale here, or short of RUNS_WANTED runs from LEASES_WANTED leases (runs_wanted_here)."""
    stale = set(stale_or_new(folder, codes))
    try:
        timings = Timings.load(folder)
    except TimingError:
        return list(codes)
    found = []
    for name in codes:
        records = [] if name in stale else [(r.run.lease, r.run.id) for r in timings.benchmark(name).records]
        if runs_wanted_here(records, lease):
            found.append(name)
    return found


def full_run_estimate(folder: Path, benchmarks: int) -> str | None:
    """How long a full run of `benchmarks` benchmarks takes on the machine of `folder`: the
    newest complete run's wall time, else the kept runs' seconds per benchmark, times how many."""
    try:
        runs = Timings.load(folder).runs
    except TimingError:
        return None
    timed = [r.fingerprint for r in runs if r.fingerprint.get("wall_seconds")
             and r.fingerprint.get("benchmarks_run")]
    if not timed:
        return None
    complete = [fp for fp in timed if fp.get("complete")]
    if complete and complete[-1]["benchmarks_run"] == benchmarks:
        seconds, how = complete[-1]["wall_seconds"], "as the newest complete run took"
    else:
        per = sum(fp["wall_seconds"] for fp in timed) / sum(fp["benchmarks_run"] for fp in timed)
        seconds = per * benchmarks
        how = (f"estimated from {len(timed)} kept runs: {per:.2f} s per benchmark, process "
               "start-ups included")
    return (f"a full run of {benchmarks} benchmarks on {folder.name} takes about "
            f"{seconds / 60:.0f} min ({how})")


def run(only: list[str] | None, out_dir: Path, list_only: bool = False,
        bench_dir: Path = BENCH_DIR, stale: bool = False,
        deadline: float | None = None, wanted: bool = False,
        keep_going: bool = False) -> Path | None:
    """Measure and write one run. With `deadline` (seconds from this call's start, collection
    included, so a caller's time budget holds however long collecting took), no module but the
    first starts after it: the modules measured by then are written as a partial run and the rest are
    named, so a run that a time limit would kill keeps what it measured. With `keep_going`, a
    module that fails costs its own measurements alone: the others are written as a partial run,
    the failures are named, and the caller is told by TimingRunError after the write."""
    called = time.perf_counter()  # the deadline counts from here: collecting took 20-30 s on a GPU
    stale = stale or wanted
    gpus = 0 if list_only and not stale else _cuda_device_count()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        listing, _ = _in_child(tmp, "collect", [str(bench_dir)], None, gpus, measure=False,
                               keys=stale)
        names = listing["files"]
        if list_only and not stale:  # what could be collected here (without a GPU, not every module can)
            print("\n".join(sorted(names)))
            return None
        if listing["problems"]:
            lines = [f"  {name} {what}" for name, what in sorted(listing["problems"].items())]
            raise TimingRunError("the benchmarks could not be collected:\n" + "\n".join(lines))
        here = [n for n in names if listing["needs"][n] <= gpus]
        if stale:
            folder = out_dir / machine_slug(listing["fingerprint"])
            estimate = full_run_estimate(folder, len(here))
            codes = {n: listing["codes"].get(n) for n in here}
            if wanted and gpus > 1:  # a machine of several measures what needs several; one GPU the rest
                codes = {n: code for n, code in codes.items() if listing["needs"][n] > 1}
            if wanted and not listing["fingerprint"].get("boot_id"):
                raise TimingRunError("--wanted counts machine leases by their boot_id, and this "
                                     "machine records none (/proc/sys/kernel/random/boot_id): "
                                     "use --stale or --only here")
            if only:  # --only beside --stale/--wanted narrows what they pick: a round's plan
                codes = {n: code for n, code in codes.items() if any(matches(p, n) for p in only)}
            try:
                only = (wanted_here(folder, codes, listing["fingerprint"].get("boot_id")) if wanted
                        else stale_or_new(folder, codes))
            except TimingError as exc:
                raise TimingRunError(str(exc)) from None
            if not only:
                have = (f"{RUNS_WANTED} runs from {LEASES_WANTED} leases (or all this lease should "
                        "make)" if wanted else "a measurement")
                print(f"nothing to measure: {folder.name} has {have} of the current code "
                      f"of each of the {len(codes)} benchmarks this machine measures")
                if estimate:
                    print(estimate)
                return None
            what = ("stale, new or short of runs" if wanted else "stale or new")
            print(f"{len(only)} of {len(codes)} benchmarks are {what} on {folder.name}: "
                  + ", ".join(only))
            if list_only:  # what `--stale` would measure
                if estimate:
                    print(estimate)
                return None
        unknown = [p for p in only or [] if not any(matches(p, n) for n in names)]
        if unknown:
            lines = []
            for name in unknown:
                close = difflib.get_close_matches(name, names, n=3)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                lines.append(f"  unknown benchmark {name!r}{hint}")
            raise TimingRunError(
                "nothing was run:\n" + "\n".join(lines) + "\n  `make timings-list` shows the names"
            )
        wanted = [n for n in names if not only or any(matches(p, n) for p in only)]
        not_here = {n: listing["needs"][n] for n in wanted if listing["needs"][n] > gpus}
        modules = list(dict.fromkeys(names[n] for n in wanted if n not in not_here))
        if not modules:
            raise TimingRunError("nothing to measure on this machine: every selected benchmark "
                                 f"needs more GPUs than its {gpus}")

        started = time.perf_counter()
        selected, problems, documents, cut = [], {}, [], []
        for number, module in enumerate(modules):
            if deadline is not None and number and time.perf_counter() - called > deadline:
                cut = modules[number:]
                break
            state, bench_json = _in_child(tmp, f"module{number}", [module], only, gpus, measure=True)
            selected += state["selected"]
            problems.update(state["problems"])
            if state["exit_code"] not in (0, 5) and not state["problems"]:
                problems[Path(module).name] = f"ended with pytest exit code {state['exit_code']}"
            if state["selected"] and not state["problems"] and not bench_json.is_file():
                problems[Path(module).name] = "ran but wrote no benchmark JSON"
            elif state["selected"] and not state["problems"]:
                documents.append(_validated(bench_json, state["selected"]))
        if problems:
            lines = [f"  {name} {what}" for name, what in sorted(problems.items())]
            failed = (f"{len(problems)} benchmark(s) did not produce a measurement; "
                      + ("the modules that measured are written as a partial run" if keep_going
                         and documents else "the timings file was not written")
                      + ":\n" + "\n".join(lines))
            if not (keep_going and documents):
                raise TimingRunError(failed)
            # a module with a problem added no document: keep the names of those that did
            selected = [benchmark_name(b["fullname"]) for d in documents for b in d["benchmarks"]]
        if not documents:
            raise TimingRunError("the selected benchmarks recorded no measurement")

        document = _merged(documents)
        fp = document["machine_info"]["fieldguide"]
        fp["complete"] = not only and not cut and not problems
        fp["benchmarks_run"] = len(selected)
        fp["wall_seconds"] = round(time.perf_counter() - started, 1)
        fp["process_per_module"] = True

    commit = (document.get("commit_info", {}).get("id") or "unknown")[:10]
    stamp = document["datetime"].replace("-", "").replace(":", "")[:15]  # 20261121T023810
    path = out_dir / machine_slug(fp) / f"{stamp}Z_{commit}.json"
    for n in range(2, 100):  # never overwrite a kept run, even one from the same second
        if not path.exists():
            break
        path = path.with_name(f"{stamp}Z_{commit}-{n}.json")
    write_atomically(path, document)

    if problems:
        print(f"make timings: error: {failed}", file=sys.stderr)
    if cut:
        left = [n for n in wanted if names[n] in cut]
        print(f"not measured: the deadline ({deadline:.0f} s) passed before {len(cut)} module(s) "
              f"started; measure them with --only {' '.join(left)}")
    if not_here:
        print("not run on this machine (too few GPUs): "
              + ", ".join(f"{n} (needs {g})" for n, g in sorted(not_here.items())))
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    print(f"wrote {len(selected)} benchmark(s) to {shown} in {fp['wall_seconds']} s")
    if full_run := full_run_estimate(path.parent, len(here)):
        print(full_run)
    if problems:
        raise TimingRunError(f"{len(problems)} benchmark(s) failed (named above); the others were "
                             f"written to {shown}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make timings", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="benchmark names to re-measure; `*` matches anything ('pinned_memory.*'); "
                             "with --stale or --wanted, what they may pick from")
    parser.add_argument("--out", type=Path, default=TIMINGS_DIR, help="directory of timings files")
    parser.add_argument("--list", action="store_true", help="list benchmark names and exit")
    parser.add_argument("--stale", action="store_true",
                        help="only the benchmarks this GPU never measured, or whose code changed since")
    parser.add_argument("--wanted", action="store_true",
                        help="those --stale picks, and those short of 3 runs from 2 leases (at "
                             "most 2 from this one); on a machine of several GPUs, only "
                             "benchmarks that need several")
    parser.add_argument("--keep-going", action="store_true",
                        help="a failing module costs only its own measurements: write the others "
                             "as a partial run, name the failures, exit 2")
    parser.add_argument("--deadline", type=float, metavar="SECONDS",
                        help="start no benchmark module after this many seconds from the command's "
                             "start (collection included); write what was measured by then as a "
                             "partial run")
    # Internal: one child process of the run (see _in_child).
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--gpus", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--bench-json", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--keys", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("targets", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _measure(args.targets, args.only, args.gpus, args.bench_json, args.child, keys=args.keys)
        return 0
    try:
        run(args.only, args.out, list_only=args.list, stale=args.stale, deadline=args.deadline,
            wanted=args.wanted, keep_going=args.keep_going)
    except TimingRunError as exc:
        print(f"make timings: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
