"""What a page under docs/ shows: the snippet sections it includes, its title, its device needs.

A page embeds code only through pymdownx.snippets includes, one per line inside a code fence:

    --8<-- "snippets/<chapter>/<topic>.py:<section>"

Read from the page's source text, without MkDocs, so the notebooks, the scaffold and the tests
all see the same includes in the same order.
"""

from __future__ import annotations

import re
from pathlib import Path

from fieldguide import ROOT
from fieldguide.content.snippets import _MARKER, gpus_needed, sections

INCLUDE = re.compile(r'^(?P<indent>\s*)--8<--\s+"(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$', re.M)
TITLE = re.compile(r"^#\s+(?P<title>.+?)\s*#*\s*$", re.M)


def includes(markdown: str) -> list[tuple[str, str | None]]:
    """(snippet path, section or None) for every `--8<--` include, in page order."""
    return [(m["path"], m["section"]) for m in INCLUDE.finditer(markdown)]


def pages(docs: Path = ROOT / "docs") -> list[Path]:
    """Every Markdown page, in a stable order."""
    return sorted(Path(docs).rglob("*.md"))


def title(markdown: str, fallback: str = "") -> str:
    """The page's H1."""
    match = TITLE.search(markdown)
    return match["title"] if match else fallback


def included_code(root: Path, path: str, section: str | None) -> str:
    """What an include shows: the named section, dedented, or the whole file (without its
    section markers, which pymdownx.snippets leaves out of a whole file too)."""
    source = Path(root) / path
    if section is None:
        text = source.read_text(encoding="utf-8")
        return "\n".join(line for line in text.split("\n")
                         if not _MARKER.match(line)).strip("\n")
    return sections(source)[section]


def gpus_needed_by(root: Path, markdown: str) -> int:
    """The most GPUs any snippet the page includes needs (0 for a page without code)."""
    return max((gpus_needed(Path(root) / path) for path in dict.fromkeys(p for p, _ in includes(markdown))),
               default=0)


def draft_folders(root: Path = ROOT, config: str | None = None) -> list[str]:
    """The folders under docs/ that mkdocs.yml's `draft_docs` lists (from `config`, the file's
    text, where given): chapters written and tested but not yet measured, which the published
    build leaves out."""
    if config is None:
        config = (root / "mkdocs.yml").read_text(encoding="utf-8")
    block = re.search(r"^draft_docs:\s*\|\s*\n((?:[ \t]+\S.*\n?)+)", config, re.M)
    return [line.strip() for line in block[1].splitlines() if line.strip()] if block else []


def is_draft(page: Path, root: Path = ROOT) -> bool:
    """Whether a page (a path under docs/) belongs to a draft chapter."""
    relative = Path(page).resolve().relative_to(root / "docs").as_posix()
    return any(relative.startswith(folder) for folder in draft_folders(root))
