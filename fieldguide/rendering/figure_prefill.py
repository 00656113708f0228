"""A second process that draws the site's figures into the figure cache while the build runs.

A build renders its pages one after another in one process, so on a machine with a cold figure
cache (a fresh clone, or new data) every figure is drawn on one core while the others idle:
drawing was half of a cold build (2026-11-26, 2 cores: 20 of 41 s). When a page's rendering
misses the cache (fieldguide/rendering/render.py), the build starts this process once:

    python -m fieldguide.rendering.figure_prefill ROOT --gpu SLUG [--beside SLUG ...] --parent PID

It renders the pages that show figures, last page first, with the build's settings, and so
fills `.build-cache/figures/` through `figure_cache.drawn` while the build works forward from the
first page; where they meet, a figure already drawn by either is a cache hit for the other. What
it renders is thrown away: the cache can only hold a figure this code draws from this data
(fieldguide/rendering/figure_cache.py), so the build's pages are the same with or without it, only sooner.
It stops when it has drawn every page's figures, when the build's process is gone (checked
between pages), and when that process exits (`mkdocs build`'s end; `mkdocs serve` keeps it to
the end of its pass). Draft pages are drawn too: this side knows no engine's config.
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import subprocess
import sys
from pathlib import Path

from fieldguide.rendering import shortcodes

# The shortcode kinds whose renderers draw through the figure cache.
FIGURE_KINDS = ("chart", "timeline", "roofline", "memory", "queue", "diagram")

OFF = "FIELDGUIDE_NO_PREFILL"   # set to 1: no second process (to measure a build on one core)

_running: list[subprocess.Popen] = []


def disabled() -> bool:
    return os.environ.get(OFF, "").strip().lower() not in ("", "0", "false", "no")


def pages_with_figures(docs: Path, only: list[str] | None = None) -> list[tuple[str, str]]:
    """(src_uri, markdown) of every page that shows a figure (or of those in `only`), last page
    (by path) first."""
    found = []
    for path in sorted(docs.rglob("*.md"), reverse=True):
        src_uri = path.relative_to(docs).as_posix()
        if only is not None and src_uri not in only:
            continue
        text = path.read_text(encoding="utf-8")
        if any(code.kind in FIGURE_KINDS for _, code in shortcodes.find(text)):
            found.append((src_uri, text))
    return found


def start(root: Path, default_gpu: str | None, beside: list[str]) -> subprocess.Popen | None:
    """Start the prefill with this build's settings (fieldguide/rendering/render.py: once per build)."""
    if not default_gpu or disabled() or not (Path(root) / "fieldguide").is_dir():
        return None   # (a project without this package cannot run `-m fieldguide...`)
    command = [sys.executable, "-m", "fieldguide.rendering.figure_prefill", str(root), "--gpu", default_gpu,
               "--parent", str(os.getpid())]
    for slug in beside:
        command += ["--beside", slug]
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    if not _running:
        atexit.register(stop_all)
    _running.append(process)
    return process


def stop_all() -> None:
    """Stop what is still drawing (a build that ended first; `mkdocs serve` stopped)."""
    for process in _running:
        if process.poll() is None:
            process.terminate()
            process.wait()
    _running.clear()


def as_child() -> None:
    """How a prefill process runs (this one, hooks/notebook_prefill.py's): after the build, which
    the reader waits on; and, terminated by the build, unwinding, so that
    figure_cache.write_whole removes what it was writing."""
    os.nice(5)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--beside", action="append", default=[])
    parser.add_argument("--parent", type=int, help="stop once this process is gone")
    parser.add_argument("--page", action="append", help="only this page (src_uri); for tests")
    args = parser.parse_args(argv)
    if argv is None:  # as a process of its own
        as_child()
    # Tab contents are not needed to draw: left as Markdown, they cost nothing here.
    build = shortcodes.Build(args.root, args.gpu, beside=args.beside, to_html=lambda text: text)
    for src_uri, markdown in pages_with_figures(args.root / "docs", args.page):
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
