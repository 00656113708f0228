"""The memory timeline figure (fieldguide/rendering/memory_chart.py) on made-up recordings."""

import re
from types import SimpleNamespace

import pytest

from fieldguide.measuring.timings import TimingError
from tests.helpers import fake_benchmark, fake_run, write_run

pytest.importorskip("matplotlib")

from fieldguide.rendering import memory_chart  # noqa: E402  (needs matplotlib)

MiB, GiB = 2**20, 2**30


def training(start=160 * MiB, per_event=32 * MiB, steps=2):
    """Rows as memory_over_time.timeline() writes them: two steps of a made-up model."""
    rows, level, t = [], start, 0
    for step in range(1, steps + 1):
        phases = [("forward", [per_event] * 36),
                  ("backward", [-per_event] * 30 + [per_event // 2] * 4),
                  ("optimizer", ([per_event * 4] if step == 1 else []) + [per_event, -per_event]
                   + [-per_event // 2] * 4)]
        for phase, deltas in phases:
            for delta in deltas:
                level += delta
                rows.append({"t": t, "allocated": level, "phase": phase, "step": step})
                t += 1
    return rows


def texts(svg: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", t) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)]


def test_draws_both_themes_and_layouts_in_human_units():
    svgs = memory_chart.draw(training(), title="Two training steps",
                             levels=[["parameters and batch", 160 * MiB], ["+ AdamW state", 416 * MiB]])
    assert set(svgs) == {"light", "dark"} and all(set(s) == {"wide", "narrow"} for s in svgs.values())
    for theme in svgs.values():
        for svg in theme.values():
            words = " ".join(texts(svg))
            assert "allocated (GiB)" in words
            for phase in ("forward", "backward", "optimizer"):
                assert phase in words
            assert "step 1" in words and "step 2" in words
            assert "+ AdamW state" in words and "parameters and batch" in words
            assert not re.search(r"\d[eE][+-]?\d|×10|10\^|\$", words), words  # no scientific notation


def test_small_timelines_read_in_mebibytes():
    rows = training(start=4 * MiB, per_event=MiB // 4)
    words = " ".join(texts(memory_chart.draw(rows)["light"]["wide"]))
    assert "allocated (MiB)" in words and "GiB" not in words
    assert memory_chart.byte_unit([512, 3 * 2**10]) == ("KiB", 2**10)
    assert memory_chart.byte_unit([3 * GiB]) == ("GiB", GiB)


def test_one_phase_stretch_per_phase_of_each_step():
    found = memory_chart.stretches(training())
    assert [(phase, step) for phase, step, _, _ in found] == [
        (p, s) for s in (1, 2) for p in ("forward", "backward", "optimizer")]
    firsts = [first for _, _, first, _ in found]
    assert firsts == sorted(firsts) and firsts[0] == 0


def test_the_summary_gives_each_phases_peak_and_end():
    rows = training()
    table = memory_chart.summary_markdown(rows)
    forward = [r["allocated"] for r in rows if (r["phase"], r["step"]) == ("forward", 1)]
    assert f"| 1 | forward | {memory_chart.format_bytes(max(forward))} | " in table
    assert table.count("\n|") == 2 + 6  # header, rule, one row per phase of each step


def test_missing_or_malformed_timelines_are_errors():
    with pytest.raises(TimingError, match="no memory timeline"):
        memory_chart.draw([])
    with pytest.raises(TimingError, match="lacks phase"):
        memory_chart.draw([{"t": 0, "allocated": 1}])


def test_a_title_that_cannot_fit_fails():
    with pytest.raises(ValueError, match="does not fit"):
        memory_chart.draw(training(), title="a very long title " * 12)


def test_renders_the_shortcode_from_a_recorded_run(tmp_path):
    """render_memory as the hook would call it: a figure, its provenance and its numbers."""
    pytest.importorskip("mkdocs")
    from fieldguide.rendering import shortcodes

    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "bench_t.py").write_text(
        'LABELS = {"step": "One training step"}\n\n\ndef bench_step(benchmark):\n    pass\n')
    write_run(tmp_path / "timings", fake_run([
        fake_benchmark("benchmarks/bench_t.py::bench_step", 0.01, memory_timeline=training(),
                       memory_levels=[["parameters and batch", 160 * MiB]])]))
    build = shortcodes.Build(tmp_path, "fake-gpu-9000")
    code = next(c for _, c in shortcodes.find('<!-- timing-memory: t.step title="A step" -->'))
    page = shortcodes.Page("memory/x.md", "memory/x/")
    html = memory_chart.render_memory(code, build, page)
    assert html.count("<object") == 4 and "only-light" in html and "only-dark" in html  # and -narrow
    assert "Fake GPU 9000" in html and "| 2 | optimizer |" in html and "One training step" in html
    assert len(build.figures) == 4 and not page.problems
    bare = SimpleNamespace(**{**vars(code), "args": []})
    with pytest.raises(ValueError, match="one benchmark NAME"):
        memory_chart.render_memory(bare, build, page)
