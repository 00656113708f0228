"""The contributor's loop, timed: `make loop-benchmark` (python3 -m benchmarks.loop.run).

Each step runs in a fresh clone of HEAD (committed work only), as a contributor's would:

- build:  `make build` (mkdocs build --strict) twice: cold (nothing built or cached yet in the
          clone) and warm (again, nothing changed);
- serve:  `make serve` from the clone, its virtual environment installed first from
          requirements/docs.txt (--no-install: with the tests' interpreter instead), until the
          home page answers; then a sentence added to a page's prose, until the served page
          shows it;
- check:  `make check PAGE=...` (one page: its tests, snippets, notebook, a strict build);
- test:   `make test` with the tests' interpreter (its install, torch included, is not timed).

Each step records its wall seconds, the CPU seconds of everything it ran (the children's
rusage: what the same work costs on a machine nobody else uses), its exit status, and the load
average before and after, since on a shared machine the wall time says more about the others'
work than about ours. The results are appended to benchmarks/loop/results.json (one record per
run: date, commit, machine), which docs/contributing.md shows (fieldguide/rendering/loop_results.py).

    python3 -m benchmarks.loop.run [--steps build,serve,check,test] [--page docs/...md]
                                   [--python .venv/bin/python] [--no-install] [--note TEXT]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "loop" / "results.json"
STEPS = ("build", "serve", "check", "test")
PAGE = "docs/foundations/cpu-vs-gpu.md"   # a typical page: its module and its notebook run on the CPU
EDITED = "docs/execution/events.md"
SERVE_LIMIT = 600   # seconds before the serve step gives up waiting
# What each measurement is, and the targets for an idle 2-core machine (seconds); both
# go into every record, so the guide's table (fieldguide/rendering/loop_results.py) reads them from there.
LABELS = {
    "build_cold": "Strict build, cold (a fresh clone)",
    "build_warm": "Strict build, warm (nothing changed since)",
    "serve_first_answer": "`make serve` on a fresh clone, its install included, until it answers",
    "serve_reload_after_prose_edit": "`make serve`: a prose edit shown",
    "check_one_page": "`make check PAGE={page}`",
    "make_test": "`make test` on a fresh clone (its install not timed)",
}
TARGETS = {"build_cold": 30, "build_warm": 12, "serve_first_answer": 120,
           "serve_reload_after_prose_edit": 5, "check_one_page": 90, "make_test": 600}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tree_cpu(pid: int) -> float:
    """CPU seconds so far of a running process and its descendants (/proc), such as a server
    that has not exited, which the children's rusage does not count yet."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks   # utime, stime
    tree, grew = {pid}, True
    while grew:
        found = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= found
        grew = bool(found)
    return sum(used.get(p, 0.0) for p in tree)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class Timer:
    """Wall and children's CPU seconds of a block, with the load average around it."""

    def __enter__(self):
        self.load_before, self.cpu, self.wall = _load(), _children_cpu(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.wall_s = round(time.perf_counter() - self.wall, 1)
        self.cpu_s = round(_children_cpu() - self.cpu, 1)
        self.load_after = _load()

    def record(self, **extra) -> dict:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "load_before": self.load_before,
                "load_after": self.load_after, **extra}


def make(clone: Path, python: str, *args: str, log: Path) -> int:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FIELDGUIDE_BUILT_SITE")}
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n$ make {' '.join(args)}\n")
        out.flush()
        return subprocess.run(["make", *args, f"PY={python}"], cwd=clone, env=env, stdout=out,
                              stderr=subprocess.STDOUT).returncode


def fresh_clone(where: Path) -> Path:
    clone = where / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    return clone


def step_build(clone: Path, python: str, log: Path) -> dict:
    results = {}
    for kind in ("cold", "warm"):
        with Timer() as timer:
            code = make(clone, python, "build", log=log)
        results[f"build_{kind}"] = timer.record(rc=code)
    return results


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode("utf-8", "replace")
    except OSError:
        return None


def _wait_for(url: str, until, limit: float) -> bool:
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        body = _get(url)
        if body is not None and until(body):
            return True
        time.sleep(0.25)
    return False


def step_serve(clone: Path, python: str, install: bool, log: Path) -> dict:
    port = _free_port()
    with Timer() as timer:
        if install:   # what `make serve` does on a fresh clone: its venv, docs dependencies only
            with log.open("a", encoding="utf-8") as out:
                subprocess.run([sys.executable, "-m", "venv", ".venv"], cwd=clone, check=True)
                code = subprocess.run([".venv/bin/python", "-m", "pip", "install", "-q", "-r",
                                       "requirements/docs.txt"], cwd=clone, stdout=out,
                                      stderr=subprocess.STDOUT).returncode
            if code != 0:
                raise RuntimeError(f"pip install -r requirements/docs.txt failed; see {log}")
            python = str(clone / ".venv" / "bin" / "python")
        with log.open("a", encoding="utf-8") as out:
            server = subprocess.Popen(["make", "serve", f"PY={python}", f"PORT={port}"], cwd=clone,
                                      stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            answered = _wait_for(f"http://127.0.0.1:{port}/", lambda body: True, SERVE_LIMIT)
        except BaseException:
            os.killpg(server.pid, signal.SIGTERM)
            raise
        server_cpu = _tree_cpu(server.pid)   # its build so far: it runs on, so rusage misses it
    results = {"serve_first_answer": timer.record(answered=answered, installed=install)}
    results["serve_first_answer"]["cpu_s"] = round(timer.cpu_s + server_cpu, 1)
    try:
        if answered:
            page = clone / EDITED
            token = f"Loop benchmark edit {time.time_ns()}."
            url = f"http://127.0.0.1:{port}/" + EDITED.removeprefix("docs/").removesuffix(".md") + "/"
            assert _wait_for(url, lambda body: True, 60), url
            text = page.read_text(encoding="utf-8")
            before = _tree_cpu(server.pid)
            with Timer() as timer:   # a new last paragraph: prose only, no code, no number shown
                page.write_text(f"{text.rstrip()}\n\n{token}\n", encoding="utf-8")
                shown = _wait_for(url, lambda body: token in body, 300)
            results["serve_reload_after_prose_edit"] = timer.record(shown=shown)
            results["serve_reload_after_prose_edit"]["cpu_s"] = round(_tree_cpu(server.pid) - before, 1)
            page.write_text(text, encoding="utf-8")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
    return results


def step_check(clone: Path, python: str, page: str, log: Path) -> dict:
    with Timer() as timer:
        code = make(clone, python, "check", f"PAGE={page}", log=log)
    return {"check_one_page": timer.record(rc=code, page=page)}


def step_test(clone: Path, python: str, log: Path) -> dict:
    """`make test`, with each test's CPU seconds (benchmarks/loop/cpu_times.py): the record keeps
    the total, the test files that cost most and the costliest tests."""
    per_test = log.parent / "cpu_times.json"
    with Timer() as timer:
        code = make(clone, python, "test",
                    f"PYTEST_ARGS=-p benchmarks.loop.cpu_times --cpu-times={per_test}", log=log)
    return {"make_test": timer.record(rc=code, profile=profile(per_test))}


def read_all(path: Path) -> dict[str, dict[str, float]] | None:
    """The per-process files of benchmarks/loop/cpu_times.py (PATH.<pid>) merged: the tests'
    times, and under "" the sum of the processes' CPU seconds and the longest wall time (the
    workers ran side by side)."""
    files = sorted(path.parent.glob(path.name + ".*"))
    if not files:
        return None
    merged: dict[str, dict[str, float]] = {}
    total = {"cpu_s": 0.0, "wall_s": 0.0}
    for file in files:
        times = json.loads(file.read_text(encoding="utf-8"))
        session = times.pop("", {})
        total["cpu_s"] += session.get("cpu_s", 0.0)
        total["wall_s"] = max(total["wall_s"], session.get("wall_s", 0.0))
        merged.update(times)
    merged[""] = {k: round(v, 3) for k, v in total.items()}
    return merged


def profile(per_test: Path, top: int = 12) -> dict | None:
    """Where pytest's CPU time went: its total, by test file and the costliest tests."""
    times = read_all(per_test)
    if times is None:
        return None
    session = times.pop("", {})
    by_file: dict[str, float] = {}
    for nodeid, spent in times.items():
        name = nodeid.split("::")[0]
        by_file[name] = by_file.get(name, 0.0) + spent["cpu_s"]
    costliest = sorted(times.items(), key=lambda kv: -kv[1]["cpu_s"])[:top]
    return {"tests": len(times), "pytest_cpu_s": session.get("cpu_s"), "pytest_wall_s": session.get("wall_s"),
            "by_file_cpu_s": dict(sorted(((k, round(v, 1)) for k, v in by_file.items()),
                                         key=lambda kv: -kv[1])[:top]),
            "costliest_tests_cpu_s": {k: v["cpu_s"] for k, v in costliest}}


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
                 platform.processor())
    return {"cpus": len(os.sched_getaffinity(0)), "cpu_model": model, "python": platform.python_version(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make loop-benchmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    parser.add_argument("--page", default=PAGE, help="the page `make check` checks")
    venv_python = ROOT / ".venv" / "bin" / "python"
    parser.add_argument("--python", default=str(venv_python if venv_python.exists() else sys.executable),
                        help="the interpreter with the tests' packages (make test's .venv)")
    parser.add_argument("--no-install", dest="install", action="store_false",
                        help="serve with --python instead of installing the docs' packages first")
    parser.add_argument("--note", default="", help="what else ran on the machine, or anything else to keep")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        parser.error(f"unknown step(s) {unknown}; pick from {', '.join(STEPS)}")
    python = str(Path(args.python).absolute())

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    record = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": commit[:10],
              "machine": machine(), "note": args.note, "targets": TARGETS,
              "labels": {k: v.format(page=args.page) for k, v in LABELS.items()}, "steps": {}}
    log = Path(tempfile.mkdtemp(prefix="loop-benchmark-")) / "log.txt"
    print(f"make loop-benchmark: {', '.join(steps)} at {commit[:10]}; output in {log}")
    for name in steps:   # each step in a clone of its own: a cold start, nothing left by another
        where = Path(tempfile.mkdtemp(prefix=f"loop-{name}-"))
        try:
            clone = fresh_clone(where)
            if name == "build":
                found = step_build(clone, python, log)
            elif name == "serve":
                found = step_serve(clone, python, args.install, log)
            elif name == "check":
                found = step_check(clone, python, args.page, log)
            else:
                found = step_test(clone, python, log)
        finally:
            shutil.rmtree(where, ignore_errors=True)
        for key, value in found.items():
            print(f"  {key:32} {value['wall_s']:7.1f} s wall  {value['cpu_s']:7.1f} s CPU  "
                  f"load {value['load_before'][0]:.1f} -> {value['load_after'][0]:.1f}  "
                  + " ".join(f"{k}={v}" for k, v in value.items() if k in ("rc", "answered", "shown")))
        record["steps"].update(found)

    existing = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {"runs": []}
    existing["runs"].append(record)
    args.out.write_text(json.dumps(existing, indent=1) + "\n", encoding="utf-8")
    print(f"appended to {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    failed = [k for k, v in record["steps"].items() if v.get("rc", 0) != 0 or v.get("answered") is False
              or v.get("shown") is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
