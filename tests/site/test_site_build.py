"""The rendering extension (fieldguide/rendering/render.py): it renders from the runs, and the build fails
on every fault it guards, at any verbosity and under both engines.

Each test builds a tiny MkDocs project in a temporary directory with this repository's Markdown
extensions, one benchmark module and one snippet, and timing runs written as the timing run
writes them.
"""

import os
import shutil
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from fieldguide import ROOT
from fieldguide.measuring.codekey import code_keys
from tests.helpers import fake_benchmark, fake_run, write_run

pytest.importorskip("mkdocs")
pytest.importorskip("matplotlib")

SNIPPET = '''\
GPUS_NEEDED = 0


def copy(n):
    """Copy n bytes."""
    return bytes(n)


def unrelated():
    return 1
'''
BENCH = '''\
import pytest

from snippet import copy

LABELS = {"copy": "Copy of {bytes}", "slow": "Slow copy, {bytes}"}


@pytest.mark.parametrize("n", [1024])
def bench_copy(benchmark, n):
    benchmark.pedantic(copy, args=(n,))


def bench_slow(benchmark):
    benchmark.pedantic(copy, args=(1,))
'''
MKDOCS = """
site_name: render test
markdown_extensions:
  - {render}:
      timings: fake-gpu-9000
      beside: [fake-gpu-7000]
  - fieldguide.rendering.unrendered
  - admonition
  - pymdownx.details
  - tables
  - md_in_html
"""
SIZES = (2**10, 2**20, 2**30)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "snippet.py").write_text(SNIPPET)
    (tmp_path / "benchmarks" / "bench_copy.py").write_text(BENCH)
    keys = {f: code_keys(tmp_path, "benchmarks/bench_copy.py", f, ["snippet.py"])
            for f in ("bench_copy", "bench_slow")}

    def benches(scale=1.0):
        found = [fake_benchmark(f"benchmarks/bench_copy.py::bench_copy[{n}]", scale * n / 50e9,
                                keys["bench_copy"], bytes=n, kind="pinned") for n in SIZES]
        # a second sweep that wins only at the smallest size
        found += [fake_benchmark(f"benchmarks/bench_copy.py::bench_slow[{n}]",
                                 1e-9 if n == 2**10 else n / 10e9, keys["bench_slow"], bytes=n)
                  for n in SIZES]
        return found

    write_run(tmp_path / "timings", fake_run(benches()))

    def write_config(render="fieldguide.rendering.render"):
        text = MKDOCS.format(render=render)
        if render is None:  # the site without the rendering extension
            text = text.replace(
                "  - None:\n      timings: fake-gpu-9000\n      beside: [fake-gpu-7000]\n", "")
        (tmp_path / "mkdocs.yml").write_text(text)

    write_config()
    return SimpleNamespace(path=tmp_path, write_config=write_config, benches=benches)


def build(project, page, *args, command=("mkdocs", "build", "--strict")):
    (project.path / "docs" / "index.md").write_text(textwrap.dedent(page))
    env = {key: value for key, value in os.environ.items() if key != "FIELDGUIDE_PREVIEW"}
    env.update(PYTHONPATH=os.pathsep.join([str(project.path), str(ROOT)]), NO_MKDOCS_2_WARNING="1")
    return subprocess.run([sys.executable, "-m", *command, *args], cwd=project.path,
                          env=env, capture_output=True, text=True, timeout=120)


PAGE = """
    # Copies
    Large copies ran at <!-- timing-value: copy.copy[1073741824] bandwidth_gbs -->,
    <!-- timing-ratio: copy.copy[1073741824] copy.copy[1024] .0f -->× the time of a small one.
    Fast beats slow <!-- timing-crossover: copy.slow[*] copy.copy[*] x=bytes -->; never
    <!-- timing-crossover: copy.copy[*] copy.slow[*] x=bytes -->.

    <!-- timing-table: copy.copy[*] columns=median,bandwidth_gbs -->

    <!-- timing-chart: copy.copy[*] x=bytes y=bandwidth_gbs series=kind -->

    Quoted shortcodes are shown, not rendered: `<!-- timing-value: nope median -->`.
"""


def test_renders_table_value_ratio_chart_and_provenance(project):
    result = build(project, PAGE)
    assert result.returncode == 0, result.stderr
    html = (project.path / "site" / "index.html").read_text()
    assert "50.0 GB/s" in html and "1,048,576×" in html
    assert "from size = 1 MiB upwards" in html  # slow wins at 1 KiB, copy from 1 MiB on
    assert "at none of the sizes measured (up to size = 1 GiB)" in html
    assert "<table>" in html and "Copy of 1 MiB" in html  # the label declared beside the benchmark
    assert html.count('id="measured-on"') == 1 and "Fake CPU, 16 cores" in html
    assert "Fake GPU 9000 · 1 run · 2026-11-21" in html
    charts = sorted(p.name for p in (project.path / "site" / "assets" / "charts").iterdir())
    assert sorted(c.split("-", 1)[1] for c in charts) == [
        "dark-narrow.svg", "dark.svg", "light-narrow.svg", "light.svg"]
    assert "timing-value: nope median" in html


TABLE_AND_CHART = ("# P\n\n<!-- timing-table: copy.copy[*] -->\n\n"
                   "<!-- timing-chart: copy.copy[*] x=bytes y=bandwidth_gbs -->\n")


def test_a_second_gpu_appears_in_tabs_beside_the_default_one(project):
    write_run(project.path / "timings", fake_run(project.benches(scale=0.5), gpu_name="Fake GPU 7000"))
    result = build(project, TABLE_AND_CHART + "\nValue: <!-- timing-value: copy.copy[1024] median -->\n")
    assert result.returncode == 0, result.stderr
    html = (project.path / "site" / "index.html").read_text()
    assert html.count('class="tabbed-set') == 2  # the table's and the chart's
    assert html.count(">Fake GPU 9000</label>") == 2 and html.count(">Fake GPU 7000</label>") == 2
    assert "Fake GPU 7000 · 1 run" in html  # each tab carries its own provenance
    assert "Value: 20.5 ns" in html  # prose quotes the default GPU only
    assert "Fake GPU 7000" in html.split('id="measured-on"')[1]


def test_a_second_gpu_without_the_same_benchmarks_or_with_stale_ones_gets_no_tab(project):
    partial = [b for b in project.benches(scale=0.5) if not b["fullname"].endswith("[1024]")]
    write_run(project.path / "timings", fake_run(partial, gpu_name="Fake GPU 7000"))
    result = build(project, TABLE_AND_CHART)
    assert result.returncode == 0, result.stderr
    assert "tabbed-set" not in (project.path / "site" / "index.html").read_text()

    stale = project.benches(scale=0.5)
    for bench in stale:
        bench["extra_info"]["code"] = {path: "0" * 64 for path in bench["extra_info"]["code"]}
    write_run(project.path / "timings", fake_run(stale, date="2026-11-22T00:00:00+00:00",
                                                  gpu_name="Fake GPU 7000"))
    result = build(project, TABLE_AND_CHART)
    assert result.returncode == 0, result.stderr
    assert "tabbed-set" not in (project.path / "site" / "index.html").read_text()


def test_a_broken_second_gpu_folder_fails_the_build(project):
    folder = project.path / "timings" / "fake-gpu-7000"
    folder.mkdir()
    (folder / "20261121T000000Z_abcdef1234.json").write_text("{not json")
    result = build(project, TABLE_AND_CHART)
    assert result.returncode != 0
    assert "is not valid JSON" in result.stderr


def test_runs_that_disagree_show_their_range(project):
    write_run(project.path / "timings", fake_run(project.benches(scale=2.0), date="2026-11-22T00:00:00+00:00",
                                            boot_id="boot-2"))
    result = build(project, "# P\n\n<!-- timing-value: copy.copy[1024] median -->\n\n"
                            "Formatted <!-- timing-value: copy.copy[1024] median .3g -->.\n\n"
                            "Unit <!-- timing-value: copy.copy[1048576] bandwidth_gbs .0f unit=GB/s -->.\n\n"
                            "<!-- timing-table: copy.copy[1024] -->\n\n"
                            "<!-- timing-table: copy.copy[1048576] columns=median,bandwidth_gbs -->\n\n"
                            "Ratio <!-- timing-ratio: copy.copy[1048576] copy.slow[1048576] .2f -->.\n")
    assert result.returncode == 0, result.stderr
    html = (project.path / "site" / "index.html").read_text()
    # prose: the median alone, the runs' range in its hover title (the unit once, at the end)
    assert 'title="The median of 2 runs, which ranged 20.5–41.0 ns">30.7 ns</span>' in html
    assert ('Formatted <span class="timing-spread" title="The median of 2 runs, which ranged '
            '2.05 × 10⁻⁸–4.10 × 10⁻⁸">3.07 × 10⁻⁸</span>.') in html  # its format
    assert 'ranged 25–50 GB/s">38 GB/s</span>.' in html  # the unit once, after the value
    assert "2 runs · 2026-11-21 to 22" in html
    # a table without a runs column shows the range in each cell whose runs disagree
    assert "31.5 µs (21.0–41.9 over 2 runs)" in html
    assert "37.5 GB/s (25.0–50.0 over 2 runs)" in html
    assert "6.14 ns</td>" in html  # the IQR: a spread within runs, no range of it
    # a ratio: the median's, and the range of the ratios within each run (the copy doubled)
    assert ('Ratio <span class="timing-spread" title="Within each of 2 runs: 0.20–0.40">0.30</span>.'
            in html)


def test_missing_benchmark_fails_the_strict_build(project):
    result = build(project, "# Page\n\nIt took <!-- timing-value: copy.copy[7] median -->.\n")
    assert result.returncode != 0
    assert "index.md" in result.stderr and "no benchmark 'copy.copy[7]'" in result.stderr


def test_a_code_change_makes_the_timing_stale(project):
    snippet = project.path / "snippet.py"
    snippet.write_text(snippet.read_text().replace("bytes(n)", "bytearray(n)"))
    result = build(project, "# Page\n\n<!-- timing-table: copy.copy[1024] -->\n")
    assert result.returncode != 0
    assert "snippet.py: the code these timings measured has changed" in result.stderr
    assert "copy.copy[1024]" in result.stderr and "index.md" in result.stderr


def test_comments_docstrings_and_unreached_code_do_not(project):
    snippet = project.path / "snippet.py"
    snippet.write_text(snippet.read_text().replace('"""Copy n bytes."""', '"""Copy n zero bytes."""')
                       .replace("return 1", "return 2  # not run by any benchmark")
                       + "\n\ndef added_later():\n    return 3\n")
    bench = project.path / "benchmarks" / "bench_copy.py"
    bench.write_text(bench.read_text() + "\n\ndef bench_new(benchmark):  # a new benchmark\n"
                     "    benchmark(copy, 2)\n")
    result = build(project, "# Page\n\n<!-- timing-table: copy.copy[1024] -->\n")
    assert result.returncode == 0, result.stderr


def test_unknown_kind_and_field_fail(project):
    result = build(project, "# P\n\n<!-- timing-tabel: copy.copy[*] -->\n\n"
                            "<!-- timing-value: copy.copy[1024] speed -->\n")
    assert result.returncode != 0
    assert "unknown shortcode kind 'tabel'" in result.stderr
    assert "has no field 'speed'" in result.stderr


def test_without_the_render_extension_the_guard_fails_the_build(project):
    project.write_config(render=None)
    result = build(project, PAGE)
    assert result.returncode != 0
    assert "shortcode left unrendered" in result.stderr and "fieldguide.rendering.render" in result.stderr


@pytest.mark.parametrize("written", [
    "<!-- timings-value: copy.copy[1024] median -->",   # a misspelled prefix
    "<!-- timing-value copy.copy[1024] median -->",     # no colon
    "<!-- Timing-table: copy.copy[*] -->",              # a capital
])
def test_a_misspelled_shortcode_fails_the_build(project, written):
    result = build(project, f"# P\n\nIt took {written}.\n")
    assert result.returncode != 0
    assert "shortcode left unrendered" in result.stderr and written in result.stderr
    assert "table, value, ratio" in result.stderr  # the kinds, from the registry


STALE = "# Page\n\n<!-- timing-table: copy.copy[1024] -->\n"


def _change_the_code(project):
    snippet = project.path / "snippet.py"
    snippet.write_text(snippet.read_text().replace("bytes(n)", "bytearray(n)"))


@pytest.mark.parametrize("args", [(), ("-q",), ("--strict", "-q")], ids=["plain", "quiet", "strict-quiet"])
def test_a_stale_number_fails_every_mkdocs_build(project, args):
    """A problem is an error, not a warning: `-q` drops warnings before --strict counts them."""
    _change_the_code(project)
    result = build(project, STALE, *args, command=("mkdocs", "build"))
    assert result.returncode != 0
    assert "the code these timings measured has changed" in result.stderr


def test_a_stale_number_fails_the_zensical_build(project):
    pytest.importorskip("zensical")
    result = build(project, STALE, command=("zensical", "build", "--clean"))
    assert result.returncode == 0, result.stderr + result.stdout  # the same page, current: it builds
    _change_the_code(project)
    result = build(project, STALE, command=("zensical", "build", "--clean"))
    assert result.returncode != 0
    assert "the code these timings measured has changed" in result.stdout + result.stderr


def test_the_preview_shows_problems_and_keeps_going(project):
    _change_the_code(project)
    (project.path / "docs" / "index.md").write_text(STALE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1", "FIELDGUIDE_PREVIEW": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build"], cwd=project.path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "WARNING" in result.stderr and "the code these timings measured has changed" in result.stderr


@pytest.mark.parametrize("fault", ["renderer", "figures"])
def test_a_broken_part_of_the_extension_fails_the_build(project, fault):
    """The extension with one part removed: the registry entry, or writing the figures."""
    broken = {"renderer": "shortcodes.RENDERERS.pop('table', None)",
              "figures": "render._write = lambda *args: None"}[fault]
    (project.path / "broken_render.py").write_text(
        "from fieldguide.rendering import render, shortcodes\n\n" + broken + "\n"
        "makeExtension = render.makeExtension\n")
    project.write_config(render="broken_render")
    result = build(project, PAGE)
    assert result.returncode != 0
    expected = {"renderer": "unknown shortcode kind 'table'", "figures": "was not written"}[fault]
    assert expected in result.stderr


def test_a_bound_comes_from_the_pages_claims(project):
    tests = project.path / "tests" / "pages"
    tests.mkdir(parents=True)
    (tests / "test_index.py").write_text('CLAIMS = {"copy_share": 0.75}\n')
    result = build(project, "# P\n\nat least <!-- timing-bound: copy_share .0% --> of the copy\n")
    assert result.returncode == 0, result.stderr
    assert "at least 75% of the copy" in (project.path / "site" / "index.html").read_text()
    result = build(project, "# P\n\n<!-- timing-bound: nope -->\n")
    assert result.returncode != 0 and "has no claim 'nope'" in result.stderr


def test_one_build_loads_each_gpu_once_and_keys_each_benchmark_once(project, monkeypatch):
    """In-process, to count: one timings load per GPU and one code key per benchmark function."""
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config

    from fieldguide.measuring import codekey, timings

    (project.path / "docs" / "index.md").write_text(textwrap.dedent(PAGE))
    (project.path / "docs" / "other.md").write_text("# Other\n\n<!-- timing-table: copy.* -->\n")
    counts = {"load": 0, "key": 0}
    load, keys = timings.Timings.load.__func__, codekey.code_keys

    def counting_load(cls, path):
        counts["load"] += 1
        return load(cls, path)

    def counting_keys(*args):
        counts["key"] += 1
        return keys(*args)

    monkeypatch.setattr(timings.Timings, "load", classmethod(counting_load))
    monkeypatch.setattr(timings, "code_keys", counting_keys)
    monkeypatch.chdir(project.path)
    mkdocs_build(load_config(str(project.path / "mkdocs.yml"), strict=True))
    assert counts == {"load": 1, "key": 2}  # one GPU; bench_copy and bench_slow
    shutil.rmtree(project.path / "site")


def test_a_cold_figure_cache_starts_the_prefill_once_and_a_warm_one_never(project, monkeypatch):
    """fieldguide/rendering/figure_prefill.py: started by the first page whose figures missed the cache,
    once per build; not at all when every figure is in the cache."""
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config

    from fieldguide.rendering import figure_prefill, render

    chart = "<!-- timing-chart: copy.copy[*] x=bytes y={y} -->\n"
    (project.path / "docs" / "index.md").write_text("# One\n\n" + chart.format(y="median"))
    (project.path / "docs" / "two.md").write_text("# Two\n\n" + chart.format(y="bandwidth_gbs"))
    started = []
    monkeypatch.setattr(figure_prefill, "start", lambda *args: started.append(args))
    monkeypatch.chdir(project.path)
    for cache in ("cold", "warm"):
        monkeypatch.setattr(render, "_states", {})   # each build as in a fresh process
        mkdocs_build(load_config(str(project.path / "mkdocs.yml"), strict=True))
        expected = [(project.path, "fake-gpu-9000", ["fake-gpu-7000"])] if cache == "cold" else []
        assert started == expected, cache
        started.clear()
