"""What readers of the best tutorial sites expect: a date on every page, a "what you will learn"
box, a summary, a glossary with hover definitions, a cheat sheet and one page of headline numbers.

Most checks read the Markdown; the rest read the session's build of the real site (`built_site`
in tests/conftest.py: its pages are written even where a warning elsewhere fails the strict build,
which tests/site/test_built_site.py reports on its own).
"""

import datetime as dt
import html
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

pytest.importorskip("markdown")  # the glossary is a Markdown extension

from fieldguide import ROOT
from fieldguide.content.pages import is_draft
from fieldguide.rendering import glossary
from tests.helpers import ENTRY_POINTS

DOCS = ROOT / "docs"
ABBREVIATIONS = ROOT / "includes" / "abbreviations.md"
NOT_CHAPTERS = {"Home", "Reference", "Contributing"}   # nav sections whose pages teach nothing
BOX_TITLE = '!!! abstract "What you will learn"'
SUMMARY = re.compile(r"^## (Summary|What to take from this)\s*$", re.M)
LINK = re.compile(r"\[[^\]]+\]\((?P<target>[^)\s]+)\)")
NUMBER = re.compile(r"(?<![\w/])\d[\d.,]*(?!\w)")   # 12, 3.5, 1,000; not the 32 of TF32
DATE_PLUGIN = "mkdocs_git_revision_date_localized_plugin"
DATE_SPAN = re.compile(r'class="git-revision-date-localized-plugin git-revision-date-localized-plugin-date"'
                       r'[^>]*>(?P<date>[^<]+)<')


# --- mkdocs.yml ----------------------------------------------------------------------------------

class _AnyTagLoader(yaml.SafeLoader):
    """mkdocs.yml has !ENV and !!python/name tags; these tests only read plain keys."""


_AnyTagLoader.add_multi_constructor("", lambda loader, suffix, node: None)
_AnyTagLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def config() -> dict:
    return yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_AnyTagLoader)


def nav_pages(items, section=None):
    """(section, title, path) for every page of the nav, in order."""
    for item in items:
        if isinstance(item, str):            # a bare path: the page's H1 is its title
            item = {None: item}
        for title, value in item.items():
            if isinstance(value, list):
                yield from nav_pages(value, section or title)
            else:
                yield section or title or value, title, value


NAV = list(nav_pages(config()["nav"]))
ORDER = [path for _, _, path in NAV]
# A chapter's landing page (its folder's index.md, Material's navigation.indexes) says what the
# chapter teaches and lists its pages: it is no lesson, so the lessons' frame is not asked of it.
LANDING_PAGES = [path for _, _, path in NAV if path.endswith("/index.md")]
CHAPTER_PAGES = [path for section, _, path in NAV
                 if section not in NOT_CHAPTERS and path not in LANDING_PAGES]
READER_PAGES = [path for section, _, path in NAV if section != "Contributing"]


def test_no_draft_is_in_the_nav():
    """A page under draft_docs (a chapter, or one page not measured yet) stays out of the nav:
    MkDocs keeps a nav entry to a page its build leaves out, so the published nav would link a
    missing page. It joins the nav, and gets its rule and headline, when it is published."""
    drafts = [path for path in ORDER if is_draft(DOCS / path)]
    assert not drafts, f"take these out of the nav while they are drafts (draft_docs): {drafts}"


def text(path: str) -> str:
    return (DOCS / path).read_text(encoding="utf-8")


def resolve(page: str, target: str) -> tuple[str, str]:
    """A relative link on `page` -> (docs-relative path, anchor)."""
    path, _, anchor = target.partition("#")
    if not path:
        return page, anchor
    return os.path.normpath(os.path.join(os.path.dirname(page), path)).replace(os.sep, "/"), anchor


def url_of(path: str) -> str:
    """docs path -> the built page (use_directory_urls)."""
    stem = path.removesuffix(".md")
    if stem == "index" or stem.endswith("/index"):   # a folder's index.md is the folder's page
        return stem.removesuffix("index") + "index.html"
    return f"{stem}/index.html"


def test_the_nav_has_chapters_and_a_reference_section():
    assert len(CHAPTER_PAGES) >= 14
    assert {"Reference", "Contributing"} <= {section for section, _, _ in NAV}
    for path in ORDER:
        assert (DOCS / path).is_file(), path


# --- The "what you will learn" box and the summary -------------------------------------------------

def learn_box(path: str) -> list[str]:
    """The box's lines, which must come right under the page's H1."""
    lines = text(path).splitlines()
    assert lines[0].startswith("# "), f"{path} does not start with its H1"
    assert lines[1] == "" and lines[2] == BOX_TITLE, (
        f"{path}: the line under the H1 must open the box, {BOX_TITLE!r}")
    box = []
    for line in lines[3:]:
        if line and not line.startswith("    "):
            break
        box.append(line[4:])
    return box


@pytest.mark.parametrize("path", CHAPTER_PAGES)
def test_every_chapter_page_opens_with_what_you_will_learn(path):
    box = learn_box(path)
    bullets = [line for line in box if line.startswith("- ")]
    prerequisites = [line for line in box if line.startswith("**Prerequisites:**")]
    assert 2 <= len(bullets) <= 4, f"{path}: {len(bullets)} bullets in the box (2 to 4)"
    assert len(prerequisites) == 1, f"{path}: the box needs one **Prerequisites:** line"
    prose = re.sub(r"`[^`]*`|\]\([^)]*\)", "", "\n".join(box))
    assert not NUMBER.search(prose), f"{path}: the box types a number (leave them to the page)"


@pytest.mark.parametrize("path", CHAPTER_PAGES)
def test_prerequisites_link_only_pages_that_come_earlier(path):
    (line,) = [line for line in learn_box(path) if line.startswith("**Prerequisites:**")]
    for match in LINK.finditer(line):
        target, _ = resolve(path, match["target"])
        assert target in ORDER, f"{path}: prerequisite {match['target']} is not a page in the nav"
        assert ORDER.index(target) < ORDER.index(path), (
            f"{path}: prerequisite {target} comes later in the nav")


@pytest.mark.parametrize("path", [path for section, _, path in NAV
                                  if section not in NOT_CHAPTERS | ENTRY_POINTS
                                  and path not in LANDING_PAGES][1:])
def test_prerequisites_name_at_least_one_earlier_page(path):
    """Past the first page, a reader needs something from an earlier one: the box says which (a
    box that names none, or only outside knowledge, has usually lost a page in a reordering)."""
    (line,) = [line for line in learn_box(path) if line.startswith("**Prerequisites:**")]
    assert any(resolve(path, m["target"])[0] in ORDER for m in LINK.finditer(line)), (
        f"{path}: its prerequisites link no earlier page of the nav")


@pytest.mark.parametrize("path", CHAPTER_PAGES)
def test_every_chapter_page_has_a_summary(path):
    assert SUMMARY.search(text(path)), f"{path} has no '## Summary' (or 'What to take from this')"


# --- The glossary --------------------------------------------------------------------------------

TERMS = glossary.terms(ABBREVIATIONS)


def test_the_abbreviations_file_holds_only_definitions():
    # It is appended to every page: any other line would show up at the bottom of all of them.
    lines = ABBREVIATIONS.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        assert not line.strip() or glossary.DEFINITION.match(line), f"line {number}: {line!r}"
        # One block per definition: Python-Markdown's block processors test the rest of a block
        # again after each definition they take from it, so one block of all of them made every
        # page's conversion quadratic in the glossary (a warm build 12.4 s, 8.8 s with blank lines).
        assert not (line.strip() and number < len(lines) and lines[number].strip()), \
            f"line {number + 1}: put a blank line between two definitions"
    assert {"SM", "H2D", "D2H", "TF32", "HBM", "PCIe", "NVLink", "AMP", "DDP", "NCCL", "SIMT", "FLOP",
            "GIL", "L2", "OOM"} <= set(TERMS)


def test_each_term_has_its_own_anchor_and_a_meaning_without_markup():
    anchors = [glossary.anchor(term) for term in TERMS]
    assert len(set(anchors)) == len(anchors)
    for term, meaning in TERMS.items():
        assert meaning and not re.search(r"[`*_\[\]<>]", meaning), f"{term}: a tooltip is plain text"


def test_the_glossary_page_is_generated_from_the_file():
    import markdown

    md = markdown.Markdown(extensions=["fieldguide.rendering.glossary", "def_list", "attr_list"])
    out = md.convert("# Glossary\n\n" + glossary.MARKER + "\n")
    for term, meaning in TERMS.items():
        assert f'<dt id="{glossary.anchor(term)}">{html.escape(term, quote=False)}</dt>' in out
        assert html.escape(meaning, quote=False) in out
    assert glossary.MARKER in text("glossary.md")


def test_the_config_appends_the_glossary_to_every_page():
    cfg = config()
    extensions = {next(iter(e)) if isinstance(e, dict) else e: e for e in cfg["markdown_extensions"]}
    assert {"abbr", "def_list", "attr_list", "fieldguide.rendering.glossary"} <= set(extensions)
    snippets = extensions["pymdownx.snippets"]["pymdownx.snippets"]
    assert "includes/abbreviations.md" in snippets["auto_append"] and snippets["check_paths"]
    assert "content.tooltips" in cfg["theme"]["features"]


# --- Page dates ----------------------------------------------------------------------------------

def test_workflows_that_build_the_site_fetch_the_whole_history():
    # A depth-1 checkout on GitHub Actions makes the date plugin warn, which fails --strict, and
    # would date every page by the last commit.
    for name in ("ci.yml", "pages.yml"):
        workflow = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
        steps = [s for job in workflow["jobs"].values() for s in job.get("steps", [])]
        checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
        assert checkouts and all(s.get("with", {}).get("fetch-depth") == 0 for s in checkouts), name


def test_the_date_plugin_never_fails_a_build_for_missing_history():
    (plugin,) = [p for p in config()["plugins"] if isinstance(p, dict) and "git-revision-date-localized" in p]
    options = plugin["git-revision-date-localized"]
    assert options["fallback_to_build_date"] is True and options["strict"] is False
    assert options["type"] == "date"


# --- The built site ------------------------------------------------------------------------------

@pytest.fixture
def site(built_site) -> Path:
    """The session's build of the real site (tests/conftest.py)."""
    return built_site


def built(site: Path, path: str) -> str:
    return (site / url_of(path)).read_text(encoding="utf-8")


class _Prose(HTMLParser):
    """Text of a page's article, outside code, abbreviations and tags' attributes, and outside
    tables, headings and figure captions, where terms carry no tooltip (fieldguide/rendering/glossary.py)."""

    SKIP = {"code", "pre", "abbr", "script", "style", "svg", "object"}  # object: a chart's fallback
    NOT_PROSE = {"table", "figcaption", "h1", "h2", "h3", "h4", "h5", "h6"}

    def __init__(self):
        super().__init__()
        self.depth = self.skipping = self.not_prose = 0
        self.chunks: list[str] = []
        self.abbrs: list[tuple[str, str]] = []   # (term, title)
        self.abbrs_outside_prose: list[str] = []
        self._title: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "article":
            self.depth += 1
        if self.depth and tag in self.SKIP | self.NOT_PROSE:
            self.skipping += 1
        if self.depth and tag in self.NOT_PROSE:
            self.not_prose += 1
        self._title = dict(attrs).get("title") if tag == "abbr" else None
        if tag == "abbr" and self.not_prose:
            self.abbrs_outside_prose.append(self._title or "")

    def handle_endtag(self, tag):
        if self.depth and tag in self.SKIP | self.NOT_PROSE:
            self.skipping -= 1
        if self.depth and tag in self.NOT_PROSE:
            self.not_prose -= 1
        if tag == "article":
            self.depth -= 1
        self._title = None

    def handle_data(self, data):
        if self._title is not None and self.depth:
            self.abbrs.append((data, self._title))
        elif self.depth and not self.skipping:
            self.chunks.append(data)


def prose(page_html: str) -> _Prose:
    parser = _Prose()
    parser.feed(page_html)
    return parser


@pytest.mark.parametrize("path", READER_PAGES)
def test_every_term_in_the_text_is_an_abbr_with_its_meaning(site, path):
    page_html = built(site, path)
    parsed = prose(page_html)
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(TERMS, key=len, reverse=True)))
                         + r")\b")
    bare = sorted({m[0] for chunk in parsed.chunks for m in pattern.finditer(chunk)})
    assert not bare, (
        f"{path}: terms shown without their meaning: {bare}. The abbr extension explains the terms "
        "of includes/abbreviations.md in Markdown text; HTML written by a hook or as a raw block "
        "needs its own <abbr title=...>")
    for term, title in set(parsed.abbrs):
        assert title == TERMS[term], term
    assert not parsed.abbrs_outside_prose, (
        f"{path}: {len(parsed.abbrs_outside_prose)} tooltips in tables, headings or captions")


def test_pages_explain_their_terms(site):
    used = {term for path in CHAPTER_PAGES for term, _ in prose(built(site, path)).abbrs}
    assert {"SM", "SMs", "TF32", "PCIe", "GIL", "CUDA", "GB/s"} <= used


def test_the_glossary_page_lists_every_term(site):
    page_html = built(site, "glossary.md")
    for term in TERMS:
        assert f'<dt id="{glossary.anchor(term)}">' in page_html, term


def git_date(path: str) -> str | None:
    """The date of the page's last commit as the plugin prints it (English, UTC), or None."""
    # The plugin's own query (mkdocs_git_revision_date_localized_plugin/util.py)
    query = ["git", "log", "-n", "1", "--follow", "--diff-filter=r", "--ignore-all-space",
             "--ignore-blank-lines", "--no-show-signature", "--date=unix", "--format=%at", "--",
             f"docs/{path}"]
    try:
        stamp = subprocess.run(query, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    if not stamp:
        return None
    day = dt.datetime.fromtimestamp(int(stamp), dt.UTC)
    return f"{day:%B} {day.day}, {day.year}"


@pytest.mark.parametrize("path", READER_PAGES)
def test_every_reader_page_shows_its_last_update_from_git(site, path):
    match = DATE_SPAN.search(built(site, path))
    assert match, f"{path} shows no 'Last update' date"
    expected = git_date(path)
    if expected is not None:   # a page not committed yet shows the build date
        assert match["date"] == expected


def test_a_copy_without_git_history_still_builds_with_dates(tmp_path, monkeypatch, caplog):
    """A source tarball or a scaffold's temporary copy: no .git, so the build date stands in.

    A one-page site with the real date plugin options and theme, built in this process outside
    any git repository (the real site's build in a copy without .git took a third full build per
    run, for what this one page shows)."""
    for needed in ("mkdocs", "material", DATE_PLUGIN):  # MkDocs, the theme, the date plugin
        pytest.importorskip(needed)
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config

    (plugin,) = [p for p in config()["plugins"] if isinstance(p, dict) and "git-revision-date-localized" in p]
    project = tmp_path / "tarball"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "index.md").write_text("# A page\n\nText.\n")
    (project / "mkdocs.yml").write_text(yaml.safe_dump(
        {"site_name": "no git", "theme": {"name": "material"}, "plugins": [plugin]}))
    assert subprocess.run(["git", "rev-parse"], cwd=project, capture_output=True).returncode != 0, \
        "the temporary folder is inside a git repository"
    monkeypatch.chdir(project)
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    caplog.set_level("INFO")
    mkdocs_build(load_config(str(project / "mkdocs.yml"), strict=True, site_dir=str(tmp_path / "site")))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert not warnings, warnings
    match = DATE_SPAN.search((tmp_path / "site" / "index.html").read_text(encoding="utf-8"))
    assert match and str(dt.datetime.now(dt.UTC).year) in match["date"]


# --- The cheat sheet -----------------------------------------------------------------------------

def list_items(path: str) -> list[str]:
    """A page's top-level list items, each with its continuation lines joined."""
    items: list[str] = []
    for line in text(path).splitlines():
        if line.startswith("- "):
            items.append(line[2:])
        elif line.startswith("  ") and items:
            items[-1] += " " + line.strip()
    return items


def test_missing_anchors_fail_the_strict_build():
    validation = config()["validation"]
    assert validation["anchors"] == "warn" and validation["unrecognized_links"] == "warn"


def test_every_rule_links_a_section_of_a_chapter_page():
    rules = list_items("cheat-sheet.md")
    assert len(rules) >= 30
    for rule in rules:
        links = [resolve("cheat-sheet.md", m["target"]) for m in LINK.finditer(rule)]
        assert links, f"rule without a link: {rule}"
        assert all(path in CHAPTER_PAGES and anchor for path, anchor in links), rule
        assert not NUMBER.search(re.sub(r"`[^`]*`|\[[^\]]*\]\([^)]*\)", "", rule)), (
            f"a rule types a number: {rule}")


def test_the_cheat_sheet_links_every_chapter_page():
    linked = {resolve("cheat-sheet.md", m["target"])[0] for m in LINK.finditer(text("cheat-sheet.md"))}
    missing = sorted(set(CHAPTER_PAGES) - linked)
    assert not missing, f"no rule links {missing}"


@pytest.mark.parametrize("path", ["cheat-sheet.md", "headline-numbers.md"])
def test_every_link_lands_on_an_existing_section(site, path):
    # What `validation: anchors: warn` makes the strict build check, checked here on the HTML.
    for match in LINK.finditer(text(path)):
        target, anchor = resolve(path, match["target"])
        page_html = built(site, target)
        if anchor:
            assert f'id="{anchor}"' in page_html, f"{path}: {match['target']} has no such section"


# --- Headline numbers ----------------------------------------------------------------------------

SHORTCODE = re.compile(r"<!--\s*timing-[\w-]+:.*?-->")


def headline_rows() -> list[list[str]]:
    rows = [line.strip("|").split(" | ") for line in text("headline-numbers.md").splitlines()
            if line.startswith("| ") and not line.startswith("| Measured |")]
    assert rows and all(len(row) == 3 for row in rows)
    return rows


def test_every_headline_is_measured_and_linked_to_its_page():
    for measured, result, where in headline_rows():
        assert SHORTCODE.search(result), f"{measured}: the result is not a timing shortcode"
        assert not NUMBER.search(SHORTCODE.sub("", result)), f"{measured}: a number typed by hand"
        (link,) = LINK.finditer(where)
        target, anchor = resolve("headline-numbers.md", link["target"])
        assert target in CHAPTER_PAGES and anchor, f"{measured}: links {link['target']}"


def test_every_page_with_measurements_has_a_headline():
    # timing-bound shows a bound from the page's tests, not a measurement
    measured = {path for path in CHAPTER_PAGES
                if any("timing-bound:" not in m for m in SHORTCODE.findall(text(path)))}
    linked = {resolve("headline-numbers.md", link["target"])[0]
              for *_, where in headline_rows() for link in LINK.finditer(where)}
    assert measured and not measured - linked, f"no headline from {sorted(measured - linked)}"


def test_the_headline_page_names_its_gpu_and_dates(site):
    page_html = built(site, "headline-numbers.md")
    assert "timing unavailable" not in page_html and "<!-- timing-" not in page_html
    section = page_html[page_html.index('id="measured-on"'):]
    assert re.search(r"NVIDIA [^<|]+", section) and re.search(r"\d{4}-\d{2}-\d{2}", section)
