"""One registry of shortcode kinds (`RENDERERS` in fieldguide/rendering/shortcodes.py): the contributing
page's table, the module's own reference and every page's shortcodes agree with it."""

import re

from fieldguide import ROOT
from fieldguide.content.pages import pages
from fieldguide.rendering import shortcodes

ROW = re.compile(r"^\| `<!-- timing-(?P<kind>[\w-]+):", re.M)


def test_the_registry_is_the_list_of_kinds():
    assert shortcodes.KINDS == tuple(shortcodes.RENDERERS) and len(set(shortcodes.KINDS)) >= 9


def test_the_contributing_table_lists_each_kind_once():
    listed = ROW.findall((ROOT / "docs" / "contributing.md").read_text(encoding="utf-8"))
    assert sorted(listed) == sorted(shortcodes.KINDS)


def test_the_modules_reference_lists_each_kind():
    documented = re.findall(r"<!-- timing-([\w-]+):", shortcodes.__doc__)
    assert sorted(set(documented)) == sorted(shortcodes.KINDS)


def test_every_timing_comment_on_a_page_is_a_shortcode_of_a_known_kind():
    """The build refuses the rest (fieldguide/rendering/unrendered.py); this names them without a build."""
    found = []
    for page in pages(ROOT / "docs"):
        text = page.read_text(encoding="utf-8")
        quoted = [m.span() for m in shortcodes.CODE.finditer(text)]
        for comment in re.finditer(r"<!--\s*timing.*?-->", text, re.S | re.I):
            if any(start <= comment.start() < end for start, end in quoted):
                continue
            match = shortcodes.SHORTCODE.fullmatch(comment[0])
            if match is None or match["kind"] not in shortcodes.KINDS:
                found.append(f"{page.relative_to(ROOT)}: {comment[0][:80]}")
    assert not found, "\n".join(found)


def test_the_guard_catches_what_the_renderer_would_not_render():
    for written in ("<!-- timings-value: a median -->", "<!-- timing-value a median -->",
                    "<!-- Timing-table: a -->", "<!--timing-tabel: a -->"):
        assert shortcodes.unrendered(f"<p>{written}</p>") == [written]
    assert shortcodes.unrendered("<p>&lt;!-- timing-value: a median --&gt;</p>") == []  # quoted
