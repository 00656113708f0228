"""The calculators (fieldguide/rendering/calculators.py) in headless Chromium: each answers as soon as it is
loaded, is used from the keyboard alone (Tab to a field, type, the answer follows; Enter does
not leave the page), and gives the number the Python estimator gives for the same inputs.
axe-core, both colour schemes and phone width are test_every_page's, which visits these
pages with the rest. Run it with the site's other browser tests (`make test`); while working:
`FIELDGUIDE_BROWSER_PAGES=start-here/will-it-fit`.
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("markdown")  # fieldguide.rendering.calculators is a Markdown extension: docs toolchain

from fieldguide.rendering import calculators
from snippets.start_here import will_it_fit as est
from tests.browser.test_site_browser import (  # noqa: F401 (fixtures)
    VIEWPORTS,
    _open_context,
    browser,
    chromium_path,
    site,
)

PAGE = "/start-here/will-it-fit/"


def _three(x: float) -> str:
    """Intl.NumberFormat("en", {maximumSignificantDigits: 3}), as the driver formats."""
    if abs(x) >= 1000:
        return f"{round(x, 2 - math.floor(math.log10(abs(x)))):,.0f}"
    return f"{x:.3g}"


def _words(value: float, unit: str) -> str:
    """What the driver shows: three significant figures, in the unit the value reads in."""
    scales = {"bytes": [("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)],
              "seconds": [("s", 1), ("ms", 1e-3), ("µs", 1e-6)]}[unit]
    for name, size in scales:
        if abs(value) >= size:
            return f"{_three(value / size)} {name}"
    raise ValueError(value)


@pytest.mark.browser
@pytest.mark.parametrize("width", list(VIEWPORTS))
def test_the_calculators_answer_from_the_keyboard(browser, site, width):  # noqa: F811
    context, off_site = _open_context(browser, site, VIEWPORTS[width])
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(site.url + PAGE, wait_until="load")
        for name in calculators.CALCULATORS:
            first = page.locator(f"#calc-{name} output").first
            assert first.inner_text() not in ("", "—"), f"{name}: no answer on load"

        # memory: Tab from the parameters field into the layers field, type, read the total
        page.focus("#calc-memory-parameters")
        page.keyboard.press("Control+A")
        page.keyboard.type("7000")
        page.keyboard.press("Tab")
        focused = page.evaluate("document.activeElement.id")
        assert focused == "calc-memory-layers", f"Tab went to {focused!r}"
        page.keyboard.press("Control+A")
        page.keyboard.type("32")
        page.keyboard.press("Enter")  # a form's Enter must not reload the page
        assert page.url.endswith(PAGE), page.url
        total = page.locator("#calc-memory [data-output='total']").inner_text()
        expected = est.training_memory(7000e6, 32, 16384, 2048, 10, "adam", "autocast")["total"]
        assert total == _words(expected, "bytes"), (total, expected)

        # a choice, from the keyboard: the collective becomes an all-gather
        page.focus("#calc-collective-op")
        page.keyboard.press("ArrowDown")
        shown = page.locator("#calc-collective [data-output='result']").inner_text()
        values = page.evaluate("""() => ['nbytes', 'gpus', 'bus_bandwidth', 'latency'].map(
            p => Number(document.getElementById('calc-collective-' + p).value))""")
        nbytes, gpus, bus, latency = values
        expected = est.collective_seconds(nbytes * 2**20, gpus, bus * 1e9, "all_gather",
                                          latency * 1e-6)
        assert shown == _words(expected, "seconds"), (shown, expected)
        # the measured all-reduces beside the estimate: a line and every point, redrawn
        chart = page.locator("#calc-collective .fg-chart svg")
        points = chart.locator("circle, rect").count()
        expected_points = sum(len(s["points"]) for s in
                              calculators.chart_spec("all_reduce", None)["series"])
        assert chart.get_attribute("role") == "img" and chart.get_attribute("aria-label")
        assert points == expected_points and chart.locator("path").count() == 1
        before = chart.locator("path").get_attribute("d")
        page.focus("#calc-collective-gpus")
        page.keyboard.press("ArrowUp")
        assert chart.locator("path").get_attribute("d") != before
        assert not errors, errors
        assert not off_site, off_site
    finally:
        context.close()
