"""The built site in headless Chromium: pages load cleanly at desktop and phone width, reach
nothing off the site, show code at a readable size, draw their diagrams, open their prompts from
the keyboard and pass axe-core in both colour schemes (at desktop width, AXE_WIDTHS); search finds
pages and API names; copy copies code; each reader's journey reaches its answer.

The site is built once per session (`built_site`, tests/conftest.py) and served over HTTP on
127.0.0.1 (not file://, so the search worker and the clipboard behave as on the real site). Every
request for anything but that server is recorded and fails: the site promises to work offline. Pages
are discovered from the build, never listed here. Chromium is Debian's (`make browser`);
Playwright drives it through `executable_path` and never downloads a browser of its own.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fieldguide import ROOT
from fieldguide.content import prompts
from fieldguide.content.snippets import sections, snippet_files

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
    # Nothing leaves the machine: every host name fails to resolve but 127.0.0.1 (the test
    # server's, on any port), and no proxy is used. (A route in the context would refuse them
    # too, but a context with a route gets no HTTP cache: every page would fetch Material's
    # scripts, styles and axe-core again, 0.1 s and 0.1 CPU-seconds a page more; 2026-11-27.)
    # _open_context records each attempt.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--no-proxy-server",
]
# Chromium's headless shell first (Debian's chromium-headless-shell, `make browser`): its old
# headless mode, since Chromium 132 only in a binary of its own, which Playwright itself runs
# for headless by default: Blink without the full browser around it (not the same browser in
# every detail, as Puppeteer's docs say). Every page at desktop width took 153 CPU-seconds in
# it against 170 in `chromium` (2026-11-27).
CHROMIUM_NAMES = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
SKIP_DIRS = {"assets", "search"}  # built-in assets and the search index, not pages
TIMEOUT_MS = 15_000
VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
MIN_CODE_PX = 13                  # code is the text readers copy: no smaller than this


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(reason: str, fix: str = "install chromium-headless-shell with `make browser`"):
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
    diagrams: int = 0               # Mermaid diagrams: <pre class="mermaid"> in the HTML
    text: str = field(default="", repr=False)  # the article's text, markup removed
    prompts: int = 0                # "predict, then run" prompts: <details class="predict">
    charts: int = 0                 # charts and drawn ideas: <figure class="timing-chart">


class _PageParser(HTMLParser):
    """Collects the first <h1> (less its headerlink), the text of every <code> inside a <pre>
    except Mermaid sources, and how many Mermaid diagrams and prompts there are."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.h1: str | None = None
        self.code: list[str] = []
        self.diagrams = 0
        self.prompts = 0
        self.charts = 0
        self.text: list[str] = []
        self._mermaid = False
        self._article = False
        self._h1: list[str] | None = None
        self._code: list[str] | None = None
        self._pre = 0
        self._headerlink = False

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        self._article = self._article or tag == "article"
        if tag == "h1" and self.h1 is None:
            self._h1 = []
        elif tag == "a" and "headerlink" in classes:
            self._headerlink = True
        elif tag == "details" and prompts.KIND in classes:
            self.prompts += 1
        elif tag == "figure" and "timing-chart" in classes:
            self.charts += 1
        elif tag == "pre":
            self._pre += 1
            if "mermaid" in classes:
                self.diagrams += 1
                self._mermaid = True
        elif tag == "code" and self._pre and not self._mermaid:
            self._code = []

    def handle_endtag(self, tag):
        self._article = self._article and tag != "article"
        if tag == "h1" and self._h1 is not None:
            self.h1 = " ".join("".join(self._h1).split())
            self._h1 = None
        elif tag == "a":
            self._headerlink = False
        elif tag == "pre" and self._pre:
            self._pre -= 1
            self._mermaid = False
        elif tag == "code" and self._code is not None:
            self.code.append("".join(self._code))
            self._code = None

    def handle_data(self, data):
        if self._h1 is not None and not self._headerlink:
            self._h1.append(data)
        if self._code is not None:
            self._code.append(data)
        if self._article:
            self.text.append(data)


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
        pages.append(BuiltPage(url=url, h1=parser.h1 or "", code=parser.code,
                               diagrams=parser.diagrams, text="".join(parser.text),
                               prompts=parser.prompts, charts=parser.charts))
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
    """The built site, and axe-core at AXE_URL. Served, so that its 650 KB no longer go through
    Playwright's protocol for every page (injected as text: 0.16 s a page, 14 s per width), and
    kept in the browser's HTTP cache from one page to the next."""

    def do_GET(self):
        if self.path != AXE_URL:
            return super().do_GET()
        body = AXE.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/javascript")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600")  # the test's file, not the site's
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _SiteServer(http.server.ThreadingHTTPServer):
    """The built site on loopback. A page left on its load event cancels what it still fetched
    (the search index): the browser hanging up is not an error; anything else is reported."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    try:
        import mkdocs  # noqa: F401
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        _unavailable(f"cannot import {exc.name}", "install the test requirements (`make test`)")
    return _chromium_path()


@pytest.fixture(scope="session")
def site(chromium_path, built_site) -> Iterator[Site]:
    out = built_site
    handler = functools.partial(_QuietHandler, directory=str(out))
    server = _SiteServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        pages = _discover(out, url)
        assert pages, f"the build in {out} has no pages"
        assert not (out / AXE_URL.strip("/")).exists(), f"the site has a file at {AXE_URL}"
        # While working on a few pages: FIELDGUIDE_BROWSER_PAGES="execution/streams,glossary".
        only = [p.strip("/") for p in os.environ.get("FIELDGUIDE_BROWSER_PAGES", "").split(",") if p]
        if only:
            pages = [p for p in pages if any(p.url.rstrip("/").endswith("/" + o) for o in only)]
            assert pages, f"FIELDGUIDE_BROWSER_PAGES={only} matches no page of the build"
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


# What a page makes itself: no request goes out (Playwright reports no data: URL at all).
IN_PAGE_SCHEMES = ("blob:",)


class OffSite(list):
    """The requests that tried to leave the test server, as `page URL -> request URL`."""


def _open_context(browser, site: Site, viewport: dict, scheme: str = "light"):
    """A fresh context whose requests anywhere but the test server are recorded (and fail:
    CHROMIUM_ARGS lets no other host name resolve). `scheme` is the reader's colour scheme,
    which the site follows (prefers-color-scheme)."""
    context = browser.new_context(viewport=viewport, color_scheme=scheme)
    context.set_default_timeout(TIMEOUT_MS)
    off_site = OffSite()

    def record(request):
        if request.url.startswith((f"{site.url}/", *IN_PAGE_SCHEMES)):
            return
        try:
            page = request.frame.url
        except Exception:  # a worker's request has no frame
            page = "?"
        off_site.append(f"{page} -> {request.url}")

    context.on("request", record)
    return context, off_site


@pytest.fixture
def context(browser, site):
    """A desktop-sized context that fails the test if any request leaves the site."""
    context, off_site = _open_context(browser, site, VIEWPORTS["desktop"])
    yield context
    context.close()
    assert not off_site, "requests that left the site:\n" + "\n".join(off_site)


# --- Every page, once per width, in both colour schemes: all that a look at the page can check ---

# The schemes, in the order each page is seen, with the axe-core rules run in each: all of them
# in the first (None); in the other, the document is the same, so only the rules that read
# colours can find anything new, and those on what only that scheme shows.
# axe skips what is hidden, so the rules on the dark scheme's own elements (the dark drawing of
# each chart, an <object>) run there too.
SCHEMES = {"light": None,
           "dark": ["color-contrast", "link-in-text-block", "object-alt", "role-img-alt"]}
# axe-core runs at desktop width only. What it checks (names, roles, landmarks, colours and their
# contrast) is the same document at every width on this site: the width rules of Material and of
# extra.css move, hide and resize things, and none of extra.css's sets a colour
# (test_no_colour_rule_depends_on_the_width). What the width does change is checked at both
# widths without axe: the page's and each code block's sideways scrolling, code size, charts and
# diagrams (the phone's own drawings), and that a region that scrolls sideways takes the keyboard
# (axe's scrollable-region-focusable, as PAGE_FACTS measures it). An axe run costs 1-2.5 s of
# Chromium's time per page and scheme, most of it axe reading the page (a run of two rules costs
# about as much as all of them): it was two thirds of the browser test's time, which was the
# longest part of `make test` (2026-11-28: 468 s and 430 s for the two widths).
AXE_WIDTHS = ("desktop",)
MATERIAL_SCHEMES = {"light": "default", "dark": "slate"}   # the reader's scheme -> Material's
# Material fades colours over 250 ms as the scheme changes: none while colours are measured.
NO_TRANSITIONS = "*, *::before, *::after { transition: none !important; }"
AXE = Path(__file__).with_name("axe.min.js")  # axe-core, vendored (`make axe`): no network in CI
AXE_URL = "/__tests__/axe.min.js"              # where the test server serves it: no page of the site
AXE_IMPACTS = ("serious", "critical")          # what fails the test; "moderate" and "minor" don't

# What a page looks like once loaded, measured in the page. Code blocks may scroll sideways on
# their own (`pre > code` has overflow: auto), but at desktop width none needs to: snippets are
# written to the column's width (tests/site/test_snippets.py), and `scrolling` names any block
# wider than its box. The page itself must never be wider than the window.
PAGE_FACTS = """() => {
    const root = document.documentElement;
    const codes = [...document.querySelectorAll('.md-typeset pre > code')];
    const sizes = codes.map(c => parseFloat(getComputedStyle(c).fontSize));
    const wide = [...document.querySelectorAll('.md-content *')]
        .filter(e => e.getBoundingClientRect().right > root.clientWidth + 1)
        .filter(e => !e.closest('pre, .md-typeset__scrollwrap, .mermaid, .tabbed-labels'))
        .slice(0, 3)
        .map(e => `<${e.tagName.toLowerCase()} class="${e.className}">`);
    const shown = c => c.getClientRects().length > 0;  // a closed <details> or tab hides some
    return {
        overflow: root.scrollWidth - root.clientWidth,
        wide: wide,
        codeBlocks: codes.length,
        smallestCode: sizes.length ? Math.min(...sizes) : null,
        scrolling: codes.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => ({
            shown: shown(c), by: c.scrollWidth - c.clientWidth,
            line: c.textContent.split('\\n').reduce((a, b) => b.length > a.length ? b : a, '')})),
        diagrams: [...document.querySelectorAll('.mermaid')].map(
            d => ({tag: d.tagName, height: d.getBoundingClientRect().height})),
        mermaidLoaded: typeof mermaid !== 'undefined',
        // a region that scrolls sideways, reached by neither Tab nor anything inside it
        unreachable: [...document.querySelectorAll('.md-content *')]
            .filter(e => e.scrollWidth > e.clientWidth + 1 && e.getClientRects().length > 0)
            .filter(e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
            .filter(e => e.tabIndex < 0 && !e.querySelector(
                'a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"])'))
            .slice(0, 3).map(e => `<${e.tagName.toLowerCase()} class="${e.className}">`),
    };
}"""

# "Predict, then run" prompts (fieldguide/content/prompts.py): opened from the keyboard as a reader would
# (focus the question, press Enter), then all of them, before axe runs, so that it checks the
# answers too, in both schemes.
PROMPT = f"details.{prompts.KIND}"
FOCUS_FIRST_PROMPT = f"""() => {{
    const summary = document.querySelector('{PROMPT} > summary');
    if (!summary) return false;
    summary.focus();
    return document.activeElement === summary;
}}"""
OPEN_PROMPTS = f"""() => {{
    const first = document.querySelector('{PROMPT}').open;
    document.querySelectorAll('{PROMPT}').forEach(d => d.open = true);
    return first;
}}"""

# Closed <details> and hidden tabs lay out nothing, so a block inside one measures 0 wide; opening
# every one of them lets the code inside be measured.
OPEN_ALL = """() => {
    document.querySelectorAll('details').forEach(d => d.open = true);
}"""

# axe-core's rules (WCAG 2.x A and AA, and its best practices) over the whole page.
AXE_RUN = """async ([impacts, rules]) => {
    const result = await axe.run(document, rules
        ? {resultTypes: ['violations'], runOnly: {type: 'rule', values: rules}}
        : {resultTypes: ['violations']});
    return result.violations.filter(v => impacts.includes(v.impact)).map(v => ({
        id: v.id, impact: v.impact, help: v.help, count: v.nodes.length,
        nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ': ' +
                                       (n.failureSummary || '').split('\\n').slice(1, 2).join(''))
    }));
}"""

# True in the next frame, after every requestAnimationFrame callback queued before it; false if
# none comes within the time given (page.evaluate has no time limit of its own).
NEXT_FRAME = """timeoutMs => new Promise(resolve => {
    requestAnimationFrame(() => resolve(true));
    setTimeout(() => resolve(false), timeoutMs);
})"""

# Material replaces each <pre class="mermaid"> by a <div class="mermaid"> holding the drawing.
DRAWN = """n => [...document.querySelectorAll('div.mermaid')]
    .filter(d => d.getBoundingClientRect().height > 20).length >= n"""

# The smallest text in a chart, in CSS pixels as displayed: below this it is hard to read.
MIN_CHART_TEXT_PX = {"desktop": 11, "phone": 9}
# The drawn ideas (fieldguide/rendering/diagrams.py): at 12 px or more on a phone too, in their narrow
# drawing, which fits the column (issue 45: they showed at 9.3-10.1 px at 390 px, then in a frame
# that scrolled sideways).
MIN_DIAGRAM_TEXT_PX = {"desktop": 11, "phone": 12}
SCIENTIFIC = re.compile(r"\d[eE][+-]?\d|×\s*10|10\^|\$\\mathdefault")

# Each chart is an <object> per theme and width (fieldguide/rendering/figures.py); the one shown is measured.
CHART_FACTS = """() => [...document.querySelectorAll('figure.timing-chart object')]
    .filter(o => o.getBoundingClientRect().width > 0)      // the other theme's is hidden
    .map(o => ({src: o.data, loaded: o.contentDocument?.documentElement?.tagName === 'svg',
                width: o.getBoundingClientRect().width,
                narrow: o.classList.contains('timing-narrow'),
                anyWidth: o.classList.contains('timing-any-width'),
                diagram: !!o.closest('figure.fieldguide-diagram'),
                // how far the figure's content sticks out of it sideways (0: it fits)
                overflow: o.closest('figure').scrollWidth - o.closest('figure').clientWidth,
                // a drawing whose colour scheme differs from its frame's sits on opaque white
                schemes: [getComputedStyle(o).colorScheme, o.contentDocument &&
                          getComputedStyle(o.contentDocument.documentElement).colorScheme],
                theme: o.classList.contains('only-dark') ? 'dark' : 'light',
                room: o.closest('figure').parentElement.getBoundingClientRect().width}))"""

# An <object>'s drawing can still be unparsed after the page's load event (Chromium loads an
# <object> once it is laid out, and only the shown theme's and width's are): on a busy machine
# (CI runs the browser test beside other tests) a chart was empty when measured.
CHARTS_LOADED = """() => [...document.querySelectorAll('figure.timing-chart object')]
    .filter(o => o.getBoundingClientRect().width > 0)
    .every(o => o.contentDocument?.documentElement?.tagName === 'svg')"""

# What a chart's drawing shows, measured in it as displayed: no text over other text or over the
# data (a line, a marker, a point), the outline of a turned label turned with it; at least three
# labelled ticks on every numeric axis; a <title> on every point of a series.
SVG_GEOMETRY = r"""doc => {
  // A text's outline as drawn: its box in its own coordinates, turned as it is turned on screen.
  const quad = el => {
    const b = el.getBBox(), m = el.getScreenCTM();
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => new DOMPoint(x, y).matrixTransform(m)).map(p => [p.x, p.y]);
  };
  const shrink = (q, by) => {  // pull the corners in by `by` px, so touching is not overlapping
    const cx = q.reduce((s, p) => s + p[0], 0) / 4, cy = q.reduce((s, p) => s + p[1], 0) / 4;
    return q.map(([x, y]) => {
      const d = Math.hypot(x - cx, y - cy) || 1;
      return [x - (x - cx) * by / d, y - (y - cy) * by / d];
    });
  };
  const axesOf = q => q.map((p, i) => { const n = q[(i + 1) % 4]; return [n[1] - p[1], p[0] - n[0]]; });
  const apart = (a, b) => [...axesOf(a), ...axesOf(b)].some(([ax, ay]) => {
    const pa = a.map(([x, y]) => x * ax + y * ay), pb = b.map(([x, y]) => x * ax + y * ay);
    return Math.max(...pa) <= Math.min(...pb) || Math.max(...pb) <= Math.min(...pa);
  });
  const inside = (q, [x, y]) => !apart(q, [[x, y], [x + 0.01, y], [x + 0.01, y + 0.01], [x, y + 0.01]]);
  const name = t => t.textContent.trim().replace(/\s+/g, ' ').slice(0, 40);
  const texts = [...doc.querySelectorAll('text')].filter(t => t.textContent.trim())
      .map(t => ({t, q: shrink(quad(t), 1)}));
  const problems = [];
  for (let i = 0; i < texts.length; i++)
    for (let j = i + 1; j < texts.length; j++)  // the lines of one wrapped text share a group
      if (texts[i].t.parentNode !== texts[j].t.parentNode && !apart(texts[i].q, texts[j].q))
        problems.push(`text "${name(texts[i].t)}" over text "${name(texts[j].t)}"`);
  // the data: lines and markers drawn in an axes (not its grid, ticks or legend)
  const lines = [...doc.querySelectorAll(
      'g[id^="axes_"] > g[id^="line2d_"], g[id^="axes_"] > g[id^="series-"]')];
  const scatters = [...doc.querySelectorAll('g[id^="axes_"] > g[id^="PathCollection_"]')];
  const over = new Set();
  for (const line of lines) {
    for (const path of line.querySelectorAll('path')) {
      const total = path.getTotalLength(), ctm = path.getScreenCTM();
      for (let at = 0; at <= total; at += 2) {
        const p = path.getPointAtLength(at).matrixTransform(ctm);
        for (const {t, q} of texts) if (inside(q, [p.x, p.y])) over.add(`text "${name(t)}" over a line`);
      }
    }
    for (const mark of line.querySelectorAll('use'))
      for (const {t, q} of texts)
        if (!apart(shrink(quad(mark), 0.5), q)) over.add(`text "${name(t)}" over a marker`);
  }
  for (const mark of scatters.flatMap(s => [...s.querySelectorAll('use')]))
    for (const {t, q} of texts)
      if (!apart(shrink(quad(mark), 0.5), q)) over.add(`text "${name(t)}" over a point`);
  problems.push(...over);
  const NUMBER = /^[\d.,×⁰¹²³⁴⁵⁶⁷⁸⁹⁻ ]+\s?[A-Za-zµ/%]*$/;
  for (const axis of doc.querySelectorAll('g[id^="matplotlib.axis_"]')) {
    const labels = [...axis.querySelectorAll('g[id^="xtick_"] text, g[id^="ytick_"] text')]
        .map(t => t.textContent.trim()).filter(Boolean);
    if (labels.length && labels.every(l => NUMBER.test(l)) && labels.length < 3)
      problems.push(`an axis with ${labels.length} labelled ticks (${labels.join(', ')})`);
  }
  // every point of a chart's series tells its value on hover (fieldguide.rendering.charts.point_titles)
  const marks = [...doc.querySelectorAll('g[id^="series-"] use')];
  const untitled = marks.filter(m => !m.querySelector('title')).length;
  if (untitled) problems.push(`${untitled} of ${marks.length} points without a <title>`);
  return problems;
}"""

def _svg_text_facts(svg: str) -> tuple[float, float, list[str]]:
    """(drawing width in CSS px, smallest font size in its own units, the texts)."""
    width_pt = float(re.search(r'<svg[^>]*\swidth="([\d.]+)pt"', svg)[1])
    view_width = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) [\d.]+"', svg)[1])
    sizes = [float(s) for s in re.findall(r"font-size:\s*([\d.]+)px", svg)]
    texts = [re.sub(r"<[^>]+>", "", t) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)]
    # One unit of the drawing is width_pt * 4/3 / view_width CSS px at its natural size.
    return width_pt * 4 / 3, min(sizes) * (width_pt * 4 / 3) / view_width, texts


def _check_page(built: BuiltPage, facts: dict, width: str) -> list[str]:
    found = []
    if facts["overflow"] > 0:
        found.append(f"the page is {facts['overflow']} px wider than the window; "
                     f"sticking out: {facts['wide']}")
    if facts["codeBlocks"] and facts["smallestCode"] < MIN_CODE_PX:
        found.append(f"code at {facts['smallestCode']} px (at least {MIN_CODE_PX} px)")
    if facts["unreachable"]:
        found.append(f"a region scrolls sideways but takes no keyboard focus: "
                     f"{facts['unreachable']}")
    if width == "desktop":
        for block in facts["scrolling"]:
            found.append(f"a code block scrolls sideways by {block['by']} px; its longest line "
                         f"({len(block['line'])} columns): {block['line'].strip()[:100]!r}")
    if built.diagrams:
        drawn = [d for d in facts["diagrams"] if d["tag"] == "DIV" and d["height"] > 20]
        if len(drawn) != built.diagrams:
            found.append(f"{built.diagrams} Mermaid diagrams in the HTML, {len(drawn)} drawn "
                         f"({facts['diagrams']}; Mermaid loaded: {facts['mermaidLoaded']})")
    return found


def _check_charts(page, charts: list[dict], width: str, scheme: str, svgs: dict[str, str]
                  ) -> list[str]:
    """Every chart shown: loaded, no wider than its column, the drawing for this width and scheme,
    its smallest text legible, no scientific notation; in the light scheme (the dark drawing is
    the same drawing in other colours) its geometry (SVG_GEOMETRY)."""
    import urllib.request

    found = []
    for chart in charts:
        where = chart["src"].rsplit("/", 1)[-1]
        if not chart["loaded"]:
            found.append(f"{where}: not loaded")
            continue
        if chart["width"] > chart["room"] + 1:
            found.append(f"{where}: {chart['width']:.0f} px wide in {chart['room']:.0f} px")
        if chart["diagram"]:  # issue 45: a drawn idea fits its column, at a phone's width too
            if chart["overflow"] > 1:
                found.append(f"{where}: its figure's content {chart['overflow']} px wider than it")
            if chart["anyWidth"]:
                found.append(f"{where}: a drawn idea without its narrow drawing")
        narrow = chart["narrow"]
        if narrow != (width == "phone") and not chart["anyWidth"]:  # some are drawn once
            found.append(f"{where}: the {'phone' if narrow else 'desktop'} drawing shown at "
                         f"{width} width")
        if chart["theme"] != scheme:
            found.append(f"{where}: the {chart['theme']} drawing shown in the {scheme} scheme")
        if chart["schemes"] != [scheme, scheme]:
            found.append(f"{where}: frame and drawing declare colour schemes {chart['schemes']}, "
                         f"not {scheme}: the browser puts an opaque backdrop under it")
        if chart["src"] not in svgs:
            svgs[chart["src"]] = urllib.request.urlopen(chart["src"], timeout=10).read().decode()
        natural_px, smallest, texts = _svg_text_facts(svgs[chart["src"]])
        shown = smallest * chart["width"] / natural_px
        least = (MIN_DIAGRAM_TEXT_PX if chart.get("diagram") else MIN_CHART_TEXT_PX)[width]
        if shown < least:
            found.append(f"{where}: text as small as {shown:.1f} px (at least {least} px)")
        odd = [t for t in texts if SCIENTIFIC.search(t)]
        if odd:
            found.append(f"{where}: scientific notation in {odd[:3]}")
        if scheme == "light":
            found += [f"{where}: {problem}" for problem in page.evaluate(
                "src => (" + SVG_GEOMETRY + ")([...document.querySelectorAll("
                "'figure.timing-chart object')].find(o => o.data === src).contentDocument)",
                chart["src"])]
    return found


# Each width's pages in this many tests (every SHARDS-th page from the shard's index): pytest-xdist
# hands them to whichever worker is free, where one test of all the pages kept a worker busy for
# seven minutes while the other ran everything else.
SHARDS = 3


@pytest.mark.browser
@pytest.mark.parametrize("shard", range(SHARDS))
@pytest.mark.parametrize("width", list(VIEWPORTS))
def test_every_page(browser, site, width, shard):
    """Each page of the shard loaded once at this width and seen in both colour schemes in that
    one visit (light as loaded, then dark through Material's palette toggle, as a reader
    switches; at phone width dark only where the page has a chart or drawing): no console
    error, no request off the site, no sideways scrolling of the page or (at desktop width) of
    any code block, no sideways-scrolling region the keyboard cannot reach, readable code,
    diagrams drawn, charts drawn to fit in each scheme, "predict, then run" prompts that open
    from the keyboard, and at desktop width no serious or critical axe-core violation, the
    prompts' answers opened (every rule in light; in dark, the rules that depend on colour,
    since the document is the same; AXE_WIDTHS says why not at phone width)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    pages = site.pages[shard::SHARDS]
    if not pages:
        pytest.skip(f"FIELDGUIDE_BROWSER_PAGES leaves shard {shard} no page")
    context, off_site = _open_context(browser, site, VIEWPORTS[width], "light")
    # Every page starts in light: the toggle's choice (Material keeps it in localStorage) is
    # forgotten before the page's own scripts read it.
    context.add_init_script("""if (window === window.top) Object.keys(localStorage)
        .filter(key => key.endsWith('__palette')).forEach(key => localStorage.removeItem(key))""")
    # No transitions from the first style on: axe and the charts' checks read colours as they
    # end, not halfway through a fade (Material fades the header's title in as a page loads).
    context.add_init_script(f"""if (window === window.top) {{
        const sheet = new CSSStyleSheet();
        sheet.replaceSync({json.dumps(NO_TRANSITIONS)});
        document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
    }}""")
    problems: dict[str, list[str]] = {}
    svgs: dict[str, str] = {}
    charts_seen = {scheme: 0 for scheme in SCHEMES}
    prompts_seen = 0
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda msg: msg.type == "error" and errors.append(
            f"console error: {msg.text} (at {msg.location.get('url') or '?'})"))
        page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
        for built in pages:
            found = problems.setdefault(built.url, [])
            # "load", not "networkidle": the latter idles 500 ms on every page (a third of the
            # test's time); what loads later is waited for below (diagrams, charts), and a late
            # console error is still caught, under the next page's name at worst.
            response = page.goto(built.url, wait_until="load")
            if response is None or not response.ok:
                found.append(f"HTTP {response.status if response else 'no response'}")
            if built.diagrams:  # Material draws them after the page has loaded
                try:
                    page.wait_for_function(DRAWN, arg=built.diagrams, timeout=TIMEOUT_MS)
                except PlaywrightTimeout:
                    pass  # _check_page says what was drawn
            if width in AXE_WIDTHS:
                page.add_script_tag(url=AXE_URL)
            if built.prompts:
                found += _open_prompts(page)
                prompts_seen += built.prompts
            # The site's accessibility.js marks what scrolls in the frame after a change to the
            # page: the next frame has it marked (axe ran before it once, on a busy machine).
            if not page.evaluate(NEXT_FRAME, TIMEOUT_MS):
                found.append(f"no frame drawn within {TIMEOUT_MS} ms")
            # At phone width the dark scheme changes only the drawings: seen where there are some.
            schemes = (SCHEMES if width in AXE_WIDTHS or built.charts
                       else {"light": SCHEMES["light"]})
            for scheme, axe_rules in schemes.items():
                if scheme != "light":
                    # A pointer click on the first page (Playwright waits until the toggle is
                    # visible, steady and not covered: the header is one template, the same on
                    # every page); on the rest the toggle's click(), a synthetic click without
                    # hit-testing, which changes its radio input as the pointer does (0.13 s a
                    # page faster).
                    found += _switch_scheme(page, scheme, pointer=built is pages[0])
                try:  # an <object> loads once it is shown: the dark drawings only now
                    page.wait_for_function(CHARTS_LOADED, timeout=TIMEOUT_MS)
                except PlaywrightTimeout:
                    pass  # _check_charts names each chart not loaded by then
                charts = page.evaluate(CHART_FACTS)
                charts_seen[scheme] += len(charts)
                found += [f"{scheme}: {problem}"
                          for problem in _check_charts(page, charts, width, scheme, svgs)]
                if width in AXE_WIDTHS:
                    found += [f"{scheme}: axe {v['impact']} {v['id']} ({v['help']}) x{v['count']}: "
                              + " | ".join(v["nodes"])
                              for v in page.evaluate(AXE_RUN, [list(AXE_IMPACTS), axe_rules])]
            page.evaluate(OPEN_ALL)
            found += _check_page(built, page.evaluate(PAGE_FACTS), width)
            found += errors
            errors.clear()
        page.close()
    finally:
        context.close()
    for request in off_site:
        problems.setdefault(request.split(" -> ")[0], []).append(f"request off the site: {request}")
    report = [f"{url}\n    " + "\n    ".join(msgs) for url, msgs in problems.items() if msgs]
    if report:
        pytest.fail(f"at {width} width ({VIEWPORTS[width]['width']} px):\n"
                    + "\n".join(report), pytrace=False)
    if any(built.charts for built in pages):
        assert all(charts_seen.values()), \
            f"charts found per scheme: {charts_seen}: the test would check nothing"
    if not os.environ.get("FIELDGUIDE_BROWSER_PAGES"):  # the whole site has charts and prompts
        assert any(built.charts for built in site.pages), "no chart found in the built HTML"
        assert any(built.prompts for built in site.pages), "no prompt found in the built HTML"
        assert prompts_seen == sum(built.prompts for built in pages)


@pytest.mark.browser
def test_a_reader_who_prefers_dark_gets_the_dark_scheme(browser, site):
    """test_every_page reaches dark through the toggle; a reader whose system prefers dark gets
    it on the first load (the palette's media queries in mkdocs.yml)."""
    context, off_site = _open_context(browser, site, VIEWPORTS["phone"], "dark")
    try:
        page = context.new_page()
        page.goto(site.home.url, wait_until="load")
        assert page.evaluate("document.body.dataset.mdColorScheme") == MATERIAL_SCHEMES["dark"]
    finally:
        context.close()
    assert not off_site, off_site


@pytest.mark.browser
def test_a_request_off_the_site_is_recorded_and_goes_nowhere(browser, site):
    """What keeps every other browser test honest about "no request off the site": a page's
    request to another host is recorded under the page's address, and never answered, even
    where that host is up (the test server under another name); the site's own requests, and
    what a page makes itself (a blob: URL), are not recorded."""
    elsewhere = site.url.replace("127.0.0.1", "localhost") + "/index.html"
    context, off_site = _open_context(browser, site, VIEWPORTS["desktop"])
    try:
        page = context.new_page()
        page.goto(site.home.url, wait_until="load")
        failures = []
        page.on("requestfailed", lambda request: failures.append((request.url, request.failure)))
        outcome = page.evaluate("""async (url) => {
            await fetch(URL.createObjectURL(new Blob(['made here'])));
            try { await fetch(url, {mode: 'no-cors'}); }
            catch (error) { return 'failed: ' + error.name; }
            return 'answered';
        }""", elsewhere)
    finally:
        context.close()
    assert outcome == "failed: TypeError", outcome
    assert (elsewhere, "net::ERR_NAME_NOT_RESOLVED") in failures, failures  # the resolver rule
    assert off_site == [f"{site.home.url} -> {elsewhere}"], off_site


def _open_prompts(page) -> list[str]:
    """Open the first prompt from the keyboard, then every prompt; what went wrong, if any."""
    if not page.evaluate(FOCUS_FIRST_PROMPT):
        return ["a prompt's question (its <summary>) takes no focus"]
    page.keyboard.press("Enter")
    if not page.evaluate(OPEN_PROMPTS):
        return ["Enter on a prompt's focused question did not open it"]
    return []


PALETTE_TOGGLE = "form[data-md-component=palette] label:not([hidden])"
# The toggle's click() from inside the page, then the page's scheme awaited frame by frame.
CLICK_TOGGLE = """async ([toggle, wanted, timeoutMs]) => {
    document.querySelector(toggle).click();
    const until = performance.now() + timeoutMs;
    while (document.body.dataset.mdColorScheme !== wanted) {
        if (performance.now() > until) return `still ${document.body.dataset.mdColorScheme}`;
        await new Promise(resolve => requestAnimationFrame(resolve));
    }
    return null;
}"""


def _switch_scheme(page, scheme: str, pointer: bool = True) -> list[str]:
    """Click Material's palette toggle until the page shows `scheme`: with Playwright's pointer
    (`pointer`), or with the toggle's click() in the page; what went wrong, if any. The page's
    context has transitions off (test_every_page), so the colours are final once it shows."""
    wanted = MATERIAL_SCHEMES[scheme]
    from playwright.sync_api import Error as PlaywrightError

    failed = f"the palette toggle did not switch the page to {scheme} ({wanted})"
    try:
        if not pointer:
            still = page.evaluate(CLICK_TOGGLE, [PALETTE_TOGGLE, wanted, TIMEOUT_MS])
            return [f"{failed}: {still}"] if still else []
        page.locator(PALETTE_TOGGLE).click()
        page.wait_for_function(f"() => document.body.dataset.mdColorScheme === '{wanted}'",
                               timeout=TIMEOUT_MS)
    except PlaywrightError as exc:   # a timeout is one; so is a toggle not found
        return [f"{failed}: {str(exc).splitlines()[0]}"]
    return []


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


# API names readers type: dotted, CamelCase, snake_case. The search separator (mkdocs.yml) cuts
# them into words, so each finds the pages that use it.
API_QUERIES = ["autocast", "CUDAGraph", "get_device_properties", "torch.cuda.synchronize"]
CONTRIBUTOR_PATHS = ("/contributing/", "/reference/")

SEARCH_RESULTS = """() => [...document.querySelectorAll(
    '.md-search-result__item a.md-search-result__link')].map(a => a.origin + a.pathname)"""


def _search(page, site: Site, query: str) -> list[str]:
    """Type `query` into the site's search box on the home page; the result pages, in order."""
    page.goto(site.home.url, wait_until="load")
    box = page.locator("input.md-search__input")
    if not box.is_visible():  # narrow layouts hide the box behind the header's search button
        page.locator('label.md-header__button[for="__search"]').click()
    box.click()
    box.press_sequentially(query)  # Material searches on key events, not on programmatic input
    shown, waited = [], 0
    while waited < TIMEOUT_MS:  # results arrive from a worker, query prefix by prefix
        page.wait_for_timeout(300)
        waited += 300
        now = page.evaluate(SEARCH_RESULTS)
        if now and now == shown:
            break
        shown = now
    return list(dict.fromkeys(shown))


@pytest.mark.browser
@pytest.mark.parametrize("query", API_QUERIES)
def test_search_finds_api_names(context, site, query):
    users = {p.url for p in site.pages if query in p.text}
    assert users, f"no page shows {query!r} any more: pick another API name to search for"
    results = _search(context.new_page(), site, query)
    assert results, f"searching {query!r} found nothing; pages that show it: {sorted(users)}"
    assert results[0] in users, (
        f"searching {query!r}: the first result {results[0]} does not show it; pages that do: "
        f"{sorted(users)}; results: {results}"
    )
    contributor = [url for url in results if url.endswith(CONTRIBUTOR_PATHS)]
    assert not contributor, f"contributor pages in a reader's search for {query!r}: {contributor}"


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
        f"{where} matches no section of any module in snippets/ (fieldguide.content.snippets.sections); "
        f"copied:\n{copied}"
    )


# --- The home page's ways in: each reader's problem reaches its answer within two clicks --------

# problem (how its list item on the home page starts) -> the answer page, then the pages that
# answer page must lead to in one more click. tests/site/test_course_map.py checks the Markdown.
JOURNEYS = {
    "My training is slow": ("start-here/slow-training/",
                            ["data-movement/data-loading/", "precision/mixed-precision-training/"]),
    "I need several GPUs next week": ("several-gpus/ddp-with-torchrun/", []),
    "Out of memory": ("memory/out-of-memory-errors/", []),
    "New to GPUs": ("foundations/cpu-vs-gpu/", []),
}


def _click_to(page, links, site: Site, path: str, clicks: list[str]) -> None:
    """Click the first of `links` that leads to `path` and check the page that loads."""
    target = f"{site.url}/{path}"
    hrefs = links.evaluate_all("els => els.map(a => a.href.split('#')[0])")
    shown = sorted({h for h in hrefs if h.startswith(site.url)})
    assert target in hrefs, f"after {clicks or ['the home page']}: no link to {path} in {shown}"
    with page.expect_navigation(wait_until="load"):
        links.nth(hrefs.index(target)).click()
    clicks.append(path)
    assert page.url.split("#")[0] == target, f"clicking towards {path} landed on {page.url}"
    assert page.locator("article h1").count() == 1, f"{path}: no page title after {clicks}"


@pytest.mark.browser
@pytest.mark.parametrize("problem", list(JOURNEYS))
def test_each_journey_reaches_its_answer_within_two_clicks(context, site, problem):
    answer, next_pages = JOURNEYS[problem]
    page = context.new_page()
    page.goto(f"{site.url}/", wait_until="load")  # the home page, whatever pages are selected
    item = page.locator("article li").filter(has_text=f"{problem}.").first
    assert item.count(), f"the home page has no list item for {problem!r}"
    # The item's first link is the way in: the problem's answer, one click from home.
    clicks: list[str] = []
    _click_to(page, item.locator("a").first, site, answer, clicks)
    for following in next_pages:  # the second click: from the answer page to each fix
        _click_to(page, page.locator("article a[href]"), site, following, clicks)
        assert len(clicks) == 2, clicks
        with page.expect_navigation(wait_until="load"):
            page.go_back()
        clicks.pop()


# --- What lets axe-core run at one width ----------------------------------------------------------

WIDTH_MEDIA = re.compile(r"@media[^{]*\b(?:min|max)-width[^{]*\{")
COLOUR_PROPERTY = re.compile(
    r"(?:^|[;{\s])(color|background(?:-color|-image)?|fill|stroke|opacity|filter"
    r"|(?:border|outline|text-decoration)(?:-\w+)?-color|--[\w-]*colou?r[\w-]*)\s*:", re.I)


def _blocks(css: str, pattern: re.Pattern) -> list[str]:
    """The bodies of the at-rules `pattern` opens, braces matched."""
    found = []
    for match in pattern.finditer(css):
        depth, at = 1, match.end()
        while depth and at < len(css):
            depth += {"{": 1, "}": -1}.get(css[at], 0)
            at += 1
        found.append(css[match.end():at - 1])
    return found


def test_no_colour_rule_depends_on_the_width():
    """AXE_WIDTHS: the site's own stylesheets set no colour inside a width's media query, so
    the colours axe checks at desktop width are those a phone shows."""
    sheets = sorted((ROOT / "docs").rglob("*.css"))
    assert sheets, "no stylesheet under docs/"
    found = [f"{sheet.relative_to(ROOT)}: {prop.group(1)} in {block.strip()[:80]!r}"
             for sheet in sheets
             for block in _blocks(sheet.read_text(encoding="utf-8"), WIDTH_MEDIA)
             for prop in COLOUR_PROPERTY.finditer(block)]
    assert not found, ("a colour set for one width only: axe-core checks colours at desktop "
                       "width alone (AXE_WIDTHS); add the width to it, or set the colour for all "
                       "widths:\n" + "\n".join(found))


def test_the_colour_check_finds_a_colour_set_for_one_width():
    css = "a { color: red } @media screen and (max-width: 600px) { .x { display: none } " \
          ".y { background-color: #000 } }"
    bodies = _blocks(css, WIDTH_MEDIA)
    assert len(bodies) == 1 and "display: none" in bodies[0]
    assert [m.group(1) for m in COLOUR_PROPERTY.finditer(bodies[0])] == ["background-color"]
