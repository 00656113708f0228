"""Markdown extension: `<!-- glossary -->` on a page becomes the list of the site's terms.

The terms live once, in includes/abbreviations.md, as `*[TERM]: meaning` lines (Python-Markdown's
`abbr` syntax). pymdownx.snippets appends that file to every page (`auto_append` in mkdocs.yml),
so each TERM on every page gets its meaning as a tooltip; this extension reads the same file and
writes it out as a definition list on the Glossary page, each term with an id (`#term-sm`) that
other pages can link to, and a link to the pages that teach it (`teaching_pages`: where the term
is in a title or heading, else where it is used most). There is no second copy of the list to
keep in step.

A term's tooltip belongs in prose: in a table, a heading or a figure's caption every "GB/s" and
"MiB" would be underlined (2,429 on the site, 433 on one page), so `_ProseOnly` unwraps the <abbr>
there, leaving the text. The Glossary page explains each of them.
"""

import re
from functools import cache
from pathlib import Path

from markdown import Extension
from markdown.preprocessors import Preprocessor
from markdown.treeprocessors import Treeprocessor

from fieldguide import ROOT

MARKER = "<!-- glossary -->"
DEFINITION = re.compile(r"^\*\[(?P<term>[^\]]+)\]:[ ]*(?P<meaning>.+?)\s*$")


def terms(path: Path) -> dict[str, str]:
    """TERM -> meaning, in file order, from `*[TERM]: meaning` lines."""
    found = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if match := DEFINITION.match(line):
            found[match["term"]] = match["meaning"]
    return found


def anchor(term: str) -> str:
    """The id of a term on the Glossary page: `TFLOP/s` -> `term-tflop-s`."""
    return "term-" + re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-")


# Pages that explain where to look rather than teach: never a term's teaching page. A chapter's
# exercise page (EXERCISES) practises what the chapter taught.
NOT_TEACHING = {"index.md", "glossary.md", "cheat-sheet.md", "headline-numbers.md",
                "contributing.md", "reference.md"}
EXERCISES = "exercises.md"


def teaches(page: str) -> bool:
    """Whether a page (its path under docs/) teaches: not in NOT_TEACHING, not an exercise page."""
    return page not in NOT_TEACHING and page.rsplit("/", 1)[-1] != EXERCISES
HEADING = re.compile(r"^#{1,6}\s+(.*)$", re.M)


@cache
def _pages(docs: Path) -> tuple[tuple[str, str, str], ...]:
    """(path under docs/, title, text) of every page that teaches."""
    found = []
    for path in sorted(docs.rglob("*.md")):
        rel = path.relative_to(docs).as_posix()
        if not teaches(rel):
            continue
        text = path.read_text(encoding="utf-8")
        title = next(iter(HEADING.findall(text)), rel)
        found.append((rel, title.strip(), text))
    return tuple(found)


def teaching_pages(term: str, docs: Path, most: int = 2) -> list[tuple[str, str]]:
    """(title, path) of the pages that teach `term`: those with it in their title, then in a
    heading, then those that use it most; at most `most`, none for a term no page uses."""
    word = re.compile(r"(?<![\w/])" + re.escape(term) + r"(?![\w/])")
    ranked = []
    for rel, title, text in _pages(docs):
        uses = len(word.findall(text))
        if uses:
            headings = sum(bool(word.search(h)) for h in HEADING.findall(text))
            ranked.append(((bool(word.search(title)), headings, uses), title, rel))
    ranked.sort(key=lambda r: r[0], reverse=True)
    return [(title, rel) for _, title, rel in ranked[:most]]


def definition_list(found: dict[str, str], docs: Path | None = None) -> list[str]:
    """Markdown for the `def_list` and `attr_list` extensions, sorted as a reader looks terms up;
    with `docs`, each meaning ends with links to the pages that teach the term."""
    lines = []
    for term in sorted(found, key=str.casefold):
        taught = teaching_pages(term, docs) if docs else []
        links = " Taught in " + " and ".join(f"[{t}]({rel})" for t, rel in taught) + "." \
            if taught else ""
        lines += [f"{term} {{ #{anchor(term)} }}", f":   {found[term]}.{links}", ""]
    return lines


class _Glossary(Preprocessor):
    def __init__(self, md, path: Path):
        super().__init__(md)
        self.path = path

    def run(self, lines: list[str]) -> list[str]:
        if not any(line.strip() == MARKER for line in lines):
            return lines
        listed = definition_list(terms(self.path), ROOT / "docs")
        out = []
        for line in lines:
            out.extend(listed if line.strip() == MARKER else [line])
        return out


class _ProseOnly(Treeprocessor):
    """Unwraps each <abbr> in a table, a heading or a figure caption: tooltips on prose only."""

    NOT_PROSE = {"table", "h1", "h2", "h3", "h4", "h5", "h6", "figcaption"}

    def run(self, root) -> None:
        for outer in root.iter():
            if outer.tag not in self.NOT_PROSE:
                continue
            for parent in list(outer.iter()):
                for index, child in reversed(list(enumerate(parent))):
                    if child.tag == "abbr":
                        _unwrap(parent, index, child)


def _unwrap(parent, index: int, child) -> None:
    """Replaces `child` by its text, joined to the text around it."""
    text = (child.text or "") + (child.tail or "")
    parent.remove(child)
    if index == 0:
        parent.text = (parent.text or "") + text
    else:
        before = parent[index - 1]
        before.tail = (before.tail or "") + text


class GlossaryExtension(Extension):
    def __init__(self, **kwargs):
        self.config = {"file": ["includes/abbreviations.md",
                                "the abbreviations file, relative to the repository root"]}
        super().__init__(**kwargs)

    def extendMarkdown(self, md) -> None:  # noqa: N802 (Markdown's API)
        # Before pymdownx.snippets (32), so the list is built from the file, not the page.
        md.preprocessors.register(_Glossary(md, ROOT / self.getConfig("file")), "fieldguide-glossary", 33)
        # After abbr (7) has wrapped the terms, before the HTML is serialized.
        md.treeprocessors.register(_ProseOnly(md), "fieldguide-prose-abbr", 6)


def makeExtension(**kwargs):  # noqa: N802 (Markdown's API)
    return GlossaryExtension(**kwargs)
