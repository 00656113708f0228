"""A second process that draws the site's figures into the figure cache while the build runs.

A build renders its pages one after another in one process, so on a machine with a cold figure
cache (a fresh clone, or new data) every figure is drawn on one core while the others idle:
drawing was half of a cold build (2026-11-26, 2 cores: 20 of 41 s). When a page's rendering
misses the cache (fieldguide/render.py), the build starts this process once:

    python -m fieldguide.figure_prefill ROOT --gpu SLUG [--beside SLUG ...] --parent PID

It renders the pages that show figures, last page first, with the build's settings, and so
fills `.build-cache/figures/` through `figure_cache.drawn` while the build works forward from the
first page; where they meet, a figure already drawn by either is a cache hit for the other. What
it renders is thrown away: the cache can only hold a figure this code draws from this data
(fieldguide/figure_cache.py), so the build's pages are the same with or without it, only sooner.
It stops when the build's process is gone, and the build stops it when it exits.
"""

from __future__ import annotations

import argparse
import atexit
import os
import subprocess
import sys
from pathlib import Path

from fieldguide import shortcodes

# The shortcode kinds whose renderers draw through the figure cache.
FIGURE_KINDS = ("chart", "timeline", "roofline", "memory", "queue", "diagram")

_running: dict[tuple, subprocess.Popen] = {}


def pages_with_figures(docs: Path) -> list[tuple[str, str]]:
    """(src_uri, markdown) of every page that shows a figure, last page (by path) first."""
    found = []
    for path in sorted(docs.rglob("*.md"), reverse=True):
        text = path.read_text(encoding="utf-8")
        if any(code.kind in FIGURE_KINDS for _, code in shortcodes.find(text)):
            found.append((path.relative_to(docs).as_posix(), text))
    return found


def start(root: Path, default_gpu: str | None, beside: list[str]) -> None:
    """Start the prefill for this build's settings, unless one is still running."""
    key = (str(root), default_gpu, tuple(beside))
    running = _running.get(key)
    if running is not None and running.poll() is None:
        return
    if not default_gpu or os.environ.get("FIELDGUIDE_NO_PREFILL"):
        return
    command = [sys.executable, "-m", "fieldguide.figure_prefill", str(root), "--gpu", default_gpu,
               "--parent", str(os.getpid())]
    for slug in beside:
        command += ["--beside", slug]
    _running[key] = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
    lower_priority(_running[key].pid)
    if len(_running) == 1:
        atexit.register(stop_all)


def lower_priority(pid: int) -> None:
    """The build's own process, which the reader waits on, goes first. (Not preexec_fn, which
    is unsafe in a process with threads, such as `mkdocs serve`.)"""
    if hasattr(os, "setpriority"):
        os.setpriority(os.PRIO_PROCESS, pid, 5)


def stop_all() -> None:
    for process in _running.values():
        if process.poll() is None:
            process.terminate()
            process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--beside", action="append", default=[])
    parser.add_argument("--parent", type=int, help="stop once this process is gone")
    args = parser.parse_args(argv)
    # Tab contents are not needed to draw: left as Markdown, they cost nothing here.
    build = shortcodes.Build(args.root, args.gpu, beside=args.beside, to_html=lambda text: text)
    for src_uri, markdown in pages_with_figures(args.root / "docs"):
        if args.parent and os.getppid() != args.parent:
            return 0  # the build is over
        # A page's problems are the build's to report: here a page that cannot render only
        # leaves its figures to the build.
        try:
            build.render_page(markdown, src_uri, page_url(src_uri))
        except Exception:  # noqa: BLE001 (see above)
            continue
    return 0


def page_url(src_uri: str) -> str:
    """MkDocs' directory URL of a page: 'execution/events/', 'execution/', '' for the home page."""
    stem = src_uri.removesuffix(".md")
    if stem == "index" or stem.endswith("/index"):
        return stem.removesuffix("index")
    return stem + "/"


if __name__ == "__main__":
    sys.exit(main())
