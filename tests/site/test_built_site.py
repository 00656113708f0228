"""What the built site contains, read from its HTML without a browser: valid paragraphs, every
line of the contributing page, nav labels that are the pages' titles, contributor pages out of the
readers' search, no local address written into a local build, docs features that are used.

One strict build of the real site per session (the `built_site` fixture in tests/conftest.py).
"""

from __future__ import annotations

import ast
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fieldguide import ROOT

pytest.importorskip("mkdocs", reason="reads the site's configuration as MkDocs does")

DOCS = ROOT / "docs"
CONTRIBUTOR_PAGES = ("contributing.md", "reference.md")
# Elements whose start tag closes an open <p> in HTML: written inside a <p>, they break it in two
# and leave an empty paragraph behind (the parser's view, not the author's).
BLOCKS = set(
    "address article aside blockquote details div dl fieldset figcaption figure footer form "
    "h1 h2 h3 h4 h5 h6 header hr main menu nav ol p pre section table ul".split()
)


def config() -> dict:
    from mkdocs.utils.yaml import yaml_load  # reads !ENV and !!python/name as MkDocs does

    with open(ROOT / "mkdocs.yml", encoding="utf-8") as file:
        return yaml_load(file)


def html_pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("index.html") if p.relative_to(site).parts[0] != "assets")


def page_html(site: Path, doc: str) -> str:
    """The built HTML of docs/<doc> (use_directory_urls)."""
    stem = doc.removesuffix(".md")
    folder = "" if stem == "index" else stem.removesuffix("/index")
    return (site / folder / "index.html").read_text(encoding="utf-8")


def test_the_site_builds_with_strict(site_build):
    warnings = [line for line in site_build.log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert site_build.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(
        warnings or site_build.log.splitlines()[-20:])


# --- HTML validity --------------------------------------------------------------------------------


class _ParagraphChecker(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open_p: tuple[int, int] | None = None
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in BLOCKS and self.open_p:
            classes = dict(attrs).get("class") or ""
            self.problems.append(f"line {self.getpos()[0]}: <{tag} class={classes!r}> inside the "
                                 f"<p> opened on line {self.open_p[0]}")
            self.open_p = None
        if tag == "p":
            self.open_p = self.getpos()

    def handle_endtag(self, tag):
        if tag == "p":
            self.open_p = None


def test_no_block_opens_inside_a_paragraph(built_site):
    problems = {}
    for page in html_pages(built_site):
        checker = _ParagraphChecker()
        checker.feed(page.read_text(encoding="utf-8"))
        if checker.problems:
            problems[page.relative_to(built_site).as_posix()] = checker.problems
    assert not problems, "invalid nesting (a browser splits the <p>):\n" + "\n".join(
        f"{page}: " + "; ".join(found[:3]) for page, found in problems.items()
    )


def test_the_checker_finds_a_paragraph_inside_a_paragraph():
    checker = _ParagraphChecker()
    checker.feed('<p>numbers behind this figure<p class="timing-tag">H100</p></p><p>fine</p>')
    assert len(checker.problems) == 1, checker.problems


# --- The contributing page shows every line of its source -----------------------------------------


class _Text(HTMLParser):
    """The article's text (inside <article>), whitespace collapsed."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.inside = False
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.inside = self.inside or tag == "article"

    def handle_endtag(self, tag):
        self.inside = self.inside and tag != "article"

    def handle_data(self, data):
        if self.inside:
            self.parts.append(data)

    @property
    def text(self) -> str:
        return " ".join("".join(self.parts).split())


LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
CODE_SPAN = re.compile(r"`([^`]+)`")         # may run across a line break
SLOT = re.compile(r"\x00(\d+)\x00")


def _strip_markup(line: str) -> str:
    """A prose line (inline code already set aside) as the site shows it."""
    line = re.sub(r"^(#+|-|\d+\.|>)\s+", "", line.strip())  # heading, list and quote markers
    line = LINK.sub(r"\1", line)
    return re.sub(r"\*\*|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)", "", line)


def shown_text(markdown: str) -> list[str]:
    """What a reader should see of some Markdown prose: one piece per line or table cell.

    Inline code keeps every character (less the `;` of pymdownx.snippets' escape), even where
    it runs across a line break; the rest loses its markup.
    """
    code: list[str] = []

    def set_aside(match):
        code.append(" ".join(match[1].replace(";--8<--", "--8<--").split()))
        return f"\x00{len(code) - 1}\x00"

    pieces = []
    for line in CODE_SPAN.sub(set_aside, markdown).splitlines():
        stripped = line.strip()
        if stripped.startswith("|"):
            if set(stripped) <= set("|:- "):
                continue                                # a table's alignment row
            cells = stripped.strip("|").split("|")
        else:
            cells = [stripped]
        for cell in cells:
            text = SLOT.sub(lambda m: code[int(m[1])], _strip_markup(cell))
            if text := " ".join(text.split()):
                pieces.append(text)
    return pieces


def shown_pieces(doc: str) -> list[str]:
    """What the page should show of every line of docs/<doc>, in order."""
    lines = (DOCS / doc).read_text(encoding="utf-8").splitlines()
    if lines and lines[0] == "---":                     # front matter: not shown
        lines = lines[lines.index("---", 1) + 1:]
    pieces, prose, fenced = [], [], False
    for line in lines + ["```"]:                        # a last fence flushes the prose
        if line.lstrip().startswith("```"):
            if not fenced:
                pieces += shown_text("\n".join(prose))
                prose = []
            fenced = not fenced
        elif fenced:                                    # code: shown as it is
            if line.strip():
                pieces.append(" ".join(line.split()))
        elif not line.lstrip().startswith("<!--"):
            prose.append(line)
    return pieces


def test_the_contributing_page_shows_every_line_of_its_source(built_site):
    parser = _Text()
    parser.feed(page_html(built_site, "contributing.md"))
    missing = [piece for piece in shown_pieces("contributing.md") if piece not in parser.text]
    assert not missing, (
        "lines of docs/contributing.md missing from the built page (pymdownx.snippets swallows a "
        "line holding a section marker unless it is escaped as `;--8<--`):\n" + "\n".join(missing)
    )


def test_shown_text_reads_markup_as_the_site_shows_it():
    assert shown_text("- Cut with `# ;--8<-- [start:name]`. **Name** them") == [
        "Cut with # --8<-- [start:name]. Name them"
    ]
    assert shown_text("| `*` is a [wildcard](x.md) | *any* `a|b` |") == ["* is a wildcard", "any a|b"]
    assert shown_text("- `f(x,\n  y)` runs") == ["f(x, y) runs"]


# --- The API reference ---------------------------------------------------------------------------


def docstrings(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield getattr(node, "name", path.stem), text


def test_docstrings_write_dunder_names_as_code():
    """mkdocstrings reads docstrings as Markdown: a bare __init__ prints as a bold "init"."""
    documented = re.findall(r"^::: (\S+)", (DOCS / "reference.md").read_text(encoding="utf-8"), re.M)
    assert documented, "docs/reference.md documents no module"
    bare = [
        f"{module}.{name}: {match.group()}"
        for module in documented
        for name, text in docstrings(ROOT / (module.replace(".", "/") + ".py"))
        for match in re.finditer(r"(?<!\w)__\w+__(?!\w)", re.sub(r"`[^`]*`", "", text))
    ]
    assert not bare, "write these as `code` in the docstrings:\n" + "\n".join(bare)


def test_the_reference_page_shows_dunder_names(built_site):
    html = page_html(built_site, "reference.md")
    assert "<strong>init</strong>" not in html
    assert "__init__.py" in html


# --- Navigation and search -----------------------------------------------------------------------


class _Nav(HTMLParser):
    """Label of every link in the primary navigation, and the page's first <h1>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.labels: dict[str, str] = {}
        self.h1: str | None = None
        self._nav = 0
        self._link: tuple[str, list[str]] | None = None
        self._h1: list[str] | None = None
        self._headerlink = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "nav" and ("md-nav--primary" in classes or self._nav):
            self._nav += 1
        elif tag == "a" and self._nav and "md-nav__link" in classes:
            self._link = (attrs.get("href") or "", [])
        elif tag == "h1" and self.h1 is None:
            self._h1 = []
        elif tag == "a" and "headerlink" in classes:
            self._headerlink = True

    def handle_endtag(self, tag):
        if tag == "nav" and self._nav:
            self._nav -= 1
        elif tag == "a":
            if self._link:
                href, text = self._link
                self.labels.setdefault(href, " ".join("".join(text).split()))
                self._link = None
            self._headerlink = False
        elif tag == "h1" and self._h1 is not None:
            self.h1 = " ".join("".join(self._h1).split())
            self._h1 = None

    def handle_data(self, data):
        if self._link:
            self._link[1].append(data)
        if self._h1 is not None and not self._headerlink:
            self._h1.append(data)


def test_nav_labels_are_the_page_titles(built_site):
    """One title per page: the nav shows the page's H1 (the home page is labelled Home)."""
    home = _Nav()
    home.feed((built_site / "index.html").read_text(encoding="utf-8"))
    assert len(home.labels) > 5, f"found no primary navigation on the home page: {home.labels}"
    differ = []
    for href, label in home.labels.items():
        target = (built_site / href.split("#")[0] / "index.html").resolve()
        if target == (built_site / "index.html").resolve() or not target.is_file():
            continue
        page = _Nav()
        page.feed(target.read_text(encoding="utf-8"))
        if label != page.h1:
            differ.append(f"{href}: nav {label!r}, H1 {page.h1!r}")
    assert not differ, ("nav labels that are not the page's H1 (drop the label in mkdocs.yml's "
                        "nav, or retitle the page):\n" + "\n".join(differ))


def test_contributor_pages_are_kept_out_of_the_readers_search(built_site):
    index = json.loads((built_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    locations = {doc["location"].split("#")[0] for doc in index["docs"]}
    assert "execution/streams/" in locations, sorted(locations)[:20]
    for doc in CONTRIBUTOR_PAGES:
        assert doc.removesuffix(".md") + "/" not in locations, f"{doc} is in the search index"


@pytest.mark.parametrize(("code", "word"), [
    ('torch.autocast("cuda")', "autocast"),
    ("torch.cuda.CUDAGraph()", "Graph"),
    ("torch.cuda.get_device_properties(0)", "get_device_properties"),
    ("torch.cuda.synchronize()", "synchronize"),
    ("non_blocking=True", "non_blocking"),
])
def test_the_search_separator_cuts_api_names_into_words(built_site, code, word):
    separator = json.loads(
        (built_site / "search" / "search_index.json").read_text(encoding="utf-8")
    )["config"]["separator"]
    assert word in re.split(separator, code), (separator, re.split(separator, code))
    assert "3.5" in re.split(separator, "3.5 ms"), "a decimal point is not a word break"


# --- A local build names no address ---------------------------------------------------------------


def test_site_url_comes_only_from_SITE_URL(monkeypatch):
    monkeypatch.delenv("SITE_URL", raising=False)
    assert config()["site_url"] is None  # `make serve` then serves at the root of its address
    monkeypatch.setenv("SITE_URL", "https://example.org/gpu-field-guide/")
    assert config()["site_url"] == "https://example.org/gpu-field-guide/"


def test_a_local_build_writes_no_local_address(built_site):
    local = re.compile(r"(127\.0\.0\.1|localhost)(:\d+)?/")
    canonical = re.compile(r'<link rel="canonical" href="([^"]*)"')
    found = [f"{page.relative_to(built_site)}: {url}"
             for page in html_pages(built_site)
             for url in canonical.findall(page.read_text(encoding="utf-8")) if local.search(url)]
    sitemap = built_site / "sitemap.xml"
    if sitemap.is_file():
        found += [f"sitemap.xml: {url}" for url in re.findall(r"<loc>([^<]*)</loc>",
                                                               sitemap.read_text()) if local.search(url)]
    assert not found, "a local build wrote a local address:\n" + "\n".join(found)


# --- Features that are switched on are used -------------------------------------------------------


def test_content_tabs_are_used_where_enabled(built_site):
    extensions = [e if isinstance(e, str) else next(iter(e)) for e in config()["markdown_extensions"]]
    if "pymdownx.tabbed" not in extensions:
        pytest.skip("content tabs are not enabled")
    used = [p for p in html_pages(built_site) if 'class="tabbed-set' in p.read_text(encoding="utf-8")]
    assert used, "pymdownx.tabbed is enabled but no page has a tab set: use it or remove it"


def test_code_annotations_are_used_where_enabled(built_site):
    if "content.code.annotate" not in config()["theme"].get("features", []):
        pytest.skip("code annotations are not enabled")
    marker = re.compile(r'<span class="c1"># \(\d+\)!?</span>')
    used = [p for p in html_pages(built_site) if marker.search(p.read_text(encoding="utf-8"))]
    assert used, "content.code.annotate is enabled but no code block has an annotation marker"


# --- Sources -------------------------------------------------------------------------------------

def nav_docs(items) -> list[str]:
    """Every page of mkdocs.yml's nav, in order (labels dropped)."""
    found = []
    for item in items:
        for value in (item.values() if isinstance(item, dict) else [item]):
            found += nav_docs(value) if isinstance(value, list) else [value]
    return found


# Chapter pages are the published pages in chapter folders; drafts (draft_docs) join when they
# join the nav; a chapter's landing page (index.md) lists pages and cites nothing.
CHAPTER_PAGES = [doc for doc in nav_docs(config()["nav"])
                 if "/" in doc and not doc.endswith("/index.md")]


@pytest.mark.parametrize("doc", CHAPTER_PAGES)
def test_every_chapter_page_ends_with_its_references(doc):
    text = (DOCS / doc).read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings and headings[-1] == "References", (
        f"{doc}: the last section is {headings[-1:]}, not '## References' with the primary sources "
        "(PyTorch, CUDA, CuPy, Python documentation) the page relies on"
    )
    section = text[text.rindex("\n## References"):]
    links = re.findall(r"\]\((https://[^)\s]+)\)", section)
    assert len(links) >= 2, f"{doc}: its References link {links}"


def test_search_finds_each_lesson_once_not_its_notebook_page(built_site):
    """hooks/notebooks_out_of_search.py: a notebook page repeats its lesson, so search leaves it
    out; the lessons themselves are all in the index."""
    index = json.loads((built_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    locations = {entry["location"].split("#")[0] for entry in index["docs"]}
    assert not [loc for loc in locations if loc.startswith("notebooks/")]
    assert {"execution/streams/", "several-gpus/fsdp2/"} <= locations
