"""Row labels and series names: every measured benchmark reads as words on a page, not as its id.

The labels are declared beside each benchmark (LABELS and WORDS in benchmarks/bench_*.py, read by
fieldguide/rendering/labels.py); these tests hold them to the committed timings.
"""

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

from fieldguide import ROOT
from fieldguide.content.pages import is_draft
from fieldguide.measuring.timings import CodeKeys, Timings, benchmark_location
from fieldguide.rendering import labels, shortcodes
from tests.helpers import DOCS, fake_benchmark, fake_run, write_run

TIMINGS = sorted(p for p in (ROOT / "timings").iterdir() if p.is_dir())
BENCH_FILES = sorted((ROOT / "benchmarks").glob("bench_*.py"))
CODE_SPAN = re.compile(r"`[^`]*`")


def committed():
    """Every benchmark a page can show: recorded, and its code unchanged since. Records of a
    benchmark since renamed or rewritten stay in their runs as history, with no label needed."""
    keys = CodeKeys(ROOT)
    return [(folder.name, bench) for folder in TIMINGS for bench in Timings.load(folder).benchmarks
            if not keys.stale_files(bench)]


def prose(text: str) -> str:
    """A label without its code spans: ids may appear in code font, not in the words."""
    return CODE_SPAN.sub("", text)


def test_every_committed_benchmark_has_a_label_that_formats():
    missing, labelled = [], defaultdict(dict)
    for gpu, bench in committed():
        text = labels.label(bench, ROOT)  # raises where a template names an unrecorded field
        if text is None:
            missing.append(f"{gpu}: {bench.name}")
            continue
        assert text.strip() and "{" not in text and "}" not in text, (bench.name, text)
        assert "|" not in text and "\n" not in text, f"{bench.name}: {text!r} breaks a table row"
        labelled[(gpu, benchmark_location(bench.fullname)[0])][bench.name] = text
    assert not missing, "benchmarks without a label: " + ", ".join(missing)
    for (gpu, module), texts in labelled.items():  # two rows that read alike cannot be told apart
        same = [n for n, t in texts.items() if list(texts.values()).count(t) > 1]
        assert not same, f"{gpu} {module}: these benchmarks share a label: {', '.join(same)}"


def test_no_label_shows_the_raw_id():
    for _, bench in committed():
        text = labels.label(bench, ROOT)
        short = bench.name.split(".", 1)[1]  # a plain word such as "copy" may be a word
        assert bench.name not in text, (bench.name, text)
        assert not ("[" in short or "_" in short) or short not in text, (bench.name, text)
        words = prose(text)
        leaked = [w for w in re.findall(r"[\w.\-]+", words) if "_" in w]
        assert not leaked, f"{bench.name}: {text!r} shows ids {leaked} outside code font"
        assert not re.search(r"\bseeds?\b", words, re.I), \
            f"{bench.name}: {text!r} says 'seed'; the site says 'original code'"


def chart_series():
    from fieldguide.notebooks.outputs import site_gpu

    """(page, benchmark, series field) for every series of every timing-chart in the docs."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        if is_draft(page):  # not measured yet: its benchmarks are not in the timings
            continue
        for _, code in shortcodes.find(page.read_text(encoding="utf-8")):
            if code.kind != "chart" or "series" not in code.options:
                continue
            timings = Timings.for_gpu(code.gpu or site_gpu(ROOT), ROOT / "timings")  # the reference GPU
            for pattern in code.args:
                for bench in timings.matching(pattern):
                    found.append((page.name, bench, code.options["series"]))
    return found


def test_chart_series_are_named_in_words():
    series = chart_series()
    assert series, "no chart with series= found: the test would check nothing"
    for page, bench, field in series:
        name = labels.series_label(bench, field, ROOT)
        assert name and "_" not in name and "`" not in name and "$" not in name, \
            f"{page}: {bench.name} is drawn as series {name!r}; declare it in WORDS"
        assert not re.search(r"\bseeds?\b", name, re.I), f"{page}: series {name!r} says 'seed'"


@pytest.mark.parametrize("path", BENCH_FILES, ids=[p.name for p in BENCH_FILES])
def test_labels_are_literals_naming_existing_benchmarks(path):
    labels.declarations.cache_clear()
    declared, words = labels.declarations(path)
    assert declared, f"{path.name} declares no LABELS"
    functions = {n.name.removeprefix("bench_") for n in ast.parse(path.read_text(encoding="utf-8")).body
                 if isinstance(n, ast.FunctionDef) and n.name.startswith("bench_")}
    stale = [key for key in declared if key.split("[", 1)[0] not in functions]
    assert not stale, f"{path.name}: LABELS for benchmarks that do not exist: {', '.join(stale)}"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in {**declared, **words}.items())


def test_a_benchmark_without_a_label_fails_the_build(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "bench_x.py").write_text('LABELS = {"named": "Named, {bytes}"}\n')
    write_run(tmp_path / "timings", fake_run([
        fake_benchmark("benchmarks/bench_x.py::bench_named[1]", 1e-3, bytes=2**20),
        fake_benchmark("benchmarks/bench_x.py::bench_unnamed", 1e-3),
    ]))
    build = shortcodes.Build(tmp_path, "fake-gpu-9000")
    named, unnamed = (build.timings(None).benchmark(n) for n in ("x.named[1]", "x.unnamed"))
    assert build.label(named) == "Named, 1 MiB"
    with pytest.raises(ValueError, match=r"x\.unnamed: no label; declare one in LABELS"):
        build.label(unnamed)


def test_a_template_naming_an_unrecorded_field_fails(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "bench_y.py").write_text('LABELS = {"copy": "Copy, {kind}"}\n')
    write_run(tmp_path / "timings", fake_run([fake_benchmark("benchmarks/bench_y.py::bench_copy", 1e-3)]))
    bench = Timings.for_gpu("fake-gpu-9000", Path(tmp_path / "timings")).benchmark("y.copy")
    with pytest.raises(ValueError, match="names kind, which the benchmark did not record"):
        labels.label(bench, tmp_path)
