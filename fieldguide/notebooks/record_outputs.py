"""`make outputs`: record what each page's code prints on this GPU, one notebook at a time.

    python3 -m fieldguide.notebooks.record_outputs           # the pages whose blocks have no output here
    python3 -m fieldguide.notebooks.record_outputs --all     # every page with code
    python3 -m fieldguide.notebooks.record_outputs --list    # which pages would be recorded, and stop
    python3 -m fieldguide.notebooks.record_outputs --machine nvidia-h200:1   # the same, planned without a GPU
    python3 -m fieldguide.notebooks.record_outputs PAGE ...  # these (docs/<chapter>/<page>.md)

A printed time or rate is a measurement, so outputs are recorded as the timing run measures: the
notebook test (tests/site/test_notebooks.py) runs one page's notebook at a time in a plain pytest
(no pytest-xdist), with the machine's CPU threads, and `fieldguide.notebooks.outputs.save` refuses when
another process holds the GPU, before or after. The files land in outputs/<gpu>/; commit them
and run `make notebooks`. Uses the interpreter it is started with and installs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from fieldguide import ROOT
from fieldguide.content.pages import gpus_needed_by, pages
from fieldguide.notebooks import generate as notebooks
from fieldguide.notebooks import outputs

TEST = "tests/site/test_notebooks.py::test_notebook_runs"
DEADLINE = "FIELDGUIDE_OUTPUTS_DEADLINE"  # seconds since the epoch: start no notebook after it


def code_cells(root: Path, page: str) -> list[str]:
    """The code of each code cell of `page`'s committed notebook (empty: no notebook)."""
    path = Path(root) / notebooks.notebook_path(page)
    if not path.is_file():
        return []
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [outputs._source(cell) for cell in cells if cell["cell_type"] == "code"]


def blocks(root: Path, page: str) -> list[str]:
    """The code of each of `page`'s code blocks as its committed notebook runs them: a block
    the notebook cut into parts for its prompts (outputs.PART_OF) is its parts joined again,
    the code its page's output is keyed by."""
    path = Path(root) / notebooks.notebook_path(page)
    if not path.is_file():
        return []
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return outputs.blocks([cell for cell in cells if cell["cell_type"] == "code"])


def for_machine(root: Path, gpus: int) -> list[str]:
    """Pages with code (relative to docs/) that a machine of `gpus` GPUs records: a page needing
    several GPUs on a machine of several, every other page on one GPU (the reference GPU's)."""
    found = []
    for path in pages(Path(root) / "docs"):
        page = path.relative_to(Path(root) / "docs").as_posix()
        if not code_cells(root, page):
            continue
        need = gpus_needed_by(root, path.read_text(encoding="utf-8"))
        if need <= gpus and (gpus == 1 or need > 1):
            found.append(page)
    return found


def missing(root: Path, slug: str, gpus: int = 1) -> list[str]:
    """Of `for_machine`'s pages, those with a code cell that has no output recorded alone on
    `slug` (a timings/ folder name)."""
    found = []
    for page in for_machine(root, gpus):
        cells = code_cells(root, page)
        recorded = outputs.load(page, slug, root)
        if recorded is None or any(recorded.outputs_of(code) is None for code in cells):
            found.append(page)
    return found


def this_machine() -> tuple[str, int]:
    """This machine's timings/ and outputs/ folder name (as the timing run names it), and its
    GPU count."""
    from fieldguide.measuring.fingerprint import collect
    from fieldguide.measuring.timings import machine_slug

    found = collect()
    return machine_slug(found), found["gpu_count"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make outputs", description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", help="docs/<chapter>/<page>.md (default: the missing)")
    parser.add_argument("--all", action="store_true", help="every page with code")
    parser.add_argument("--list", action="store_true", help="print the pages and stop")
    parser.add_argument("--deadline", type=float, metavar="SECONDS",
                        help="start no notebook after this many seconds (the rest are skipped, "
                             "named, and recorded by the next call)")
    parser.add_argument("--machine", metavar="SLUG:GPUS",
                        help="the outputs/ folder and GPU count to plan for, without a GPU "
                             "(default: this machine's)")
    args = parser.parse_args(argv)
    if args.machine:
        slug, gpus = args.machine.split(":")[0], int(args.machine.partition(":")[2] or 1)
    else:
        try:
            outputs.gpu_alone()
        except outputs.NotAlone as exc:
            print(f"make outputs: error: {exc}", file=sys.stderr)
            return 2
        slug, gpus = this_machine()
    if args.pages:
        chosen = [p.removeprefix("docs/") for p in args.pages]
    elif args.all:
        chosen = for_machine(ROOT, gpus)
    else:
        chosen = missing(ROOT, slug, gpus)
    print(f"{len(chosen)} page(s) to record on {slug}: {', '.join(chosen) or 'none'}", flush=True)
    if args.list or args.machine or not chosen:
        return 0
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "OMP_NUM_THREADS")}
    env["FIELDGUIDE_SAVE_OUTPUTS"] = str(ROOT / outputs.OUTPUTS)
    if args.deadline is not None:  # read by the notebook test before it starts a notebook
        env[DEADLINE] = str(time.time() + args.deadline)
    started, wall = time.perf_counter(), time.time()
    ended = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "-rs",
         "--require-gpus", *[f"{TEST}[docs/{page}]" for page in chosen]], cwd=ROOT, env=env)
    recorded = [p for p in chosen if (ROOT / outputs.OUTPUTS / slug / outputs.record_path(p)).is_file()
                 and (ROOT / outputs.OUTPUTS / slug / outputs.record_path(p)).stat().st_mtime >= wall]
    print(f"make outputs: recorded {len(recorded)} of {len(chosen)} page(s) in "
          f"{time.perf_counter() - started:.0f} s (the rest failed or were skipped at the "
          f"deadline, named above), pytest exit code {ended.returncode}; then `make notebooks` "
          "and commit outputs/ and notebooks/", flush=True)
    return ended.returncode


if __name__ == "__main__":
    sys.exit(main())
