"""Host-bound numbers: marked once beside their benchmark (HOST_BOUND), and said so on the page
with their range over every run and machine (fieldguide/measuring/host_bound.py)."""

import ast

import pytest

from fieldguide import ROOT
from fieldguide.measuring import host_bound, report
from fieldguide.measuring.codekey import code_keys
from fieldguide.measuring.timings import CodeKeys, Timings, benchmark_location
from fieldguide.rendering import shortcodes
from tests.helpers import fake_benchmark, fake_run, write_run

MARKED = sorted(p for p in (ROOT / "benchmarks").glob("bench_*.py")
                if "\nHOST_BOUND = {" in p.read_text(encoding="utf-8"))
TIMINGS = sorted(p for p in (ROOT / "timings").iterdir() if p.is_dir())
DISAGREE = 1.5  # runs of one GPU this far apart measure the machine, not the code
# Benchmarks whose runs disagree that much for another reason than the host, and why.
NOT_HOST_BOUND = {
    "fsdp2.step": "two GPUs and NCCL: one slow run on one lease, not Python",
    "pinned_memory.copy[d2h-pinned-64MiB]": "one slow run (a DMA copy), the other two agree",
}

MODULE = '''LABELS = {"launch": "Launch", "copy": "Copy {kind}", "matmul": "Product"}
HOST_BOUND = {"launch": "Python and kernel launches", "copy[*-pageable]": "a staged copy"}
'''


def three_leases(tmp_path, **medians):
    """Runs on three machine leases; `medians` maps a benchmark id to its median per run."""
    (tmp_path / "benchmarks").mkdir(exist_ok=True)
    (tmp_path / "benchmarks" / "bench_x.py").write_text(MODULE)
    for i in range(3):
        write_run(tmp_path / "timings", fake_run(
            [fake_benchmark(f"benchmarks/bench_x.py::bench_{name}", times[i], iqr=0.0,
                            kind=name.partition("[")[2].rstrip("]"))
             for name, times in medians.items()],
            date=f"2026-11-2{i}T00:00:00+00:00", boot_id=f"boot-{i}"))
    return shortcodes.Build(tmp_path, "fake-gpu-9000")


def test_a_function_or_an_id_pattern_marks_a_benchmark(tmp_path):
    build = three_leases(tmp_path, **{"launch": [1e-5] * 3, "copy[h2d-pageable]": [1e-3] * 3,
                                      "copy[h2d-pinned]": [1e-3] * 3, "matmul": [1e-3] * 3})
    bench = build.timings(None).benchmark
    assert host_bound.host_bound(bench("x.launch"), tmp_path) == "Python and kernel launches"
    assert host_bound.host_bound(bench("x.copy[h2d-pageable]"), tmp_path) == "a staged copy"
    assert host_bound.host_bound(bench("x.copy[h2d-pinned]"), tmp_path) is None
    assert host_bound.host_bound(bench("x.matmul"), tmp_path) is None


def test_a_host_bound_number_shows_its_whole_range_and_machines(tmp_path):
    """Within 20 %, a GPU-bound number shows no range; a host-bound one always does."""
    build = three_leases(tmp_path, launch=[10e-6, 11e-6, 11.5e-6], matmul=[1e-3, 1.1e-3, 1e-3])
    text, _ = build.render_page("<!-- timing-value: x.launch median -->\n\n"
                                "<!-- timing-value: x.matmul median -->", "p.md", "p/")
    # the unit once, after the value (the site's number rule, fieldguide/measuring/timings.py)
    assert ">11.0 µs</span>" in text   # prose: the median alone, the range in the hover title
    assert ('title="Host-bound: 10.0–11.5 over 3 runs on 3 machines (the text shows their median, '
            '11.0 µs). Measures the host (Python and kernel launches). Hosts: Fake CPU, 16 cores'
            in text)
    assert "\n\n1.00 ms\n" in text  # the GPU-bound one: its runs agree, no range


def test_a_setting_of_a_host_bound_benchmark_reads_plainly(tmp_path):
    """What the benchmark was set to (`kind`, recorded) is no measurement of the host."""
    build = three_leases(tmp_path, **{"copy[h2d-pageable]": [1e-3, 2e-3, 3e-3]})
    text, _ = build.render_page("<!-- timing-value: x.copy[h2d-pageable] kind -->", "p.md", "p/")
    assert text.startswith("h2d-pageable\n"), text


def test_a_table_marks_host_bound_rows_and_names_the_hosts(tmp_path):
    build = three_leases(tmp_path, launch=[10e-6, 30e-6, 20e-6], matmul=[1e-3, 1e-3, 1e-3])
    text, page = build.render_page("<!-- timing-table: x.* -->", "p.md", "p/")
    assert not page.problems, page.problems
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "20.0 µs (host-bound: 10.0–30.0 over 3 runs on 3 machines)" in rows["Launch"]
    assert "host-bound" not in rows["Product"]
    assert "*host-bound* rows measure the host (Python and kernel launches)" in text
    assert "Hosts: Fake CPU, 16 cores." in text


def test_a_ratio_of_host_bound_numbers_is_taken_within_each_run(tmp_path):
    """Fast host: 1 vs 2; slow hosts: 4 vs 8 and 5 vs 10. Within each run the ratio is 2; the
    ratio of medians across runs (5 / 8) would mix hosts."""
    build = three_leases(tmp_path, **{"launch": [1.0, 4.0, 5.0],
                                      "copy[h2d-pageable]": [2.0, 8.0, 10.0]})
    text, _ = build.render_page(
        "<!-- timing-ratio: x.copy[h2d-pageable] x.launch .2f -->", "p.md", "p/")
    assert text.startswith("2.00"), text


def test_the_report_tells_host_bound_disagreements_apart(tmp_path):
    three_leases(tmp_path, launch=[1e-5, 3e-5, 2e-5], matmul=[1e-3, 2e-3, 1e-3])
    text = "\n".join(report.report(Timings.for_gpu("fake-gpu-9000", tmp_path / "timings")))
    assert "runs disagree by more than 20%: 2 (1 marked host-bound" in text
    assert "x.launch: 10.0 µs, 30.0 µs, 20.0 µs  [host-bound]" in text
    assert "x.matmul: 1.00 ms, 2.00 ms, 1.00 ms\n" in text + "\n"


def test_a_malformed_declaration_is_an_error(tmp_path):
    path = tmp_path / "bench_bad.py"
    path.write_text('HOST_BOUND = {"launch": ""}\n')
    host_bound.declarations.cache_clear()
    with pytest.raises(ValueError, match="bench_bad.py: HOST_BOUND must map"):
        host_bound.declarations(path)


def test_some_modules_mark_benchmarks():
    assert MARKED, "no benchmark module declares HOST_BOUND: the tests below would check nothing"


@pytest.mark.parametrize("path", MARKED, ids=[p.name for p in MARKED])
def test_every_key_marks_a_recorded_benchmark(path):
    """A misspelt key would mark nothing, silently."""
    host_bound.declarations.cache_clear()
    rel = path.relative_to(ROOT).as_posix()
    names = {b.name.split(".", 1)[1] for folder in TIMINGS
             for b in Timings.load(folder).benchmarks if benchmark_location(b.fullname)[0] == rel}
    assert not host_bound.unmatched_keys(path, sorted(names)), path.name


def test_runs_far_apart_are_marked_host_bound():
    """Every benchmark whose committed runs of the current code disagree by DISAGREE or more
    on one GPU is marked (or NOT_HOST_BOUND says why not): the pages then say so."""
    keys = CodeKeys(ROOT)
    unmarked = []
    for folder in TIMINGS:
        for bench in Timings.load(folder).benchmarks:
            medians = bench.per_run("median")
            if (len(medians) < 2 or max(medians) < DISAGREE * min(medians)
                    or keys.stale_files(bench) or bench.name in NOT_HOST_BOUND):
                continue
            if host_bound.host_bound(bench, ROOT) is None:
                unmarked.append(f"{folder.name}: {bench.name} "
                                f"({max(medians) / min(medians):.2f}x over {len(medians)} runs)")
    assert not unmarked, "mark these in HOST_BOUND of their module: " + "; ".join(unmarked)


@pytest.mark.parametrize("path", MARKED, ids=[p.name for p in MARKED])
def test_marking_makes_no_timing_stale(path, tmp_path):
    """HOST_BOUND is read by the build, never by a benchmark, so it is in no code key."""
    text = path.read_text(encoding="utf-8")
    functions = [n.name for n in ast.parse(text).body
                 if isinstance(n, ast.FunctionDef) and n.name.startswith("bench_")]
    for root, source in (("marked", text), ("unmarked", text.replace("\nHOST_BOUND = {",
                                                                      "\n_UNREAD = {", 1))):
        (tmp_path / root / "benchmarks").mkdir(parents=True)
        (tmp_path / root / "benchmarks" / path.name).write_text(source, encoding="utf-8")
    rel = f"benchmarks/{path.name}"
    for function in functions:
        assert code_keys(tmp_path / "marked", rel, function, []) == \
            code_keys(tmp_path / "unmarked", rel, function, []), (path.name, function)
