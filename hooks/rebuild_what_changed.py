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
import time
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.rebuild_what_changed")

# Beside config.watch (snippets, timings, ...), what the served pages are made of outside docs/
ALWAYS_WATCHED = ("mkdocs.yml", "overrides")
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
    inputs += [root / name for name in ALWAYS_WATCHED]
    if newest_mtime([p for p in inputs if p.exists()]) >= since:
        return "a snippet, timing run, notebook, include or the site's code changed"
    if titles != _state["titles"]:
        return "a page came, went or changed its title (the nav of every page shows it)"
    return None


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
    _state["last_build"] = started
    _state["titles"] = titles
