"""Markdown extension: timing shortcodes, figures and notebook links, under MkDocs and Zensical.

    markdown_extensions:
      - fieldguide.rendering.render:
          timings: nvidia-h200             # the reference GPU: pages show it unless a shortcode names another
          beside: [nvidia-h100-80gb-hbm3]  # in tabs beside it, where it measured the current code
          require_runs: true               # a number needs 3 runs from 2 leases of the reference GPU

Both engines run Python-Markdown extensions (neither runs the other's plugins or hooks), so the
whole rendering path is here: each page's shortcodes become tables, numbers and figures
(fieldguide/rendering/shortcodes.py), the page gets its notebook's links (fieldguide/notebooks/generate.py),
and the figures and the notebook are written into the site directory as the page is rendered.

A problem fails the build in every engine and at every verbosity: the page's problems (a missing
or stale number, a number of the reference GPU that fewer than three runs from two machine leases
measured, an unknown kind or field, a stale notebook, a shortcode left unrendered) are
raised together as one `PageProblems` error naming the page. Python-Markdown cannot see
`--strict`, and a warning is dropped by `mkdocs build -q` and counted by nothing in Zensical, so
an error is the one signal both engines honour. `make serve` sets FIELDGUIDE_PREVIEW=1: the
problems are then logged and shown in the page, and the preview keeps running.

State that costs time to build (each GPU's runs, each benchmark's code key) is kept for the
process and rebuilt when a file it was read from changes (`_Inputs`), so `mkdocs serve` sees a
code change at once. Figures are cached on disk by content (fieldguide/rendering/figure_cache.py); when a
page misses that cache, a second process draws the other pages' figures into it meanwhile
(fieldguide/rendering/figure_prefill.py).
"""

from __future__ import annotations

import os
import posixpath
import shutil
from dataclasses import dataclass
from pathlib import Path

from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor

from fieldguide.notebooks import generate as notebooks
from fieldguide.notebooks import outputs
from fieldguide.rendering import figure_cache, figure_prefill, shortcodes, unrendered
from fieldguide.rendering.context import Context, context, nested

# --- One build's state, rebuilt when what it read changes --------------------------------------

WATCHED = ("timings", "snippets", "benchmarks", "tests/pages", "fieldguide", "notebooks", "outputs")


def _inputs(root: Path) -> tuple:
    """Every file the rendering reads, with its size and modification time."""
    found = []
    for folder in WATCHED:
        for dirpath, dirnames, filenames in os.walk(root / folder):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames:
                stat = os.stat(os.path.join(dirpath, name))
                found.append((dirpath, name, stat.st_size, stat.st_mtime_ns))
    found.sort()
    return tuple(found)


@dataclass
class _State:
    key: tuple
    build: shortcodes.Build
    repo: notebooks.Repo | str   # or why there is none (repo_url is not a GitHub repository)
    notebook_problems: dict[str, list[str]]   # page -> its notebook's problems ("" for orphans)
    written: set[tuple[str, str]]             # (site_dir, site path) written in this state
    prefilled: bool = False                   # figure_prefill started for this state


_states: dict[tuple, _State] = {}


def _state(ctx: Context, default_gpu: str | None, beside: list[str]) -> _State:
    key = (str(ctx.root), default_gpu, tuple(beside), str(ctx.repo_url), str(ctx.edit_uri))
    inputs = _inputs(ctx.root)
    state = _states.get(key)
    if state is None or state.key != inputs:
        inner: list[Markdown] = []

        def to_html(text: str) -> str:  # tab contents, with the site's own extensions
            if not inner:  # one parser for every tab of the build: building one costs 20 ms
                inner.append(Markdown(extensions=ctx.markdown_extensions,
                                      extension_configs=ctx.mdx_configs))
            return inner[0].reset().convert(text)

        build = shortcodes.Build(ctx.root, default_gpu, beside=beside, to_html=to_html)
        by_page: dict[str, list[str]] = {}
        try:
            repo = notebooks.Repo.from_config(ctx.repo_url, ctx.edit_uri)
        except ValueError as exc:  # a page with code says so; a site without any needs no repo
            repo = str(exc)
        else:
            for page, problem in notebooks.problems_by_page(ctx.root, repo):
                by_page.setdefault(page, []).append(problem)
        state = _states[key] = _State(inputs, build, repo, by_page, set())
    return state


# --- The extension -----------------------------------------------------------------------------

class _Render(Preprocessor):
    def __init__(self, md: Markdown, extension: RenderExtension):
        super().__init__(md)
        self.extension = extension

    def run(self, lines: list[str]) -> list[str]:
        if nested(self.md):
            return lines
        ctx = context(self.md)
        if ctx is None:
            return lines
        cfg = self.extension.getConfigs()
        state = _state(ctx, cfg["timings"] or None, list(cfg["beside"] or []))
        misses = figure_cache.stats["misses"]
        markdown, page = state.build.render_page("\n".join(lines), ctx.src_uri, ctx.url)
        if figure_cache.stats["misses"] > misses and not state.prefilled:
            # a cold cache: the other pages' figures are drawn on another core meanwhile
            state.prefilled = True
            figure_prefill.start(ctx.root, state.build.default_gpu, state.build.beside)
        problems = list(page.problems) + state.build.stale_report(ctx.src_uri)
        if cfg["require_runs"]:
            problems += state.build.too_few_runs(page)
        problems += state.notebook_problems.get(ctx.src_uri, [])
        if ctx.src_uri == "index.md":  # notebooks without a page belong to no page: the home page says so
            problems += state.notebook_problems.get("", [])
        try:  # any page: what its declared shell commands printed where they were recorded
            markdown = outputs.under_commands(markdown, ctx.src_uri, ctx.root)
        except ValueError as exc:
            problems.append(str(exc))
        if notebooks.has_notebook(markdown):
            markdown = outputs.under_blocks(markdown, ctx.root, outputs.load_any(ctx.src_uri, ctx.root))
            if isinstance(state.repo, str):
                problems.append(f"its notebook links need the repository: {state.repo}")
            else:
                markdown = notebooks.add_links(markdown, ctx.src_uri, state.repo, page_url=ctx.url,
                                               root=ctx.root)
            path = notebooks.notebook_path(ctx.src_uri)
            if (ctx.root / path).is_file():
                _copy(state, ctx.site_dir, path, ctx.root / path)
        for name in _shown(state, markdown):
            _write(state, ctx.site_dir, name, state.build.figures[name])
            if not (ctx.site_dir / name).is_file():
                problems.append(f"figure {name} was not written into {ctx.site_dir}")
        self.md.fieldguide_problems = problems  # the guard (fieldguide/rendering/unrendered.py) raises them
        return markdown.split("\n")


def _shown(state: _State, markdown: str) -> list[str]:
    """The figures this page shows (a figure's file name is the hash of its SVG)."""
    return [name for name in state.build.figures if posixpath.basename(name) in markdown]


def _write(state: _State, site_dir: Path, name: str, svg: str) -> None:
    if (str(site_dir), name) in state.written and (site_dir / name).is_file():
        return
    path = site_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(svg, encoding="utf-8")
    state.written.add((str(site_dir), name))


def _copy(state: _State, site_dir: Path, name: str, source: Path) -> None:
    target = site_dir / name
    if (str(site_dir), name) in state.written and target.is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    state.written.add((str(site_dir), name))


class RenderExtension(Extension):
    def __init__(self, **kwargs):
        self.config = {
            "timings": ["", "the timings/<gpu> folder pages show unless a shortcode names another"],
            "beside": [[], "GPUs shown in tabs beside it, where they measured the same benchmarks"],
            "require_runs": [False, "fail a page that shows a number of the reference GPU with fewer "
                                    "than RUNS_WANTED runs from LEASES_WANTED leases (timings.py)"],
        }
        super().__init__(**kwargs)

    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Markdown's API)
        # Before pymdownx.snippets (32): the page's own shortcodes, not those in included files.
        md.preprocessors.register(_Render(md, self), "fieldguide-render", 34)
        unrendered.register(md)  # raises this page's problems, and any shortcode left unrendered


def makeExtension(**kwargs):  # noqa: N802 (Markdown's API)
    return RenderExtension(**kwargs)
