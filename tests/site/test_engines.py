"""The site built by Zensical reads as the site built by MkDocs: every page's article text is the
same in both builds, and Zensical builds without a problem.

MkDocs (`mkdocs build --strict`) is the reference build; Zensical, the maintained successor of
Material for MkDocs, reads the same mkdocs.yml and runs the same Markdown extensions
(fieldguide.rendering.render draws the numbers, figures and notebook links in both). Pages it cannot build
the same way are named in EXCLUDED with the reason. The MkDocs site is the session's build
(tests/conftest.py); this module builds the Zensical one once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fieldguide import ROOT

pytest.importorskip("zensical", reason="the second engine is in the docs requirements")

# Page folders (under the site) Zensical builds otherwise, and why.
EXCLUDED = {
    "notebooks/": "each page's notebook is a page of its own through the mkdocs-jupyter plugin, "
                  "which Zensical does not run: there the lesson's link opens the .ipynb itself",
}
CONFIG = ".zensical-check.yml"      # beside mkdocs.yml: Zensical takes the project root from it
SITE = Path(".cache") / "zensical-site"   # Zensical writes only inside the project root


class _ArticleText(HTMLParser):
    """The text a reader sees in the page's article: no scripts, no icons (each engine draws
    them its own way), no permalink signs, no "last update" line (the git dates plugin is
    MkDocs-only)."""

    HIDDEN = ("script", "style", "svg")
    HIDDEN_CLASSES = ("headerlink", "md-source-file")

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, bool]] = []   # the article's open elements: (tag, hidden)
        self.words: list[str] = []

    def handle_starttag(self, tag, attrs):
        classes = dict(attrs).get("class") or ""
        if not self.open:
            if tag == "article" and "md-content__inner" in classes:
                self.open.append((tag, False))
            return
        if tag in ("br", "img", "input", "hr", "meta", "link", "source", "path", "wbr"):
            return  # void elements never close
        hidden = self.open[-1][1] or tag in self.HIDDEN or any(c in classes for c in self.HIDDEN_CLASSES)
        self.open.append((tag, hidden))

    def handle_endtag(self, tag):
        while self.open:
            opened, _ = self.open.pop()
            if opened == tag:
                return

    def handle_data(self, data):
        if self.open and not self.open[-1][1]:
            self.words.extend(data.split())


def article_text(path: Path) -> str:
    parser = _ArticleText()
    parser.feed(path.read_text(encoding="utf-8"))
    return " ".join(parser.words)


def pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("index.html")
                  if p.relative_to(site).parts[0] != "assets")


def excluded(page: str) -> bool:
    return any(page.startswith(prefix) for prefix in EXCLUDED)


@pytest.fixture(scope="module")
def zensical_build():
    config = ROOT / CONFIG
    config.write_text((ROOT / "mkdocs.yml").read_text(encoding="utf-8") + f"\nsite_dir: {SITE}\n",
                      encoding="utf-8")
    env = {key: value for key, value in os.environ.items()
           if key not in ("SITE_URL", "FIELDGUIDE_PREVIEW")}
    try:
        # --clean: Zensical keeps each page's HTML between builds, keyed by the page's own
        # text; a changed snippet or timing run would not render that page again without it.
        result = subprocess.run([sys.executable, "-m", "zensical", "build", "--clean", "-f", CONFIG],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    finally:
        config.unlink()
    yield result, ROOT / SITE
    shutil.rmtree(ROOT / SITE, ignore_errors=True)


# One test, not two: under make test's parallel workers (--dist worksteal) two tests of one module
# can run in two workers at once, and two Zensical builds with --clean in one project root
# would empty each other's output (.cache/).
def test_zensical_builds_the_site_and_every_page_reads_the_same(zensical_build, built_site):
    result, site = zensical_build
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ours = [p for p in pages(built_site) if not excluded(p)]
    assert len(ours) > 30 and pages(site), "both builds wrote pages"
    missing = [p for p in ours if not (site / p).is_file()]
    assert not missing, f"pages MkDocs built and Zensical did not: {missing}"
    extra = [p for p in pages(site) if not excluded(p) and p not in ours]
    assert not extra, f"pages Zensical built and MkDocs did not: {extra}"
    differ = []
    for page in ours:
        mine, theirs = article_text(built_site / page), article_text(site / page)
        if mine != theirs:
            at = next(i for i, (a, b) in enumerate(zip(mine + "\0", theirs + "\0", strict=False)) if a != b)
            differ.append(f"{page}: MkDocs …{mine[max(0, at - 60):at + 60]}… / "
                          f"Zensical …{theirs[max(0, at - 60):at + 60]}…")
    assert not differ, "\n".join(differ)


def test_the_excluded_pages_are_the_ones_named(built_site):
    found = {prefix for prefix in EXCLUDED if any(p.startswith(prefix) for p in pages(built_site))}
    assert found == set(EXCLUDED), "an exclusion that matches no page is a stale one: remove it"


def test_the_article_text_sees_what_a_reader_sees():
    parser = _ArticleText()
    parser.feed('<nav>menu</nav><article class="md-content__inner md-typeset"><h1 id="a">Title'
                '<a class="headerlink" href="#a">¶</a></h1><p>Took <b>1.5 ms</b><br>on'
                '<svg><title>icon</title></svg> a GPU.</p><script>x()</script></article><p>after</p>')
    assert " ".join(parser.words) == "Title Took 1.5 ms on a GPU."
