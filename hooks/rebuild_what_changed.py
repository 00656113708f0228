"""MkDocs hook for `make serve` (`mkdocs serve --dirty`): rebuild only what a change can reach.

A dirty build renders again only the pages whose Markdown is newer than their HTML: a prose edit
shows in about two seconds instead of the whole site's twenty. That is right for prose alone.
Everything else a page is made of lives outside its Markdown: the snippets it embeds, the timing
runs its numbers come from, the notebooks and outputs, the rendering code (fieldguide/), the
includes, mkdocs.yml and the theme overrides; and the nav of every page shows every page's title
(its H1). When any of those changed since the last build, this hook empties the served folder
first, so MkDocs builds every page again: the preview is never stale, only slower after such a
change.

Inert everywhere else: `mkdocs build`, a plain `mkdocs serve` and Zensical (which has no hooks)
build every page every time anyway.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from pathlib import Path

from fieldguide.rendering.render import WATCHED

log = logging.getLogger("mkdocs.hooks.rebuild_what_changed")

# Beside what the rendering reads (fieldguide.rendering.render.WATCHED) and config.watch, what the served
# pages are made of outside docs/
ALWAYS_WATCHED = ("mkdocs.yml", "overrides", "includes")
SKIPPED_DIRS = {"__pycache__", ".ipynb_checkpoints"}

_state: dict = {"active": False, "last_build": None, "titles": None}


def on_startup(command: str, dirty: bool) -> None:
    _state["active"] = command == "serve" and dirty


def newest_mtime(paths: list[Path]) -> float:
    """The latest modification time of any file under these files and folders."""
    newest = 0.0
    for path in paths:
        if path.is_file():
            newest = max(newest, path.stat().st_mtime)
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
            for name in files:
                try:
                    newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime)
                except FileNotFoundError:  # removed while we walked: the next build sees it
                    pass
    return newest


def page_titles(docs_dir: Path) -> dict[str, str]:
    """Each page's H1 (the nav's label for it; see mkdocs.yml), by path: the whole site's nav
    changes when one changes, or when a page comes or goes."""
    titles = {}
    for page in docs_dir.rglob("*.md"):
        title = ""
        with page.open(encoding="utf-8") as f:
            for line in f:
                if line.startswith("# "):
                    title = line[2:].strip()
                    break
        titles[str(page.relative_to(docs_dir))] = title
    return titles


def why_everything(config, since: float, titles: dict[str, str]) -> str | None:
    """What, besides prose, changed since the last build; None when only prose did."""
    root = Path(config.config_file_path).parent
    inputs = [Path(w) if Path(w).is_absolute() else root / w for w in config.watch]
    inputs += [root / name for name in (*WATCHED, *ALWAYS_WATCHED)]
    if newest_mtime([p for p in inputs if p.exists()]) >= since:
        if newest_mtime([root / "fieldguide"]) >= since:
            log.warning("fieldguide/ changed: restart `make serve` to run the new code")
        return "a snippet, timing run, benchmark, claim, notebook or the site's code changed"
    if titles != _state["titles"]:
        return "a page came, went or changed its title (the nav of every page shows it)"
    home = Path(config.docs_dir) / "index.md"
    if home.exists() and home.stat().st_mtime >= since:
        return "the home page changed (the search index of a partial build would lose the others)"
    return None


def clear_rendering_caches() -> None:
    """Empty every functools cache of the fieldguide modules loaded in this process."""
    for name, module in list(sys.modules.items()):
        if name == "fieldguide" or name.startswith("fieldguide."):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def on_pre_build(config) -> None:
    if not _state["active"]:
        return
    started = time.time()
    titles = page_titles(Path(config.docs_dir))
    if _state["last_build"] is not None:
        reason = why_everything(config, _state["last_build"], titles)
        if reason:
            log.info(f"Rebuilding every page: {reason}")
            site = Path(config.site_dir)
            for entry in site.iterdir():
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            clear_rendering_caches()
    _state["last_build"] = started
    _state["titles"] = titles


def on_nav(nav, config, files):
    """Read every page a dirty build would leave unread, so that its title (from its H1) shows
    in the nav and footer of the pages that are rebuilt."""
    if _state["active"]:
        for page in nav.pages:
            if page.markdown is None:
                page.read_source(config)
    return nav
