"""`make build-benchmark`: how long the site takes to build, cold and warm, with both engines.

    python3 -m fieldguide.authoring.build_benchmark            # MkDocs and Zensical, cold then warm
    python3 -m fieldguide.authoring.build_benchmark --mkdocs   # MkDocs only

Copies the working tree's files (tracked and untracked, not ignored: as a fresh clone has them,
with no build caches) into a temporary folder, then builds there twice per engine: cold (no
figure or notebook cache: a fresh clone, or a change to the drawing code) and warm (the caches
the cold build left: a prose edit). Prints the wall and CPU seconds of each build and the load
average, since a shared machine's load shows in the wall time and hardly in the CPU time.
Targets on the 2-core CI machine, idle: MkDocs strict build cold 30 s, warm 12 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fieldguide import ROOT

BUILDS = {
    "mkdocs": [sys.executable, "-m", "mkdocs", "build", "--strict", "-q"],
    "zensical": [sys.executable, "-m", "zensical", "build", "--clean"],
}


def copy_tree(target: Path) -> None:
    """The files a fresh clone has, plus untracked ones not ignored; symlinks stay links."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        source, copy = ROOT / name, target / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, copy)


def timed(command: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds of the build and its children, exit status, its output's tail)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(cwd)}
    env.pop("FIELDGUIDE_PREVIEW", None)
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.returncode, (result.stdout + result.stderr)[-2000:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make build-benchmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mkdocs", action="store_true", help="MkDocs only")
    args = parser.parse_args(argv)
    engines = ["mkdocs"] if args.mkdocs else list(BUILDS)
    failed = False
    with tempfile.TemporaryDirectory(prefix="build-benchmark-") as folder:
        tree = Path(folder)
        copy_tree(tree)
        print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())} "
              f"({os.cpu_count()} cores)")
        for engine in engines:
            for kind in ("cold", "warm"):
                if kind == "cold":
                    shutil.rmtree(tree / ".build-cache", ignore_errors=True)
                    shutil.rmtree(tree / ".cache", ignore_errors=True)
                wall, cpu, status, tail = timed(BUILDS[engine], tree)
                print(f"{engine:8s} {kind}: {wall:6.1f} s wall, {cpu:6.1f} s CPU"
                      + ("" if status == 0 else f"  FAILED (exit {status})"), flush=True)
                if status:
                    failed = True
                    print(tail, file=sys.stderr)
        print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
