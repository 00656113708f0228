"""Charts read at a glance: human units, log axes where sizes span decades, titles that fit."""

import re

import pytest

from fieldguide import charts
from tests.helpers import fake_benchmark, fake_timings

pytest.importorskip("matplotlib")


@pytest.fixture
def sweep(tmp_path):
    sizes = [2**10 * 4**i for i in range(8)]  # 1 KiB ... 16 MiB
    entries = [fake_benchmark(f"benchmarks/bench_t.py::bench_copy[{kind}-{n}]",
                              2e-6 + n / (50e9 if kind == "pinned" else 10e9), bytes=n, kind=kind)
               for kind in ("pinned", "pageable") for n in sizes]
    return fake_timings(entries, tmp_path).matching("t.copy[*")


def texts(svg: str) -> list[str]:
    """The text matplotlib wrote (svg.fonttype none keeps it as <text>)."""
    return [re.sub(r"<[^>]+>", "", t) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)]


def test_times_read_in_microseconds_and_sizes_in_binary_units(sweep):
    svgs = charts.draw(sweep, x="bytes", y="median", series_names={b.name: b.extra["kind"] for b in sweep},
                       ylabel="time per copy")
    assert set(svgs) == {"light", "dark"} and set(svgs["light"]) == {"wide", "narrow"}
    words = " ".join(texts(svgs["light"]["wide"]))
    assert "time per copy (ms)" in words and "1 KiB" in words and "16 MiB" in words
    assert "pinned" in words and "pageable" in words
    assert not re.search(r"\d[eE][+-]?\d|×10|10\^|\$", words), words  # no scientific notation


def test_an_axis_spanning_decades_is_logarithmic_unless_the_page_says_otherwise(sweep):
    assert charts._scale(None, [1, 10, 1000]) == "log"
    assert charts._scale(None, [1, 2, 50]) == "linear"
    assert charts._scale("linear", [1, 10, 1000]) == "linear"
    assert charts.tick(1000.0) == "1,000" and charts.tick(10.0) == "10" and charts.tick(0.1) == "0.1"


def test_a_long_title_is_wrapped_to_fit_and_an_impossible_one_fails(sweep):
    title = "Time per step: flat while launch-bound, rising with the cells once memory-bound"
    svgs = charts.draw(sweep, x="bytes", y="bandwidth_gbs", title=title)
    narrow = texts(svgs["dark"]["narrow"])
    assert not any(title in t for t in narrow)  # wrapped on a phone-width drawing
    assert any("memory-bound" in t for t in narrow)
    with pytest.raises(ValueError, match="does not fit"):
        charts.draw(sweep, x="bytes", y="median", title="a very long title " * 12)
