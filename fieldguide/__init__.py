"""Tooling behind the GPU Field Guide, in packages by job (each __init__.py says what it owns
and may import; tests/tooling/test_package_boundaries.py holds them to it):

    content/     what pages and snippets hold and declare
    measuring/   the timing run, the runs' data model, code keys, number formats, report
    notebooks/   each page's notebook and its recorded outputs
    rendering/   the Markdown extensions and everything they draw
    authoring/   new-page scaffold, make check, the build benchmark

timing_run.py, timings.py and diagrams.py at this level only forward to their new places
(each says why).

Nothing in this package imports torch or CuPy at module level, so the site builds without them.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
