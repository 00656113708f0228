"""Markdown extension: `<!-- glossary -->` on a page becomes the list of the site's terms.

The terms live once, in includes/abbreviations.md, as `*[TERM]: meaning` lines (Python-Markdown's
`abbr` syntax). pymdownx.snippets appends that file to every page (`auto_append` in mkdocs.yml),
so each TERM on every page gets its meaning as a tooltip; this extension reads the same file and
writes it out as a definition list on the Glossary page, each term with an id (`#term-sm`) that
other pages can link to. There is no second copy of the list to keep in step.
"""

import re
from pathlib import Path

from markdown import Extension
from markdown.preprocessors import Preprocessor

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


def definition_list(found: dict[str, str]) -> list[str]:
    """Markdown for the `def_list` and `attr_list` extensions, sorted as a reader looks terms up."""
    lines = []
    for term in sorted(found, key=str.casefold):
        lines += [f"{term} {{ #{anchor(term)} }}", f":   {found[term]}.", ""]
    return lines


class _Glossary(Preprocessor):
    def __init__(self, md, path: Path):
        super().__init__(md)
        self.path = path

    def run(self, lines: list[str]) -> list[str]:
        if not any(line.strip() == MARKER for line in lines):
            return lines
        listed = definition_list(terms(self.path))
        out = []
        for line in lines:
            out.extend(listed if line.strip() == MARKER else [line])
        return out


class GlossaryExtension(Extension):
    def __init__(self, **kwargs):
        self.config = {"file": ["includes/abbreviations.md",
                                "the abbreviations file, relative to the repository root"]}
        super().__init__(**kwargs)

    def extendMarkdown(self, md) -> None:  # noqa: N802 (Markdown's API)
        # Before pymdownx.snippets (32), so the list is built from the file, not the page.
        md.preprocessors.register(_Glossary(md, ROOT / self.getConfig("file")), "fieldguide-glossary", 33)


def makeExtension(**kwargs):  # noqa: N802 (Markdown's API)
    return GlossaryExtension(**kwargs)
