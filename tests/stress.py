"""The stress check (`make stress`): every way the tests, snippets and benchmarks start a local
group of processes, launched N times each, alone and beside busy CPUs; failures counted by
cause, and the result appended to benchmarks/loop/stress.json (the contributing guide shows it).

    python -m tests.stress --runs 20                 # every case, 20 launches alone
    python -m tests.stress --runs 20 --load 2        # and 20 more beside 2 busy processes
    python -m tests.stress --cases exercises-fork,torchrun-2 --runs 200 --no-record

A launch does what the suite's launch does, with a small worker: join the group, one
all-reduce, a barrier, leave. A flake of a launch is a failure of its set-up or of its exit,
not of the work, so the work is kept small and the launches many.

Run as a file under torchrun (`torchrun ... tests/stress.py OUT_DIR`), this file is that worker.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a file by torchrun, from another folder
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "loop" / "stress.json"
LAUNCH_TIMEOUT = 120  # seconds: a launch still running then has hung
MAX_LOAD = os.cpu_count() or 2  # busy processes at most: one a core (2 on the shared machine)
MAX_LOAD_S = 900      # a busy process ends by itself after this, whatever happens here


# --- The worker: each rank of a launch ------------------------------------------------------------

def work(rank: int, world_size: int) -> int:
    """One all-reduce and a barrier in the group this process has joined; returns the sum."""
    import torch
    import torch.distributed as dist

    total = torch.ones(1)
    dist.all_reduce(total)
    dist.barrier()
    assert int(total.item()) == world_size, (total, world_size)
    return rank


def torchrun_worker(out: Path) -> None:
    """A rank under torchrun: join the group torchrun described, work, and write what it saw
    into `out` (the folder it runs in: run_on_ranks's, or the page's as train.py)."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    work(rank, world_size)
    dist.destroy_process_group()
    (out / f"rank{rank}.json").write_text(json.dumps({"rank": rank, "backend": "gloo"}))


# --- The cases: one launch each, as the suite launches -------------------------------------------

class LaunchFailed(Exception):
    """A launch that failed; the message is what it printed (the cause is read from it)."""


def nothing(rank: int, world_size: int) -> int:
    """Work that sends nothing and ends at once (exercise 1's sends nothing either)."""
    return rank


def _exercises(method: str):
    """The exercises' launch() of work that sends nothing: such work met gloo's "Connection
    closed by peer" (a process that finished while another was still connecting to it), the
    sooner the work ends the more often (7 of 500 launches of `nothing`, 1 of 500 of exercise
    1's samples_seen beside 2 busy processes, none of 500 alone)."""
    def launch(tmp: Path) -> None:
        from snippets.several_gpus import several_gpus_exercises as snippet
        from tests.helpers import within

        snippet.start_method = lambda: method  # as the tests do: fork under xdist, spawn else
        try:
            ranks = within(LAUNCH_TIMEOUT, lambda: snippet.launch(nothing))
        except AssertionError:
            raise LaunchFailed(f"hung: launch() still waiting after {LAUNCH_TIMEOUT} s") from None
        if isinstance(ranks, Exception):  # the child's error, raised in the parent
            raise LaunchFailed(f"{type(ranks).__name__}: {ranks}")
        assert ranks == [0, 1], ranks
    return launch


def _torchrun(n: int):
    def launch(tmp: Path) -> None:
        from tests.helpers import run_on_ranks

        try:
            run_on_ranks(Path(__file__), "gloo", n, tmp, timeout=LAUNCH_TIMEOUT)
        except AssertionError as exc:
            raise LaunchFailed(str(exc)) from exc
        except subprocess.TimeoutExpired as exc:
            raise LaunchFailed(f"hung: torchrun still running after {LAUNCH_TIMEOUT} s\n"
                               f"{_text(exc.stderr)[-3000:]}") from None
    return launch


def _pair(tmp: Path) -> None:
    """The two-GPU benchmarks' harness on CPU processes, in a fresh interpreter (as its test)."""
    code = ("from benchmarks import two_ranks\nfrom tests import stress\n"
            "with two_ranks.Pair(cpu=True) as pair:\n"
            "    pair.call(stress.work, 0, 2)\n"
            "assert pair.follower.returncode == 0\n")
    _run([sys.executable, "-c", code], cwd=ROOT)


def _ranks(n: int):
    def launch(tmp: Path) -> None:
        code = ("from benchmarks import ranks\nfrom tests import stress\n"
                f"with ranks.Ranks({n}, cpu=True) as group:\n"
                f"    group.call(stress.work, 0, {n})\n"
                "assert all(f.returncode == 0 for f in group.followers)\n")
        _run([sys.executable, "-c", code], cwd=ROOT)
    return launch


def _two_nodes(tmp: Path) -> None:
    """The many-machines page's "on every machine" block, started twice on this host as its
    test starts it (one "node" 3 s after the other), with this file as its train.py."""
    from tests.pages import test_many_machines as page

    shutil.copy(Path(__file__), page.with_torchrun(tmp) / "train.py")
    nodes, outputs = page.two_nodes(tmp, page.page_block("on every machine"),
                                    timeout=LAUNCH_TIMEOUT)
    failed = [f"node {n}: exit status {node.returncode}\n{err[-3000:]}"
              for n, (node, (_, err)) in enumerate(zip(nodes, outputs, strict=True))
              if node.returncode != 0]
    if failed:
        raise LaunchFailed("\n".join(failed))


class Skipped(Exception):
    """A case that cannot run here (no Slurm); the message says why."""


class _Slurm:
    """One Slurm cluster for the slurm-job case's launches, started at its first launch and
    stopped at the end of the phase."""

    def __init__(self):
        self.stack = contextlib.ExitStack()
        self.running = None

    def cluster(self):
        from tests.slurm import cluster

        if self.running is None:
            try:
                self.running = self.stack.enter_context(cluster.local_cluster(nodes=2, cpus=1))
            except cluster.ClusterUnavailable as exc:
                raise Skipped(str(exc).splitlines()[0]) from None
        return self.running

    def close(self):
        self.stack.close()
        self.running = None


SLURM = _Slurm()


def _slurm_cluster(tmp: Path) -> None:
    """The Slurm test's cluster (tests/slurm/cluster.py): started, every node idle, stopped."""
    from tests.slurm import cluster

    if cluster.missing_commands():
        raise Skipped("Slurm is not installed (make slurm)")
    try:
        with cluster.local_cluster(nodes=2, cpus=1):
            pass
    except cluster.ClusterUnavailable as exc:
        raise LaunchFailed(str(exc)) from None


def _slurm_job(tmp: Path) -> None:
    """The many-machines page's train.sbatch, submitted the tests' way, with this file as its
    train.py: two nodes, one torchrun on each, one c10d rendezvous."""
    from tests.helpers import reserved_port
    from tests.pages import test_many_machines as page

    running = SLURM.cluster()
    shutil.copy(Path(__file__), page.with_torchrun(tmp) / "train.py")
    with reserved_port() as port:
        run = page.SlurmRun(running, tmp, port)
        job = running.wait(run.submit(), timeout=LAUNCH_TIMEOUT)
        if (job.state, job.exit_code) != ("COMPLETED", "0:0"):
            raise LaunchFailed(f"sbatch: {run.report(job)}")


def _run(command: list[str], cwd: Path, env: dict | None = None) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    try:
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                                timeout=LAUNCH_TIMEOUT, start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        raise LaunchFailed(f"hung: still running after {LAUNCH_TIMEOUT} s\n"
                           f"{_text(exc.stderr)[-3000:]}") from None
    if result.returncode != 0:
        raise LaunchFailed(f"exit status {result.returncode}\n{result.stderr[-4000:]}")


def _text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else (value or "")


CASES = {
    "exercises-fork": _exercises("fork"),    # launch() in pytest-xdist's workers, notebooks
    "exercises-spawn": _exercises("spawn"),  # launch() from `python -m` and on GPU machines
    "torchrun-2": _torchrun(2),              # torchrun --standalone: the several-GPUs tests
    "torchrun-4": _torchrun(4),
    "two-nodes": _two_nodes,                 # two torchruns, one c10d rendezvous (many machines)
    "pair-cpu": _pair,                       # benchmarks/two_ranks.py, as its test runs it
    "ranks-4-cpu": _ranks(4),                # benchmarks/ranks.py
    "slurm-cluster": _slurm_cluster,         # the Slurm test's daemons, started and stopped
    "slurm-job": _slurm_job,                 # the page's sbatch job on that cluster
}
# The code each case launches: the suite's own launch code, not this file's driver. A recorded
# launch counts towards its case's total (the contributing guide's table) only while these files
# are what they were when it ran: `code` in each record holds the files and their key.
CASE_FILES = {
    "exercises-fork": ["snippets/several_gpus/several_gpus_exercises.py"],
    "exercises-spawn": ["snippets/several_gpus/several_gpus_exercises.py"],
    "torchrun-2": ["tests/helpers.py"],
    "torchrun-4": ["tests/helpers.py"],
    "two-nodes": ["tests/pages/test_many_machines.py", "docs/several-gpus/many-machines.md",
                  "tests/helpers.py"],
    "pair-cpu": ["benchmarks/two_ranks.py"],
    "ranks-4-cpu": ["benchmarks/ranks.py", "benchmarks/two_ranks.py"],
    "slurm-cluster": ["tests/slurm/cluster.py"],
    "slurm-job": ["tests/slurm/cluster.py", "tests/pages/test_many_machines.py",
                  "docs/several-gpus/many-machines.md", "tests/helpers.py"],
}


def case_code(name: str) -> dict:
    """What a record keeps of case `name`'s code: its files and their key (the guide's table
    counts the record while the key is the files' now)."""
    from fieldguide.rendering.loop_results import code_key

    files = CASE_FILES[name]
    return {"files": files, "key": code_key(files, lambda path: (ROOT / path).read_bytes())}


# Launches of a case per --runs: exercises-fork takes a fraction of a second (the others start
# Pythons that import torch: seconds), and its race showed in a few launches in a hundred.
SCALE = {"exercises-fork": 20}


# --- Causes: a failure's text, classified --------------------------------------------------------

CAUSES = [  # (cause, pattern in the failure's text); the first that matches names it
    ("hung", r"\Ahung"),
    ("gloo connectFullMesh: connection closed by peer", r"connectFullMesh.*closed by peer|"
     r"closed by peer(.|\n)*connectFullMesh"),
    ("gloo connectFullMesh: other", r"connectFullMesh"),
    ("port taken (address already in use)", r"[Aa]ddress already in use|EADDRINUSE"),
    ("connection refused", r"Connection refused|ECONNREFUSED"),
    ("connection reset or closed by peer", r"reset by peer|closed by peer"),
    ("rendezvous failed", r"Rendezvous\w*Error|rendezvous"),
    ("store timed out", r"[Ss]ocket Timeout|timed out|Timeout"),
]


def cause_of(text: str) -> str:
    for cause, pattern in CAUSES:
        if re.search(pattern, text, re.M):
            return cause
    lines = [line for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"\w*(Error|Exception)\b", line)]
    return "other: " + (errors or lines or ["(no output)"])[-1].strip()[:160]


# --- Load: busy processes that end by themselves --------------------------------------------------

@contextlib.contextmanager
def busy(processes: int, seconds: float):
    """`processes` busy loops (at most MAX_LOAD), each ending after `seconds` even if this process
    dies first."""
    seconds = min(seconds, MAX_LOAD_S)
    loops = [subprocess.Popen([sys.executable, "-c", "import time\nend = time.monotonic() + "
                               f"{seconds}\nwhile time.monotonic() < end: pass"])
             for _ in range(min(processes, MAX_LOAD))]
    try:
        yield loops
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


# --- The run ---------------------------------------------------------------------------------------

def stress(cases: list[str], runs: int, log=print, load_until: float | None = None,
           until: float | None = None) -> dict:
    """`runs` launches of each case, one after the other; what failed, by cause. With
    `load_until` (a time.monotonic() when the busy processes end), how many of each case's
    launches started while they still ran. With `until` (a time.monotonic()), no launch starts
    after it: a case cut short records the launches it made, and says so."""
    found = {}
    for name in cases:
        causes, examples, started, loaded = Counter(), {}, time.monotonic(), 0
        launches, wanted = 0, runs * SCALE.get(name, 1)
        for i in range(wanted):
            if until is not None and time.monotonic() >= until:
                break
            launches += 1
            loaded += load_until is not None and time.monotonic() < load_until
            with tempfile.TemporaryDirectory(prefix="fieldguide-stress-") as tmp:
                try:
                    CASES[name](Path(tmp))
                except Skipped as exc:
                    found[name] = {"skipped": str(exc)}
                    log(f"{name}: skipped ({exc})")
                    break
                except Exception as exc:  # any failure is counted, by its text
                    text = str(exc) if isinstance(exc, LaunchFailed) else f"{type(exc).__name__}: {exc}"
                    cause = cause_of(text)
                    causes[cause] += 1
                    examples.setdefault(cause, text[-3000:])
                    log(f"  {name} #{i + 1}: FAILED ({cause})")
            if (i + 1) % 50 == 0 and i + 1 < wanted:
                log(f"  {name}: {i + 1} launches, {sum(causes.values())} failed")
        if name in found:  # skipped
            continue
        if not launches:
            log(f"{name}: no launch started before the time was up")
            continue
        seconds = time.monotonic() - started
        found[name] = {"launches": launches, "failures": sum(causes.values()),
                       "causes": dict(causes), "s_per_launch": round(seconds / launches, 2),
                       "examples": examples,
                       **({"cut_short_of": wanted} if launches < wanted else {}),
                       **({"launches_under_load": loaded} if load_until is not None else {})}
        log(f"{name}: {launches} launches, {found[name]['failures']} failed "
            f"{dict(causes) or ''} ({seconds / launches:.2f} s each)")
    SLURM.close()
    return found


def merge_streams(parts: list[dict], streams: int) -> dict:
    """One case's result from its streams' results: launches, failures and causes summed, the
    first example of each cause, one launch's seconds the median stream's."""
    if any("skipped" in part for part in parts):
        return next(part for part in parts if "skipped" in part)
    merged = {"launches": 0, "failures": 0, "causes": {}, "examples": {}, "streams": streams}
    if any("cut_short_of" in part for part in parts):
        merged["cut_short_of"] = sum(part.get("cut_short_of", part["launches"]) for part in parts)
    for part in parts:
        merged["launches"] += part["launches"]
        merged["failures"] += part["failures"]
        for cause, n in part["causes"].items():
            merged["causes"][cause] = merged["causes"].get(cause, 0) + n
        for cause, text in part["examples"].items():
            merged["examples"].setdefault(cause, text)
    per_launch = sorted(part["s_per_launch"] for part in parts)
    merged["s_per_launch"] = per_launch[len(per_launch) // 2]
    return merged


def stress_in_streams(cases: list[str], runs: int, streams: int, log=print,
                      load_until: float | None = None, seconds: float | None = None) -> dict:
    """As stress(), with each case's launches split over `streams` driver processes, every case's
    streams running at once: for a machine with many cores (a GPU host's 16 or 32), where one
    launch at a time would leave most of them idle. Each stream makes ceil(runs / streams)."""
    per_stream = -(-runs // streams)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parts: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="fieldguide-streams-") as tmp:
        children = []
        for name in cases:
            for i in range(streams):
                out, log_file = Path(tmp) / f"{name}-{i}.json", Path(tmp) / f"{name}-{i}.log"
                with log_file.open("w") as sink:
                    children.append((name, out, log_file, subprocess.Popen(
                        [sys.executable, "-m", "tests.stress", "--cases", name, "--runs",
                         str(per_stream), "--no-record", "--json", str(out),
                         *(["--max-seconds", str(seconds)] if seconds else [])],
                        cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)))
        for name, out, log_file, child in children:
            child.wait()
            if not out.is_file():  # the driver itself failed: say so, count nothing
                raise RuntimeError(f"a {name} stream ended without a result (exit status "
                                   f"{child.returncode}):\n{log_file.read_text()[-3000:]}")
            part = json.loads(out.read_text())["phases"]["alone"].get(name)
            if part:  # none: the stream's time was up before its first launch
                parts.setdefault(name, []).append(part)
    found = {name: merge_streams(case_parts, streams) for name, case_parts in parts.items()}
    for name, merged in found.items():
        if "skipped" in merged:
            log(f"{name}: skipped ({merged['skipped']})")
            continue
        if load_until is not None:  # the busy processes outlast the phase, or it failed
            merged["launches_under_load"] = (merged["launches"] if time.monotonic() < load_until
                                             else None)
        log(f"{name}: {merged['launches']} launches in {streams} streams, "
            f"{merged['failures']} failed {merged['causes'] or ''} "
            f"({merged['s_per_launch']:.2f} s each in a stream)")
    return found


def record(result: dict, path: Path = RESULTS) -> None:
    """Append one run to the results file (atomically: a crash leaves the old file whole)."""
    document = json.loads(path.read_text()) if path.is_file() else {"runs": []}
    document["runs"].append(result)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, indent=1) + "\n")
    tmp.replace(path)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5,
                        help="launches of each case, alone and again under load (default 5; "
                             f"times {SCALE} for the cheap ones)")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--load", type=int, default=0,
                        help=f"busy processes beside a second round of launches (at most {MAX_LOAD})")
    parser.add_argument("--streams", type=int, default=1,
                        help="drivers per case, all cases' at once (default 1: one launch at a "
                             "time); for a machine with many cores")
    parser.add_argument("--max-seconds", type=float,
                        help="no launch starts this long after its round began (a device call's "
                             "limit); a case cut short records the launches it made")
    parser.add_argument("--load-only", action="store_true",
                        help="no launches alone: only the round beside --load busy processes "
                             "(where one device call cannot hold both)")
    parser.add_argument("--note", default="", help="said beside the result in the guide")
    parser.add_argument("--no-record", action="store_true", help=f"do not append to {RESULTS}")
    parser.add_argument("--json", type=Path, help="also write this run's result here")
    args = parser.parse_args(argv)
    if args.load_only and not args.load:
        parser.error("--load-only needs --load N")
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; known: {', '.join(CASES)}")
    started = datetime.datetime.now(datetime.UTC)
    result = {"date": started.isoformat(timespec="seconds"), "commit": _commit(),
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "load_before": [round(x, 2) for x in os.getloadavg()]},
              "runs_per_case": args.runs, "streams": args.streams, "note": args.note,
              "code": {name: case_code(name) for name in cases}, "phases": {}}
    with contextlib.suppress(ImportError):
        import torch

        result["machine"]["torch"] = torch.__version__
    def until():
        return time.monotonic() + args.max_seconds if args.max_seconds else None

    if args.streams > 1:
        def phase(load_until=None):
            return stress_in_streams(cases, args.runs, args.streams, load_until=load_until,
                                     seconds=args.max_seconds)
    else:
        def phase(load_until=None):
            return stress(cases, args.runs, load_until=load_until, until=until())
    print(f"alone: {args.runs} launches of each of {', '.join(cases)}"
          + (f" in {args.streams} streams each" if args.streams > 1 else ""))
    if not args.load_only:
        result["phases"]["alone"] = phase()
        result["machine"]["load_after_alone"] = [round(x, 2) for x in os.getloadavg()]
    if args.load:
        load = min(args.load, MAX_LOAD)
        print(f"beside {load} busy processes: {args.runs} launches of each")
        with busy(load, MAX_LOAD_S):
            result["phases"][f"load-{load}"] = phase(load_until=time.monotonic() + MAX_LOAD_S)
    result["machine"]["load_after"] = [round(x, 2) for x in os.getloadavg()]
    result["seconds"] = round((datetime.datetime.now(datetime.UTC) - started).total_seconds(), 1)
    failures = sum(c.get("failures", 0) for phase in result["phases"].values()
                   for c in phase.values())
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if not args.no_record:
        record(result)
        print(f"appended to {RESULTS.relative_to(ROOT)}")
    print(f"{failures} failed launches in {result['seconds']:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    if "RANK" in os.environ and "LOCAL_RANK" in os.environ:  # a rank under torchrun
        torchrun_worker(Path.cwd())
    else:
        sys.exit(main())
