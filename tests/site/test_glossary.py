"""The glossary as a concept list: the ideas the site rests on (warp, kernel, stream, rank ...)
are terms of includes/abbreviations.md like the abbreviations, each defined in one sentence and
linked to the page that teaches it (fieldguide/rendering/glossary.py). The tooltips and the Glossary page's
list are checked in tests/site/test_reader_kit.py."""

import re

import pytest

pytest.importorskip("markdown")  # the glossary is a Markdown extension

import markdown

from fieldguide import ROOT
from fieldguide.rendering import glossary
from tests.site.test_reader_kit import ABBREVIATIONS, ORDER, TERMS, built, text

DOCS = ROOT / "docs"
TAUGHT = glossary.taught_in(ABBREVIATIONS)

# The concepts a reader needs defined (issue 34), as the site's pages spell them.
CONCEPTS = {"warp", "SM", "kernel", "kernel launch", "eager mode", "stream", "event",
            "synchronize", "pinned memory", "Tensor Core", "autocast", "all-reduce", "rank",
            "DDP", "FSDP", "CUDA graph", "caching allocator", "process group", "roofline",
            # issue 45: the terms the educator's read found used and never defined
            "host", "device", "memory-bound", "compute-bound", "fusion", "launch-bound",
            "copy engine", "micro-batch"}


def uses(term: str, page: str) -> int:
    """Whole-word, case-sensitive uses of `term` in a page's text, as the abbr extension
    matches it (the definitions appended to every page are not in the file)."""
    return len(re.findall(r"(?<![\w/])" + re.escape(term) + r"(?![\w/])", text(page)))


def test_every_concept_is_a_term_with_a_meaning():
    missing = CONCEPTS - set(TERMS)
    assert not missing, f"add to includes/abbreviations.md: {sorted(missing)}"
    for term in CONCEPTS:
        meaning = TERMS[term]
        assert len(meaning.split()) >= 6 and not re.search(r"\d+\s*(?:µs|ms|GB|%)", meaning), (
            f"{term}: one sentence that defines it, with no measured number")


@pytest.mark.parametrize("term", sorted(CONCEPTS - {"SM", "Tensor Core"}))
def test_every_concept_names_the_page_that_teaches_it(term):
    assert term in TAUGHT, f"{term}: end its line with ' → chapter/page.md' (where it is taught)"


@pytest.mark.parametrize("term", sorted(TERMS, key=str.casefold))
def test_each_link_of_the_glossary_goes_to_a_page_in_the_nav_that_uses_the_term(term):
    for _, page in glossary.glossary_links(term, DOCS, TAUGHT):
        path = page.partition("#")[0]
        assert path in ORDER, f"{term}: links {path}, which is not in the nav (a draft?)"
        assert uses(term, path), f"{term}: {path} never mentions {term!r}"


def test_the_arrow_and_the_page_stay_out_of_the_tooltip():
    assert not any("→" in meaning for meaning in TERMS.values())
    md = markdown.Markdown(extensions=["abbr", "fieldguide.rendering.glossary"])
    html = md.convert("A warp runs.\n\n*[warp]: Threads that run together → foundations/cpu-vs-gpu.md\n")
    assert '<abbr title="Threads that run together">warp</abbr>' in html


def test_the_glossary_page_links_each_concept_to_its_page(built_site):
    page_html = built(built_site, "glossary.md")
    for term, page in TAUGHT.items():
        path, _, anchor = page.partition("#")
        href = "../" + path.removesuffix(".md") + "/" + (f"#{anchor}" if anchor else "")
        entry = page_html.split(f'<dt id="{glossary.anchor(term)}">', 1)[1].split("</dd>", 1)[0]
        assert f'href="{href}"' in entry, f"{term}: the glossary does not link {href}"
        if anchor:
            assert f'id="{anchor}"' in built(built_site, path), f"{term}: no section #{anchor}"
