"""The timing hooks: they render from the JSON, and the strict build fails on missing or stale data.

Each test builds a tiny MkDocs project in a temporary directory with this repository's hooks.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from fieldguide import ROOT
from fieldguide.timings import SCHEMA, sha256_of

pytest.importorskip("mkdocs")
pytest.importorskip("matplotlib")

RUN = {
    "gpu_name": "Fake GPU 9000", "compute_capability": "9.0", "sm_count": 132,
    "memory_bytes": 80 * 2**30, "gpu_count": 1, "driver": "580.1", "cuda_runtime": "13.0",
    "torch": "2.11.0", "cupy": "14.2.0", "python": "3.12.3", "git_commit": "abcdef1234" + "0" * 30,
    "git_dirty": False, "date": "2026-11-21T00:00:00+00:00", "complete": True,
}


def record(nbytes, median, files):
    stats = {"median": median, "q1": median * 0.9, "q3": median * 1.1, "iqr": median * 0.2,
             "mean": median, "stddev": 0.0, "min": median * 0.8, "max": median * 1.2, "rounds": 10}
    return {"run": "r1", "stats": stats, "extra": {"bytes": nbytes, "kind": "pinned"},
            "files": files}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "timings").mkdir()
    snippet = tmp_path / "snippet.py"
    snippet.write_text("x = 1\n")
    files = [{"path": "snippet.py", "sha256": sha256_of(snippet)}]
    benchmarks = {f"copy[{n}]": record(n, n / 50e9, files) for n in (2**10, 2**20, 2**30)}
    # a second sweep that wins only at the smallest size
    benchmarks |= {f"slow[{n}]": record(n, 1e-9 if n == 2**10 else n / 10e9, files)
                   for n in (2**10, 2**20, 2**30)}
    data = {"schema": SCHEMA, "gpu": RUN["gpu_name"], "runs": {"r1": RUN}, "benchmarks": benchmarks}
    (tmp_path / "timings" / "fake-gpu-9000.json").write_text(json.dumps(data))
    (tmp_path / "mkdocs.yml").write_text(textwrap.dedent(f"""
        site_name: hook test
        extra:
          timings: fake-gpu-9000
        hooks:
          - {ROOT / "hooks" / "timing_charts.py"}
          - {ROOT / "hooks" / "timing_tables.py"}
        markdown_extensions: [admonition, pymdownx.details, tables]
    """))
    return tmp_path


def build(project, page):
    (project / "docs" / "index.md").write_text(textwrap.dedent(page))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=project,
                          env=env, capture_output=True, text=True, timeout=120)


def test_renders_table_value_ratio_and_chart(project):
    result = build(project, """
        # Copies
        Large copies ran at <!-- timing-value: copy[1073741824] bandwidth_gbs .1f --> GB/s,
        <!-- timing-ratio: copy[1073741824] copy[1024] .0f -->× the time of a small one.
        Fast beats slow <!-- timing-crossover: slow[*] copy[*] x=bytes -->; never
        <!-- timing-crossover: copy[*] slow[*] x=bytes -->.

        <!-- timing-table: copy[*] columns=median,bandwidth_gbs -->

        <!-- timing-chart: copy[*] x=bytes y=bandwidth_gbs series=kind xscale=log -->

        Quoted shortcodes are shown, not rendered: `<!-- timing-value: nope median -->`.
    """)
    assert result.returncode == 0, result.stderr
    html = (project / "site" / "index.html").read_text()
    assert "50.0 GB/s" in html and "1048576×" in html
    assert "from bytes = 1048576 upwards" in html  # slow wins at 1 KiB, copy from 1 MiB on
    assert "at none of the sizes measured (up to bytes = 1073741824)" in html
    assert "<table>" in html and "copy[1048576]" in html
    assert "Measured on Fake GPU 9000 (sm_90, 132 SMs, 80 GiB), driver 580.1" in html
    charts = sorted(p.name for p in (project / "site" / "assets" / "charts").iterdir())
    assert sorted(c.rsplit("-", 1)[1] for c in charts) == ["dark.svg", "light.svg"]
    assert all(f'{c}#only-{c.rsplit("-", 1)[1][:-4]}' in html for c in charts)
    assert "timing-value: nope median" in html


def test_missing_benchmark_fails_the_strict_build(project):
    result = build(project, "# Page\n\nIt took <!-- timing-value: copy[7] median -->.\n")
    assert result.returncode != 0
    assert "index.md" in result.stderr and "no benchmark 'copy[7]'" in result.stderr


def test_stale_timing_fails_the_strict_build(project):
    (project / "snippet.py").write_text("x = 2  # changed after it was measured\n")
    result = build(project, "# Page\n\n<!-- timing-table: copy[1024] -->\n")
    assert result.returncode != 0
    assert "index.md" in result.stderr and "snippet.py changed since it was measured" in result.stderr
    assert "copy[1024]" in result.stderr


def test_unknown_shortcode_and_field_fail(project):
    result = build(project, "# P\n\n<!-- timing-tabel: copy[*] -->\n\n"
                            "<!-- timing-value: copy[1024] speed -->\n")
    assert result.returncode != 0
    assert "unknown shortcode" in result.stderr and "has no field 'speed'" in result.stderr
