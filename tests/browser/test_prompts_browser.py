""""Predict, then run" prompts (fieldguide/prompts.py) in headless Chromium: every prompt opens
from the keyboard, and, opened, passes axe-core in the light and the dark scheme.

The whole-site test (test_site_browser.py) runs axe with every <details> closed, so it never sees
a prompt's answer: here each page with prompts is loaded once, its prompts opened, and axe runs
on them alone, once per scheme (Material's palette switch sets `data-md-color-scheme` on <body>,
which is all the scheme is to the site's CSS; colour transitions are switched off so axe reads
the final colours).
"""

from __future__ import annotations

import pytest

from fieldguide import prompts
from tests.browser.test_site_browser import (  # noqa: F401 (fixtures, used by name)
    AXE,
    AXE_IMPACTS,
    MATERIAL_SCHEMES,
    NO_TRANSITIONS,
    VIEWPORTS,
    _open_context,
    browser,
    chromium_path,
    site,
)

SELECTOR = f"details.{prompts.KIND}"
AXE_ON_PROMPTS = """async ([selector, impacts]) => {
    const result = await axe.run(document.querySelectorAll(selector), {resultTypes: ['violations']});
    return result.violations.filter(v => impacts.includes(v.impact)).map(v =>
        `${v.id} (${v.help}) x${v.nodes.length}: ` + v.nodes.slice(0, 2).map(n =>
            n.target.join(' ') + ' ' + (n.failureSummary || '').split('\\n').slice(1, 2).join('')
        ).join(' | '));
}"""
# Opens the first prompt as a keyboard user would: focus its <summary>, press Enter.
KEYBOARD = f"""() => {{
    const summary = document.querySelector('{SELECTOR} > summary');
    summary.focus();
    return document.activeElement === summary;
}}"""


@pytest.mark.browser
def test_prompts_open_from_the_keyboard_and_pass_axe_in_both_schemes(browser, site):  # noqa: F811
    context, off_site = _open_context(browser, site, VIEWPORTS["desktop"])
    axe = AXE.read_text(encoding="utf-8")
    problems, checked = [], 0
    try:
        page = context.new_page()
        for built in site.pages:
            html = site.dir / built.url[len(site.url):].strip("/") / "index.html"
            if f'<details class="{prompts.KIND}">' not in html.read_text(encoding="utf-8"):
                continue   # only the pages with prompts are loaded
            page.goto(built.url, wait_until="load")
            count = page.locator(SELECTOR).count()
            checked += count
            assert page.evaluate(KEYBOARD), f"{built.url}: a prompt's summary takes no focus"
            page.keyboard.press("Enter")
            if not page.evaluate(f"() => document.querySelector('{SELECTOR}').open"):
                problems.append(f"{built.url}: Enter on the focused question did not open it")
            page.evaluate(f"() => document.querySelectorAll('{SELECTOR}').forEach(d => d.open = true)")
            page.add_script_tag(content=axe)
            # Material fades colours over 250 ms when the scheme changes: no fading under test
            page.add_style_tag(content=NO_TRANSITIONS)
            for reader, scheme in MATERIAL_SCHEMES.items():
                page.evaluate(f"() => document.body.setAttribute('data-md-color-scheme', '{scheme}')")
                problems += [f"{built.url} ({reader}): axe {v}"
                             for v in page.evaluate(AXE_ON_PROMPTS, [SELECTOR, list(AXE_IMPACTS)])]
        page.close()
    finally:
        context.close()
    assert not off_site, "requests that left the site:\n" + "\n".join(off_site)
    assert not problems, "\n".join(problems)
    assert checked, "no prompt found on any page: the test would check nothing"
