"""Every number the built site shows follows one rule (fieldguide.measuring.numbers.format_number) and no
table header is a code id (fieldguide.rendering.labels.FIELD_LABELS): read from the HTML of every page.

The rule: whole numbers as whole numbers, a thousands comma from 1,000 up, three significant
figures, a power of ten below 0.001 and never e-notation; a range gives its unit once
("0.0377 GB/s (0.0315–0.0440 over 4 runs)", as a table shows it) and a ratio its sign after the
number and the range ("2,528× (1,902–2,859× over 4 runs)"). Prose shows the median alone, the
range in its hover title.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from fieldguide import ROOT
from fieldguide.measuring.numbers import format_number, format_range, format_spec, format_value
from fieldguide.measuring.timings import TimingError
from fieldguide.rendering import shortcodes
from fieldguide.rendering.labels import FIELD_LABELS, gpu_label

UNITS = r"(?:ns|µs|ms|s|GB/s|TFLOP/s|GFLOP/s|GiB|MiB|KiB|W)"
# What breaks the rule, as it reads in a page's text (code blocks and the per-run table aside).
BROKEN = {
    "e-notation": re.compile(r"\b\d(?:\.\d+)?e[+-]?\d+\b"),
    "a unit inside a range (give it once, after the value)": re.compile(
        rf"\d {UNITS}–\d"),
    "a ratio's × after its range": re.compile(r"over \d+ runs\)×"),
    "no thousands comma": re.compile(rf"(?<![\d.,])\d{{4,}}(?:\.\d+)? ?{UNITS}(?![\w/])"),
    "more than three significant figures": re.compile(r"(?<![\d.])0\.0*[1-9]\d{3,}"),
    "a long run of leading zeros (a power of ten reads better)": re.compile(r"(?<![\d.])0\.0000\d"),
}
CODE_ID = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")


def _article(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    start, end = text.find("<article"), text.find("</article>")
    article = text[start:end]
    # code, and messages quoted as a program printed them, keep the program's own formatting
    article = re.sub(r"<pre.*?</pre>|<code.*?</code>|<blockquote>.*?</blockquote>", " ", article,
                     flags=re.S)
    # the collapsed list of every run shows dates, leases and commits, not measured numbers
    return re.sub(r'<details class="info">.*?</details>', " ", article, flags=re.S)


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


CONTRIBUTOR_PAGES = {"contributing", "reference"}  # the code's own docstrings, shortcode syntax


def _pages(site: Path) -> list[Path]:
    """The pages whose numbers the site writes. Not the notebook pages (notebooks/): they show
    the notebooks as they are, code and the plugin's own styles, and a lesson's measured numbers
    stay on the lesson (a notebook points there instead)."""
    left_out = {"assets", "notebooks", *CONTRIBUTOR_PAGES}
    return sorted(p for p in site.rglob("index.html") if p.relative_to(site).parts[0] not in left_out)


def test_every_number_on_every_page_follows_the_rule(built_site):
    problems = []
    for page in _pages(built_site):
        text = _text(_article(page))
        for what, pattern in BROKEN.items():
            for match in pattern.finditer(text):
                context = text[max(0, match.start() - 40):match.end() + 20].replace("\n", " ")
                problems.append(f"{page.relative_to(built_site)}: {what}: …{context}…")
    assert not problems, f"{len(problems)} numbers break the rule:\n" + "\n".join(problems[:40])


RUNS_IN_PROSE = re.compile(r"over \d+ runs\)|\(host-bound:|runs' own ratios")


def test_prose_prints_the_median_alone(built_site):
    """Issue 45: a number in prose is the median alone; the runs' range is in its hover title
    (fieldguide.rendering.shortcodes.spread_span) and in the tables, not in a parenthesis the reader
    reads past three times a paragraph."""
    problems = []
    for page in _pages(built_site):
        prose = _text(re.sub(r"<table.*?</table>", " ", _article(page), flags=re.S))
        problems += [f"{page.relative_to(built_site)}: …{prose[max(m.start() - 60, 0):m.end()]}…"
                     for m in RUNS_IN_PROSE.finditer(prose)]
    assert not problems, "\n".join(problems[:20])


def test_no_table_header_is_a_code_id_and_counts_are_whole(built_site):
    problems = []
    for page in _pages(built_site):
        for table in re.findall(r"<table>(.*?)</table>", _article(page), re.S):
            heads = [_text(h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]
            problems += [f"{page.relative_to(built_site)}: header {h!r}" for h in heads
                         if CODE_ID.match(h)]
            counts = [i for i, h in enumerate(heads) if h in ("Runs", "Rounds")]
            for row in re.findall(r"<tr>(.*?)</tr>", table, re.S):
                cells = [_text(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
                problems += [f"{page.relative_to(built_site)}: {heads[i]} {cells[i]!r} is not a "
                             "whole number" for i in counts
                             if i < len(cells) and not re.fullmatch(r"\d{1,3}(?:,\d{3})*", cells[i])]
    assert not problems, "\n".join(problems[:40])


@pytest.mark.parametrize(("value", "shown"), [
    (5, "5"), (1672.4, "1,672"), (2887.2, "2,887"), (45.31, "45.3"), (0.07123, "0.0712"),
    (8.09e-7, "8.09 × 10⁻⁷"), (99.96, "100"), (0.0, "0"), (12345678, "12,345,678"),
])
def test_format_number(value, shown):
    assert format_number(value) == shown


def test_values_ranges_and_specs_follow_the_rule():
    assert format_value("rounds", 5.0) == "5"                      # a count is whole, in any tab
    assert format_value("median", 0.000963) == "963 µs"
    assert format_value("step_us", 1234.5) == "1.23 ms"
    assert format_value("idle_gpu0", 0.853) == "85.3%"               # a share reads as a percentage
    assert format_range("bandwidth_gbs", 0.0377, 0.0315, 0.0440) == ("0.0377 GB/s", "0.0315–0.0440")
    assert format_range("median", 0.000963, 0.00089, 0.00121) == ("963 µs", "890–1,210")
    assert format_spec(2528.3, ".0f") == "2,528" and format_spec(0.853, ".0%") == "85%"
    assert format_spec(1.2e-7, ".1e") == "1.2 × 10⁻⁷" and format_spec(2528.3, ".2g") == "2,528"


def test_every_label_reads_as_words_and_gpus_are_named_alike():
    assert not [f for f, label in FIELD_LABELS.items() if CODE_ID.match(label)]
    assert gpu_label("NVIDIA H100 80GB HBM3") == "H100 80GB HBM3"
    assert gpu_label("NVIDIA H200") == "H200" and gpu_label("2 × NVIDIA H200") == "2 × H200"


@pytest.mark.parametrize(("text", "what"), [
    ("1.37e+03 flop/byte", "e-notation"),
    ("0.0315 GB/s–0.0440 GB/s", "a unit inside a range (give it once, after the value)"),
    ("2528 (1902–2859 over 4 runs)× slower", "a ratio's × after its range"),
    ("memory 2887 GB/s", "no thousands comma"),
    ("0.0377123 s", "more than three significant figures"),
    ("0.000000809", "a long run of leading zeros (a power of ten reads better)"),
])
def test_the_page_scan_finds_each_kind_of_broken_number(text, what):
    assert [w for w, pattern in BROKEN.items() if pattern.search(text)] == [what]


def test_the_page_scan_passes_numbers_by_the_rule():
    good = ("1,672 GB/s; 8.09 × 10⁻⁷; 0.0377 GB/s (0.0315–0.0440 over 4 runs); "
            "2,528× (1,902–2,859× over 4 runs); a 4096 × 4096 product; 2026-11-24; 86%")
    assert not [w for w, pattern in BROKEN.items() if pattern.search(good)]


# --- Terms: tooltips on prose only, and the glossary links each term to the pages that teach it --


def test_terms_carry_tooltips_in_prose_but_not_in_tables_or_headings():
    markdown = pytest.importorskip("markdown")

    md = markdown.Markdown(extensions=["abbr", "tables", "fieldguide.rendering.glossary"])
    out = md.convert("Copies at 5 GB/s.\n\n| Rate |\n|--|\n| 5 GB/s |\n\n## GB/s\n\n"
                     "*[GB/s]: Gigabytes per second")
    assert out.count("<abbr") == 1 and '<abbr title="Gigabytes per second">GB/s</abbr>' in out
    assert "<td>5 GB/s</td>" in out and "<h2>GB/s</h2>" in out


def test_the_glossary_links_a_term_to_the_page_that_teaches_it():
    pytest.importorskip("markdown")  # fieldguide.rendering.glossary is a Markdown extension
    from fieldguide import ROOT
    from fieldguide.rendering import glossary

    listed = "\n".join(glossary.definition_list({"GIL": "Global interpreter lock"}, ROOT / "docs"))
    assert "Taught in [Processes, threads, coroutines and the GIL]" \
           "(foundations/processes-threads-gil.md)" in listed
    assert glossary.teaching_pages("no-such-term-anywhere", ROOT / "docs") == []


# --- Provenance at a glance ------------------------------------------------------------------


def test_a_tag_is_shown_once_per_group_of_figures_measured_by_the_same_runs():
    from fieldguide.rendering.shortcodes import one_tag_per_group

    def tag(gpu, runs):
        return (f'<p class="timing-tag">{gpu} · {runs} runs · 2026-11-24 · '
                '<a href="#measured-on">how</a></p>\n')

    page = ("T1" + tag("H100", 3) + tag("H200", 2) + "T2" + tag("H100", 3) + tag("H200", 2)
            + "T3" + tag("H100", 5))
    kept = one_tag_per_group(page)
    assert kept.count("H100 · 3 runs") == 1 and kept.count("H200 · 2 runs") == 1
    assert "H100 · 5 runs" in kept  # other runs: a tag of its own


def test_measured_on_is_one_line_per_gpu_with_every_run_collapsed(built_site):
    text = (built_site / "headline-numbers" / "index.html").read_text(encoding="utf-8")
    section = text[text.index('id="measured-on"'):text.index("</article>")]
    lines = re.findall(r"<li><strong>(.*?)</strong>(.*?)</li>", section, re.S)
    gpus = [gpu for gpu, _ in lines]
    assert len(gpus) == len(set(gpus)) >= 2, gpus  # one line per GPU: the page quotes two machines
    assert all(re.search(r"\d+ runs? on \d+ machine leases?", rest) for _, rest in lines)
    assert not [g for g in gpus if g.startswith("NVIDIA")]  # named as the tabs name them
    assert re.search(r'<details class="info">\s*<summary>Every run behind this page \(\d+\)', section)
    assert "<table>" not in section.split("<details")[0]  # the per-run table only collapsed


def test_every_ratio_reads_as_the_ratio_of_its_medians_or_says_which_it_is():
    """A page prints a ratio beside the two medians it compares (timing-value). Every ratio on
    every page reads as their ratio, or (a host-bound pair, whose median of the ratios within
    each run differs) says it is that median and gives the ratio of the medians too: never a
    number that disagrees with its neighbours in silence (fieldguide/rendering/shortcodes.py)."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    build = shortcodes.Build(ROOT, re.search(r"timings:\s*([\w-]+)", config)[1])
    checked, silent = 0, []
    for path in sorted((ROOT / "docs").rglob("*.md")):
        src = path.relative_to(ROOT / "docs").as_posix()
        for _, code in shortcodes.find(path.read_text(encoding="utf-8")):
            if code.kind != "ratio":
                continue
            try:
                shown = shortcodes.render_ratio(code, build, shortcodes.Page(src, ""))
            except (TimingError, ValueError, KeyError):
                continue  # the build fails on it, naming the page
            medians = [build.timings(code.gpu).benchmark(name).value(field or "median")
                       for name, _, field in (operand.partition(":") for operand in code.args[:2])]
            spec = code.args[2] if len(code.args) == 3 else None
            ratio = medians[0] / medians[1]
            of_medians = format_spec(ratio, spec) if spec else format_number(ratio)
            checked += 1
            title = re.search(r'title="([^"]*)"', shown)
            if (re.sub(r"<[^>]+>", "", shown) != of_medians
                    and f"the two medians give {of_medians}" not in
                    html.unescape(title[1] if title else "")):
                silent.append(f"{src}: {code.text.strip()} reads {shown!r}; the medians give "
                              f"{of_medians}")
    assert checked > 100, f"only {checked} ratios found: is the page scan broken?"
    assert not silent, "\n".join(silent)
