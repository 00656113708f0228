"""`make gpu-round`: what a change needs measured on this GPU machine, inside one device call.

    python3 -m fieldguide.measuring.gpu_round                          # timings, then outputs
    python3 -m fieldguide.measuring.gpu_round --steps timings,outputs --budget 540 --archive round.tar.gz

Steps, in this order, each started only while the budget (seconds for the whole call) has room:

- `timings`: the timing run's `--wanted` (fieldguide/measuring/timing_run.py) again and again: every
  benchmark this machine measures that is new, stale, or short of three runs from two machine
  leases (at most two from this lease, so the third comes from another), until none is left.
  Each pass is a run of its own, written atomically; a pass that would outlast the budget stops
  starting modules (`--deadline`) and keeps what it measured.
- `outputs`: what each page's code prints, one notebook at a time with the GPU to itself, for
  the pages whose blocks have no such output on this machine (fieldguide/notebooks/record_outputs.py).
- `test-gpu`: `make test-gpu` (PYTEST_ARGS narrows it).

Timing and outputs run alone on the GPU, never beside the tests. The round prints what each step
did and the minutes it took, and `--archive` packs every file the round wrote under timings/ and
outputs/ (and the log) into one tarball after each step, for a machine that returns few files.
A call records what fits: call it again until the timings say nothing is left and no page is.
Unpack each archive into the checkout before the next call (a call sends the checkout anew).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from fieldguide import ROOT

STEPS = ("timings", "outputs", "test-gpu")
RESERVE = 150   # seconds a timing module may still run after the last one started (the longest
                # single-GPU module took about 120 s on an H200, 2026-11-24)
RESERVE_NOTEBOOK = 60  # seconds the last notebook may still run after it started
TEST_GPU_SECONDS = 420  # make test-gpu on one H200: 373 s (2026-11-28, at 6a4933d)
NOTHING = "nothing to measure"


def _run(command: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run `command` in the tree, its output to the terminal and to `log`; (exit code, output)."""
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env)
        text = []
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            out.write(line)
            text.append(line)
        return proc.wait(), "".join(text)


def filesystem_now(folder: Path) -> float:
    """Now, as the filesystem stamps a file written in `folder`. The kernel stamps a file's
    mtime from a coarser clock than time.time(), up to a tick behind it, so a file written just
    after time.time() can look older than that time (make test once archived one of two files
    written in the same millisecond, 2026-11-28): compare mtimes with mtimes."""
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".round-start-") as marker:
        return os.fstat(marker.fileno()).st_mtime


def written_since(start: float, folders: tuple[str, ...] = ("timings", "outputs")) -> list[Path]:
    """Files under `folders` modified since `start` (seconds since the epoch)."""
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.stat().st_mtime >= start and not path.name.startswith("."):
                found.append(path)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make gpu-round", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="timings,outputs",
                        help=f"comma-separated, of {', '.join(STEPS)} (default: timings,outputs; "
                             "test-gpu in a call of its own)")
    parser.add_argument("--budget", type=float, default=570,
                        help="seconds for the whole call (a device call may last 600)")
    parser.add_argument("--passes", type=int, default=3, help="timing passes at most")
    parser.add_argument("--archive", type=Path, help="a .tar.gz of what the round wrote")
    parser.add_argument("--only", nargs="+", metavar="NAME", default=[],
                        help="timings: pick only among these benchmarks ('pipeline_parallelism.*'): "
                             "what a round's plan leaves for a later lease is left out")
    parser.add_argument("--log", type=Path, default=Path("gpu-round.log"))
    args = parser.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown step(s) {', '.join(unknown)}; known: {', '.join(STEPS)}")

    began, wall = time.perf_counter(), filesystem_now(ROOT)
    log = args.log if args.log.is_absolute() else ROOT / args.log
    log.write_text("", encoding="utf-8")
    python = sys.executable
    done: list[str] = []
    status = 0

    def left() -> float:
        return args.budget - (time.perf_counter() - began)

    for step in steps:
        started = time.perf_counter()
        if step == "timings":
            for number in range(1, args.passes + 1):
                deadline = left() - RESERVE
                if deadline <= 0:
                    done.append(f"timings pass {number}: not started, {left():.0f} s left")
                    break
                code, text = _run([python, "-m", "fieldguide.measuring.timing_run", "--wanted",
                                   "--keep-going", "--deadline", f"{deadline:.0f}",
                                   *(["--only", *args.only] if args.only else [])], log)
                if code:  # the modules that measured were written; the failures are named above
                    status = code
                    done.append(f"timings pass {number}: failed (exit {code}): " + next(
                        (line for line in text.splitlines() if line.startswith("wrote ")), "nothing written"))
                    break
                if NOTHING in text:
                    done.append(f"timings: nothing left to measure after {number - 1} pass(es)")
                    break
                done.append(f"timings pass {number}: " + next(
                    (line for line in text.splitlines() if line.startswith("wrote ")), "written"))
        elif step == "outputs":
            if left() <= 0:
                done.append(f"outputs: not started, {left():.0f} s left")
                continue
            code, text = _run([python, "-m", "fieldguide.notebooks.record_outputs",
                               "--deadline", f"{left() - RESERVE_NOTEBOOK:.0f}"], log)
            status = status or code
            done.append(f"outputs: exit {code}; " + next(
                (line for line in text.splitlines() if line.startswith("make outputs:")), ""))
        elif step == "test-gpu":
            if left() < TEST_GPU_SECONDS:  # it has no deadline: started short, the call would die
                done.append(f"test-gpu: not started, {left():.0f} s left (it takes about "
                            f"{TEST_GPU_SECONDS} s on an H200)")
                continue
            code, text = _run(["make", "test-gpu"], log, env=dict(os.environ))
            status = status or code
            done.append(f"test-gpu: exit {code}; " + next(
                (line for line in reversed(text.splitlines()) if " in " in line and "passed" in line), ""))
        done[-1] += f" ({(time.perf_counter() - started) / 60:.1f} min)"
        if args.archive:  # after every step: a call cut off later still returns what was written
            _archive(args.archive, written_since(wall) + [log])

    summary = [f"make gpu-round: {(time.perf_counter() - began) / 60:.1f} min in all", *done]
    print("\n".join(summary), flush=True)
    with log.open("a", encoding="utf-8") as out:
        out.write("\n".join(summary) + "\n")
    if args.archive:
        files = written_since(wall) + [log]
        _archive(args.archive, files)
        print(f"archived {len(files)} file(s) in {args.archive}")
    return status


def _archive(archive: Path, files: list[Path]) -> None:
    """Pack `files` into `archive` (written beside it, then renamed over it)."""
    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        for path in files:
            name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
            tar.add(path, arcname=name)
    partial.replace(archive)


if __name__ == "__main__":
    sys.exit(main())
