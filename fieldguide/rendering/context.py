"""The page being rendered, under MkDocs or Zensical, and the error that fails it.

`context(md)` is the page a Markdown conversion renders (None outside a site build); `nested(md)`
whether it converts inside another (a docstring, a tab). PageProblems is every problem of a
page, raised by the guard (unrendered.py). Shared by render.py and unrendered.py, which
imported each other before.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markdown import Markdown

try:  # MkDocs prints a BuildError as one clean line and aborts; Zensical shows any exception
    from mkdocs.exceptions import BuildError as _Error
except ImportError:  # pragma: no cover (the docs requirements install MkDocs)
    _Error = Exception


class PageProblems(_Error):
    """A page cannot be published as it is: every problem found on it, one per line."""

    def __init__(self, page: str, problems: list[str]):
        self.page, self.problems = page, problems
        super().__init__(f"{page}: {len(problems)} problem(s) in the rendered page:\n  "
                         + "\n  ".join(problems))


# --- Where the page is: each engine's rendering context ---------------------------------------

@dataclass(frozen=True)
class Context:
    src_uri: str        # the page, relative to docs/
    # What a raw HTML link on the page is written relative to. MkDocs leaves raw HTML alone, so
    # a link goes from the page's URL ('execution/events/'); Zensical rewrites every relative
    # link as if written in the source file, so there it goes from 'execution/events.md'.
    url: str
    root: Path          # the project: where mkdocs.yml is
    site_dir: Path
    markdown_extensions: list[Any]
    mdx_configs: dict[str, Any]
    repo_url: str | None
    edit_uri: str | None


def nested(md: Markdown) -> bool:
    """Whether `md` converts inside another conversion (a docstring for mkdocstrings, a tab's
    content): then the page's own conversion renders and checks, once, and this one does not."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is Markdown.convert.__code__ and frame.f_locals.get("self") is not md:
            return True
        frame = frame.f_back
    return False


def context(md: Markdown) -> Context | None:
    """The page being rendered, from MkDocs' or Zensical's own processors; None outside a site
    build (a plain `markdown.markdown` call)."""
    if "relpath" in md.treeprocessors:  # MkDocs registers it on every page's Markdown
        processor = md.treeprocessors["relpath"]
        file, config = processor.file, processor.config
        return Context(file.src_uri, file.url, Path(config.config_file_path).parent,
                       Path(config.site_dir), config.markdown_extensions, config.mdx_configs or {},
                       config.repo_url, config.edit_uri)
    for processor in md.preprocessors:  # Zensical: zensical.extensions.context
        if type(processor).__name__ == "ContextPreprocessor":
            page, config = processor.page, processor.config
            root = Path(config["root_dir"])
            return Context(page.path, page.path, root, root / config["site_dir"],
                           config["markdown_extensions"], config["mdx_configs"] or {},
                           config.get("repo_url"), config.get("edit_uri"))
    return None
