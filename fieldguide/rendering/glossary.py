"""Markdown extension: `<!-- glossary -->` on a page becomes the list of the site's terms.

The terms live once, in includes/abbreviations.md, as `*[TERM]: meaning` lines (Python-Markdown's
`abbr` syntax). pymdownx.snippets appends that file to every page (`auto_append` in mkdocs.yml),
so each TERM on every page gets its meaning as a tooltip; this extension reads the same file and
writes it out as a definition list on the Glossary page, each term with an id (`#term-sm`) that
other pages can link to, and a link to the pages that teach it. There is no second copy of the
list to keep in step.

Where a term is taught is written on its line, after an arrow: `*[warp]: meaning →
foundations/cpu-vs-gpu.md` (a page under docs/, with an optional `#section`). The concepts
(warp, kernel, stream, rank ...) say so; for the others `teaching_pages` ranks the published
pages (drafts left out): the term in the title, then in a heading, then the most uses.
`_TaughtOut` takes the arrow and the page off every page's copy of the line before `abbr` reads
it, so the tooltip is the meaning alone.

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
from fieldguide.notebooks.generate import is_workbook

MARKER = "<!-- glossary -->"
DEFINITION = re.compile(r"^\*\[(?P<term>[^\]]+)\]:[ ]*(?P<meaning>.+?)\s*$")
TAUGHT = re.compile(r"\s+→\s+(?P<page>[\w./-]+\.md(?:#[\w-]+)?)$")  # `meaning → page.md#section`


def _definitions(path: Path) -> dict[str, tuple[str, str | None]]:
    """TERM -> (meaning, the page that teaches it or None), in file order."""
    found = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if match := DEFINITION.match(line):
            taught = TAUGHT.search(match["meaning"])
            meaning = match["meaning"][:taught.start()] if taught else match["meaning"]
            found[match["term"]] = (meaning, taught["page"] if taught else None)
    return found


def terms(path: Path) -> dict[str, str]:
    """TERM -> meaning (what its tooltip says), in file order, from `*[TERM]: meaning` lines."""
    return {term: meaning for term, (meaning, _) in _definitions(path).items()}


def taught_in(path: Path) -> dict[str, str]:
    """TERM -> the page under docs/ (with its `#section`, if any) that its line names."""
    return {term: page for term, (_, page) in _definitions(path).items() if page}


def anchor(term: str) -> str:
    """The id of a term on the Glossary page: `TFLOP/s` -> `term-tflop-s`."""
    return "term-" + re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-")


# Pages that explain where to look rather than teach: never a term's teaching page. A chapter's
# exercise page (fieldguide.notebooks.generate.is_workbook: the one rule, by name) practises what the
# chapter taught.
NOT_TEACHING = {"index.md", "glossary.md", "cheat-sheet.md", "headline-numbers.md",
                "contributing.md", "reference.md",
                "start-here/slow-training.md"}  # routes a symptom to the page that teaches its fix


def teaches(page: str) -> bool:
    """Whether a page (its path under docs/) teaches: not in NOT_TEACHING, not an exercise page,
    not a chapter's landing page (its folder's index.md, which lists the chapter's pages)."""
    return page not in NOT_TEACHING and not is_workbook(page) and not page.endswith("/index.md")


HEADING = re.compile(r"^#{1,6}\s+(.*)$", re.M)


@cache
def _pages(docs: Path) -> tuple[tuple[str, str, str], ...]:
    """(path under docs/, title, text) of every published page that teaches: drafts
    (mkdocs.yml's draft_docs) are not built, so a link to one would lead nowhere."""
    from fieldguide.content.pages import is_draft

    found = []
    for path in sorted(docs.rglob("*.md")):
        rel = path.relative_to(docs).as_posix()
        if not teaches(rel) or is_draft(path, docs.parent):
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


def page_title(page: str, docs: Path) -> str:
    """The title of a page under docs/ (`page` may end in `#section`)."""
    path = docs / page.partition("#")[0]
    return next(iter(HEADING.findall(path.read_text(encoding="utf-8"))), page).strip()


def glossary_links(term: str, docs: Path, taught: dict[str, str]) -> list[tuple[str, str]]:
    """(title, page) the Glossary links for `term`: the page its line names, else the ranked ones."""
    if term in taught:
        return [(page_title(taught[term], docs), taught[term])]
    return teaching_pages(term, docs)


def definition_list(found: dict[str, str], docs: Path | None = None,
                    taught: dict[str, str] | None = None) -> list[str]:
    """Markdown for the `def_list` and `attr_list` extensions, sorted as a reader looks terms up;
    with `docs`, each meaning ends with links to the pages that teach the term (`taught`: the
    pages the lines name)."""
    lines = []
    for term in sorted(found, key=str.casefold):
        taught_by = glossary_links(term, docs, taught or {}) if docs else []
        links = " Taught in " + " and ".join(f"[{t}]({rel})" for t, rel in taught_by) + "." \
            if taught_by else ""
        lines += [f"{term} {{ #{anchor(term)} }}", f":   {found[term]}.{links}", ""]
    return lines


class _Glossary(Preprocessor):
    def __init__(self, md, path: Path):
        super().__init__(md)
        self.path = path

    def run(self, lines: list[str]) -> list[str]:
        if not any(line.strip() == MARKER for line in lines):
            return lines
        listed = definition_list(terms(self.path), ROOT / "docs", taught_in(self.path))
        out = []
        for line in lines:
            out.extend(listed if line.strip() == MARKER else [line])
        return out


class _TaughtOut(Preprocessor):
    """Takes `→ page.md` off the definition lines appended to every page: the tooltip is the
    meaning alone."""

    def run(self, lines: list[str]) -> list[str]:
        return [TAUGHT.sub("", line) if line.startswith("*[") and DEFINITION.match(line) else line
                for line in lines]


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
        # After pymdownx.snippets (32) has appended the definitions, before abbr reads them.
        md.preprocessors.register(_TaughtOut(md), "fieldguide-glossary-taught", 30)
        # After abbr (7) has wrapped the terms, before the HTML is serialized.
        md.treeprocessors.register(_ProseOnly(md), "fieldguide-prose-abbr", 6)


def makeExtension(**kwargs):  # noqa: N802 (Markdown's API)
    return GlossaryExtension(**kwargs)
