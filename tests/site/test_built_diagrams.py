"""The drawn ideas (fieldguide/rendering/diagrams.py) in the built site: on each page, every drawing is an
image with a name, described by a paragraph of the page that exists (aria-describedby), whose
terms carry the glossary's tooltips like any prose."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from fieldguide.rendering import diagrams

PAGES = sorted({d.page.removeprefix("docs/") for d in diagrams.DIAGRAMS.values()}
               | {"execution/async-execution.md"})


class _Elements(HTMLParser):
    """Each <object> of a diagram's figure, and the text of every element that has an id."""

    def __init__(self):
        super().__init__()
        self.objects: list[dict[str, str]] = []
        self.text: dict[str, list[str]] = {}
        self.abbrs: dict[str, int] = {}
        self._open: list[tuple[str, str | None]] = []
        self._in_diagram = 0

    def handle_starttag(self, tag, attrs):
        attrs = {k: v or "" for k, v in attrs}
        if tag == "figure" and "fieldguide-diagram" in attrs.get("class", ""):
            self._in_diagram += 1
        if tag == "object" and self._in_diagram:
            self.objects.append(attrs)
        if tag == "abbr":
            for ident in (i for _, i in self._open if i):
                self.abbrs[ident] = self.abbrs.get(ident, 0) + 1
        self._open.append((tag, attrs.get("id")))
        if attrs.get("id"):
            self.text.setdefault(attrs["id"], [])

    def handle_endtag(self, tag):
        if tag == "figure" and self._in_diagram:
            self._in_diagram -= 1
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data):
        for _, ident in self._open:
            if ident:
                self.text[ident].append(data)


@pytest.mark.parametrize("page", PAGES)
def test_each_drawing_is_named_and_described_by_a_paragraph_of_its_page(built_site, page):
    html = (built_site / page.removesuffix(".md") / "index.html").read_text(encoding="utf-8")
    parsed = _Elements()
    parsed.feed(html)
    assert len(parsed.objects) >= 2, f"{page}: no light and dark drawing of a diagram"
    for obj in parsed.objects:
        assert obj.get("role") == "img" and len(obj.get("aria-label", "").split()) >= 5, obj
        described = obj.get("aria-describedby", "")
        words = " ".join(" ".join(parsed.text.get(described, [])).split())
        assert len(words.split()) >= 60, f"{page}: {described!r} names no paragraph of words"
        assert re.search(r"\.svg$", obj.get("data", "")), obj
        assert (built_site / page.removesuffix(".md") / obj["data"]).resolve().is_file(), obj
