"""The built site in headless Chromium: pages load cleanly, search finds pages, copy copies code.

The site is built with `mkdocs build --strict` into a temporary directory and served over HTTP on
127.0.0.1 (not file://, so the search worker and the clipboard behave as on the real site). Pages
are discovered from the build, never listed here. Chromium is Debian's (`make browser`); Playwright
drives it through `executable_path` and never downloads a browser of its own.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fieldguide import ROOT
from fieldguide.snippets import sections, snippet_files

# Without these Chromium runs as root only with --no-sandbox, and it tries to reach the network
# (updates, sync, QUIC probes), which is closed here.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
SKIP_DIRS = {"assets", "search"}  # built-in assets and the search index, not pages
TAB_BATCH = 8                     # pages loaded side by side in test 1
TIMEOUT_MS = 15_000

# Material asks the GitHub API for the repository's stars, forks and latest release; the network
# is closed here, so the browser gets a canned answer instead of a failed request.
GITHUB_API = "https://api.github.com/"
GITHUB_FACTS = '{"stargazers_count": 0, "forks_count": 0, "tag_name": "v0.0.0"}'


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(reason: str, fix: str = "install chromium with `make browser`"):
    """Skip on a developer's machine; under CI a missing browser is a failure, never a skip."""
    if _in_ci():
        pytest.fail(f"{reason}. The browser test must run under CI; {fix}.", pytrace=False)
    pytest.skip(f"{reason}; {fix}")


def _chromium_path() -> str:
    configured = os.environ.get("CHROMIUM")
    if configured:
        found = shutil.which(configured)
        if not found:
            _unavailable(f"CHROMIUM={configured!r} is not an executable")
        return found
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    _unavailable(f"no Chromium on PATH (looked for {', '.join(CHROMIUM_NAMES)}; or set CHROMIUM)")


# --- What the built HTML contains (read without a browser) ------------------------------------


@dataclass
class BuiltPage:
    url: str                        # absolute URL on the test server
    h1: str                         # the page title as shown, without the permalink mark
    code: list[str] = field(default_factory=list, repr=False)  # every `pre > code`, in order


class _PageParser(HTMLParser):
    """Collects the first <h1> (less its headerlink) and the text of every <code> inside a <pre>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.h1: str | None = None
        self.code: list[str] = []
        self._h1: list[str] | None = None
        self._code: list[str] | None = None
        self._pre = 0
        self._headerlink = False

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "h1" and self.h1 is None:
            self._h1 = []
        elif tag == "a" and "headerlink" in classes:
            self._headerlink = True
        elif tag == "pre":
            self._pre += 1
        elif tag == "code" and self._pre:
            self._code = []

    def handle_endtag(self, tag):
        if tag == "h1" and self._h1 is not None:
            self.h1 = " ".join("".join(self._h1).split())
            self._h1 = None
        elif tag == "a":
            self._headerlink = False
        elif tag == "pre" and self._pre:
            self._pre -= 1
        elif tag == "code" and self._code is not None:
            self.code.append("".join(self._code))
            self._code = None

    def handle_data(self, data):
        if self._h1 is not None and not self._headerlink:
            self._h1.append(data)
        if self._code is not None:
            self._code.append(data)


def _discover(site: Path, base_url: str) -> list[BuiltPage]:
    pages = []
    for index in sorted(site.rglob("index.html")):
        rel = index.relative_to(site)
        if rel.parts[0] in SKIP_DIRS:
            continue
        parser = _PageParser()
        parser.feed(index.read_text(encoding="utf-8"))
        path = "/".join(rel.parent.parts)
        url = f"{base_url}/{path}/" if path else f"{base_url}/"
        pages.append(BuiltPage(url=url, h1=parser.h1 or "", code=parser.code))
    return pages


def _snippet_sections() -> dict[str, str]:
    """Every section of every snippet module, text -> `path:name`."""
    found = {}
    for path in snippet_files():
        for name, text in sections(path).items():
            found.setdefault(text, f"{path.relative_to(ROOT).as_posix()}:{name}")
    return found


# --- Fixtures: one build, one server, one browser per session; a fresh context per test -------


@dataclass
class Site:
    dir: Path
    url: str
    pages: list[BuiltPage] = field(repr=False)
    separator: str = r"[\s\-]+"  # how the search index cuts text into words

    @property
    def home(self) -> BuiltPage:
        return next((p for p in self.pages if p.url == f"{self.url}/"), self.pages[0])


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def chromium_path() -> str:
    try:
        import mkdocs  # noqa: F401
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        _unavailable(f"cannot import {exc.name}", "install the test requirements (`make test`)")
    return _chromium_path()


@pytest.fixture(scope="session")
def site(chromium_path, tmp_path_factory) -> Iterator[Site]:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    if build.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed:\n{build.stderr[-4000:]}", pytrace=False)

    handler = functools.partial(_QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        pages = _discover(out, url)
        assert pages, f"the build in {out} has no pages"
        index = json.loads((out / "search" / "search_index.json").read_text(encoding="utf-8"))
        yield Site(dir=out, url=url, pages=pages, separator=index["config"]["separator"])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# Module scope: Playwright's sync API keeps an event loop running in this thread while it is open,
# and later tests call asyncio.run().
@pytest.fixture(scope="module")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path, args=CHROMIUM_ARGS, headless=True
        )
        yield browser
        browser.close()


@pytest.fixture
def context(browser, site):
    """A fresh browser context that reaches only the test server (and a canned GitHub API)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)

    def off_site(route):
        if route.request.url.startswith(GITHUB_API):
            route.fulfill(status=200, content_type="application/json", body=GITHUB_FACTS)
        else:  # a page reaching out to the network: the failed request is a console error
            route.abort("blockedbyclient")

    context.route(lambda url: not url.startswith(f"{site.url}/"), off_site)
    yield context
    context.close()


# --- Tests ---------------------------------------------------------------------------------------


@pytest.mark.browser
def test_every_page_loads_without_errors(context, site):
    problems: dict[str, list[str]] = {}
    for start in range(0, len(site.pages), TAB_BATCH):
        tabs = []
        for built in site.pages[start:start + TAB_BATCH]:
            errors = problems.setdefault(built.url, [])
            page = context.new_page()
            page.on(
                "console",
                lambda msg, errors=errors: msg.type == "error" and errors.append(
                    f"console error: {msg.text} (at {msg.location.get('url') or '?'})"
                ),
            )
            page.on("pageerror", lambda exc, errors=errors: errors.append(f"page error: {exc}"))
            response = page.goto(built.url, wait_until="load")
            if response is None or not response.ok:
                errors.append(f"HTTP {response.status if response else 'no response'}")
            tabs.append(page)
        for page in tabs:  # the tabs go quiet side by side; late errors count too
            page.wait_for_load_state("networkidle")
            page.close()
    report = [f"{url}\n    " + "\n    ".join(msgs) for url, msgs in problems.items() if msgs]
    if report:
        pytest.fail("pages with errors:\n" + "\n".join(report), pytrace=False)


# lunr's English stop words of five letters or more: the index drops them, so never search one.
STOP_WORDS = set(
    "about across after almost among because could either every least might neither often other "
    "rather should since their there these where which while would".split()
)


def _title_words(site: Site, page: BuiltPage) -> set[str]:
    """Words of the page's title as the search index cuts them: letters only, five or more."""
    words = {w.lower() for w in re.split(site.separator, page.h1)}
    return {w for w in words if re.fullmatch(r"[a-z]{5,}", w) and w not in STOP_WORDS}


def _search_target(site: Site) -> tuple[BuiltPage, str]:
    """A page other than home and the longest word of its title that fewest other titles share."""
    titles = Counter(word for page in site.pages for word in _title_words(site, page))
    others = [page for page in site.pages if page is not site.home] or site.pages
    candidates = [
        (titles[word], -len(word), word, page)
        for page in others
        for word in _title_words(site, page)
    ]
    if not candidates:
        pytest.fail("no page title has a word of five letters or more to search for")
    _, _, word, page = min(candidates, key=lambda c: c[:3])
    return page, word


@pytest.mark.browser
def test_search_finds_a_page_by_a_title_word(context, site):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    target, word = _search_target(site)
    page = context.new_page()
    page.goto(site.home.url, wait_until="load")
    query = page.locator("input.md-search__input")
    if not query.is_visible():  # narrow layouts hide the box behind the header's search button
        page.locator('label.md-header__button[for="__search"]').click()
    query.click()
    query.press_sequentially(word)  # Material searches on key events, not on programmatic input
    links = page.locator(".md-search-result__item a.md-search-result__link")
    try:
        page.wait_for_function(
            "url => [...document.querySelectorAll("
            "'.md-search-result__item a.md-search-result__link')]"
            ".some(a => a.origin + a.pathname === url)",  # less ?h=word and #section
            arg=target.url,
            timeout=TIMEOUT_MS,
        )
    except PlaywrightTimeout:
        shown = links.evaluate_all("els => els.map(a => a.href)")
        meta = page.locator(".md-search-result__meta").all_inner_texts()
        pytest.fail(
            f"searching {word!r} (from the title {target.h1!r}) on {site.home.url} did not list "
            f"{target.url}; results: {shown or meta}",
            pytrace=False,
        )


# A line ending in `# (1)` or `# (1)!` carries a code annotation, which Material drops on copy.
ANNOTATION = re.compile(r"#\s*\(\d+\)!?\s*$", re.M)

# What a reader gets by selecting the whole block by hand. Not `innerText`: with `line_spans`
# every line is a block-level <span> ending in its newline, and innerText doubles blank lines.
SELECTED_TEXT = """code => {
    const range = document.createRange();
    range.selectNodeContents(code);
    const selection = getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    const text = selection.toString();
    selection.removeAllRanges();
    return text;
}"""


def _copy_target(site: Site, known: dict[str, str]) -> tuple[BuiltPage, int]:
    """The first code block that shows a snippet section, else the first code block at all."""
    blocks = [
        (built, index, text.rstrip("\n"))
        for built in site.pages
        for index, text in enumerate(built.code)
        if not ANNOTATION.search(text)
    ]
    if not blocks:
        pytest.fail("no page of the built site shows a code block without annotations")
    built, index, _ = next((b for b in blocks if b[2] in known), blocks[0])
    return built, index


@pytest.mark.browser
def test_copy_button_copies_the_code_shown(context, site):
    known = _snippet_sections()
    built, index = _copy_target(site, known)
    where = f"code block {index} on {built.url}"
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.url)
    page = context.new_page()
    page.goto(built.url, wait_until="load")

    block = page.locator("pre > code").nth(index)
    shown = block.evaluate(SELECTED_TEXT).rstrip("\n")
    # Older Material renders `button.md-clipboard`, newer (9.8) `nav.md-code__nav >
    # button.md-code__button`; both name their code block in data-clipboard-target.
    button = block.locator("xpath=..").locator("button[data-clipboard-target]")
    assert button.count() == 1, f"{where} has no copy button"
    page.evaluate("navigator.clipboard.writeText('(clipboard not written)')")
    block.hover()
    button.click()
    page.locator(".md-dialog--active").wait_for()  # Material's "Copied to clipboard"

    copied = page.evaluate("navigator.clipboard.readText()").rstrip("\n")
    assert copied == shown, (
        f"{where}: the clipboard differs from the code shown\n"
        f"--- shown\n{shown}\n--- copied\n{copied}"
    )
    assert copied in known, (
        f"{where} matches no section of any module in snippets/ (fieldguide.snippets.sections); "
        f"copied:\n{copied}"
    )
