"""Charts read at a glance: human units, log axes where sizes span decades, titles that fit."""

import re

import pytest

from fieldguide.rendering import charts
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


def test_every_point_tells_its_value_and_every_series_has_its_own_marker_and_dash(sweep):
    svg = charts.draw(sweep, x="bytes", y="median", series_names={b.name: b.extra["kind"] for b in sweep},
                      xlabel="copy size")["light"]["wide"]
    titles = re.findall(r"<use [^>]*><title>([^<]*)</title></use>", svg)
    assert len(titles) == len(sweep)  # one per point, none on the legend's or ticks' markers
    assert "pinned: copy size 1 KiB, " in " ".join(titles) and "µs" in " ".join(titles)
    assert len(re.findall(r'<g id="series-\d+">', svg)) == 2 and "points:" not in svg
    styles = {(charts.MARKERS[i], str(charts.DASHES[i])) for i in range(len(charts.PALETTE))}
    assert len(styles) == len(charts.PALETTE)


def test_ticks_read_without_trailing_zeros_and_a_short_log_axis_gets_three():
    assert [charts.tick(v) for v in (0, 0.5, 1, 1.5, 2, 1000)] == ["0", "0.5", "1", "1.5", "2", "1,000"]
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([20, 30], [20, 60])
    ax.set_yscale("log")
    charts.enough_ticks(ax.yaxis)
    low, high = ax.get_ylim()
    assert sum(low <= t <= high for t in ax.yaxis.get_majorticklocs()) >= charts.MIN_TICKS
    plt.close(fig)


def test_a_label_is_placed_off_the_data_where_it_can_be(sweep):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 10], [5, 5])
    text = ax.text(5, 5, "a label", ha="center", va="center")  # on the line
    charts.place_clear(ax, text, [(5, 5, "center", "center"), (5, 7, "center", "bottom")])
    assert text.get_position() == (5, 7)
    plt.close(fig)


@pytest.fixture
def chain(tmp_path):
    """Four steps of 10 rounds each: 40 ms, 30 ms, 32 ms (a change that lost time), 20 ms."""
    entries = [fake_benchmark(f"benchmarks/bench_t.py::bench_step[{n}]", seconds * 10, ops=10)
               for n, seconds in enumerate([0.040, 0.030, 0.032, 0.020])]
    return fake_timings(entries, tmp_path).matching("t.step[*")


def test_a_waterfalls_shares_add_up_to_the_whole_gain():
    shares = charts.waterfall_steps([40.0, 30.0, 32.0, 20.0])
    assert shares == pytest.approx([0.5, -0.1, 0.6])
    assert sum(shares) == pytest.approx(1.0)
    with pytest.raises(charts.TimingError):
        charts.waterfall_steps([1.0, 1.0])


def test_a_waterfall_draws_each_change_with_its_share(chain):
    names = {b.name: f"step {b.name[-2]}" for b in chain}
    svgs = charts.waterfall(chain, field="per_op", names=names)
    assert set(svgs) == {"light", "dark"} and set(svgs["light"]) == {"wide", "narrow"}
    shown = texts(svgs["light"]["wide"])
    assert {"50%", "−10%", "60%"} <= {t.strip() for t in shown}  # a loss reads negative
    assert "step 0" in shown and "after every change" in shown
    assert any("ms" in t for t in shown)  # the axis in a human unit
