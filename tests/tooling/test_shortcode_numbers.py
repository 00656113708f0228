"""What a number shortcode prints beside the others: a ratio that says which ratio it is, a unit
written once, an integer setting as an integer, a host range only on what the host moves
(fieldguide/rendering/shortcodes.py, fieldguide/measuring/timings.py, fieldguide/measuring/host_bound.py)."""

import pytest

from fieldguide.measuring import host_bound
from fieldguide.measuring.numbers import carries_unit
from fieldguide.rendering import shortcodes
from tests.helpers import fake_benchmark, fake_run, write_run

MODULE = '''LABELS = {"launch": "Launch", "copy": "Copy", "matmul": "Product", "load": "Load"}
HOST_BOUND = {"launch": "Python and kernel launches", "copy": "a staged copy"}
'''


def runs(tmp_path, **benches):
    """One run per machine lease; `benches` maps a benchmark to its (median, extra) per run."""
    host_bound.declarations.cache_clear()
    (tmp_path / "benchmarks").mkdir(parents=True, exist_ok=True)
    (tmp_path / "benchmarks" / "bench_x.py").write_text(MODULE)
    count = len(next(iter(benches.values())))
    for i in range(count):
        write_run(tmp_path / "timings", fake_run(
            [fake_benchmark(f"benchmarks/bench_x.py::bench_{name}", per_run[i][0], iqr=0.0,
                            **per_run[i][1])
             for name, per_run in benches.items()],
            date=f"2026-11-2{i}T00:00:00+00:00", boot_id=f"boot-{i}"))
    return shortcodes.Build(tmp_path, "fake-gpu-9000")


def render(build, markdown):
    text, page = build.render_page(markdown, "p.md", "p/")
    return text.split("\n\n## Measured on")[0].strip(), page.problems


# --- finding: a ratio beside two medians it does not equal -------------------------------------

# Three hosts: launch 1, 2, 4 s; copy 4, 3, 6 s. Within each run copy/launch is 4, 1.5, 1.5,
# their median 1.5; the medians a page prints beside the ratio, 4 s and 2 s, give 2: the page must
# say which it shows. With copy 4, 4, 6 the runs give 4, 2, 1.5, median 2, as the medians do.
DIFFER = {"launch": [(1.0, {}), (2.0, {}), (4.0, {})], "copy": [(4.0, {}), (3.0, {}), (6.0, {})]}
AGREE = {"launch": DIFFER["launch"], "copy": [(4.0, {}), (4.0, {}), (6.0, {})]}


def test_a_host_bound_ratio_unlike_the_ratio_of_its_medians_says_which_it_is(tmp_path):
    text, problems = render(runs(tmp_path, **DIFFER),
                            "<!-- timing-ratio: x.copy x.launch .2f -->× faster")
    assert not problems, problems
    assert text == ('<span class="timing-spread" title="The median of 3 runs&#x27; own ratios, '
                    '1.50–4.00×; the two medians give 2.00×">1.50×</span> faster'), text


def test_a_host_bound_ratio_equal_to_the_ratio_of_its_medians_reads_plainly(tmp_path):
    text, _ = render(runs(tmp_path, **AGREE), "<!-- timing-ratio: x.copy x.launch .2f -->×")
    assert text == ('<span class="timing-spread" title="Within each of 3 runs: 1.50–4.00×">'
                    "2.00×</span>"), text


def test_a_gpu_bound_ratio_is_the_ratio_of_its_medians(tmp_path):
    """No host-bound mark: the ratio is that of the medians the page prints, never mixed."""
    text, _ = render(runs(tmp_path, matmul=DIFFER["copy"], load=DIFFER["launch"]),
                     "<!-- timing-ratio: x.matmul x.load .2f -->×")
    assert text == ('<span class="timing-spread" title="Within each of 3 runs: 1.50–4.00×">'
                    "2.00×</span>"), text
    assert "medians" not in text


def test_prose_prints_the_median_alone_and_its_range_in_the_hover_title(tmp_path):
    """Issue 45: "(1.50–4.00× over 3 runs)" in every sentence is read past; prose shows the
    median, the title and the tables the runs' range."""
    build = runs(tmp_path, matmul=[(1e-3, {"peak_gib": 0.5}), (2e-3, {"peak_gib": 0.7}),
                                   (4e-3, {"peak_gib": 0.6})])
    text, _ = render(build, "<!-- timing-value: x.matmul median -->, "
                            "<!-- timing-value: x.matmul peak_gib -->")
    assert text == ('<span class="timing-spread" title="The median of 3 runs, which ranged '
                    '1.00–4.00 ms">2.00 ms</span>, <span class="timing-spread" title="The median '
                    'of 3 runs, which ranged 0.500–0.700 GiB">0.600 GiB</span>'), text
    table, _ = render(build, "<!-- timing-table: x.matmul columns=median -->")
    assert "2.00 ms (1.00–4.00 over 3 runs)" in table   # the table keeps the range in its cell


def test_a_table_in_an_admonition_stays_in_it(tmp_path):
    """At column 0 a table ended the solution it was written in, and the paragraph after it read
    as a code block (precision/exercises.md, found by the browser test)."""
    build = runs(tmp_path, matmul=[(1e-3, {}), (2e-3, {}), (4e-3, {})])
    text, problems = render(build, '??? success "Solution"\n    Before.\n\n'
                                   "    <!-- timing-table: x.matmul columns=median -->\n\n"
                                   "    After.\n")
    assert not problems, problems
    assert "\n    | Product | 2.00 ms (1.00–4.00 over 3 runs) |" in text
    # raw HTML in a block would be wrapped in a paragraph: the tag is a paragraph with a class
    assert '<p class="timing-tag">' not in text and "\n    {: .timing-tag }" in text
    assert not [line for line in text.split("    After.")[0].splitlines()[1:]
                if line.strip() and not line.startswith("    ")], text


# --- finding: "GiB GiB" ---------------------------------------------------------------------------

def test_unit_beside_a_field_that_says_its_unit_is_a_page_problem(tmp_path):
    build = runs(tmp_path, matmul=[(1e-3, {"peak_gpu0_gib": 4.5})] * 2)
    code = "<!-- timing-value: x.matmul peak_gpu0_gib unit=GiB -->"
    text, problems = render(build, code)
    assert "GiB GiB" not in text
    assert len(problems) == 1 and problems[0].startswith(code), problems
    assert "remove unit=GiB" in problems[0]
    # without it, the field's own unit; with a FORMAT the bare number takes the page's unit
    assert render(build, "<!-- timing-value: x.matmul peak_gpu0_gib -->")[0] == "4.50 GiB"
    assert render(build, "<!-- timing-value: x.matmul peak_gpu0_gib .1f unit=GiB -->") == (
        "4.5 GiB", [])


@pytest.mark.parametrize(("field", "says"), [
    ("peak_gpu0_gib", True), ("step_us", True), ("peak_bytes", True), ("median", True),
    ("bandwidth_gbs", True), ("power_w", True),
    ("allocated_gib_per_gpu", False), ("num_workers", False), ("flops", False)])
def test_which_fields_say_their_unit(field, says):
    assert carries_unit(field) is says


# --- finding: "8.00 workers" ----------------------------------------------------------------------

def test_an_integer_setting_reads_as_an_integer_over_an_even_number_of_runs(tmp_path):
    """The median of two runs' 8 is 8.0; recorded as integers, it reads 8, in text and table."""
    build = runs(tmp_path, load=[(1e-3, {"num_workers": 8, "ops": 64}),
                                 (2e-3, {"num_workers": 8, "ops": 64})])
    assert render(build, "<!-- timing-value: x.load num_workers --> workers")[0] == "8 workers"
    table, _ = render(build, "<!-- timing-table: x.load columns=num_workers,ops -->")
    assert "| Load | 8 | 64 |" in table, table
    # a median between two integers is no integer, and reads as what it is
    build = runs(tmp_path / "b", load=[(1e-3, {"num_workers": 8}), (1e-3, {"num_workers": 9})])
    assert render(build, "<!-- timing-value: x.load num_workers -->")[0] == "8.50"
    # a measured float that happens to be whole stays a float
    build = runs(tmp_path / "c", load=[(1e-3, {"ratio": 2.0}), (1e-3, {"ratio": 2.0})])
    assert render(build, "<!-- timing-value: x.load ratio -->")[0] == "2.00"


# --- finding: a host range on a byte count --------------------------------------------------------

def test_a_size_of_a_host_bound_benchmark_reads_without_a_host_range(tmp_path):
    """HOST_BOUND marks what the host moves, the benchmark's time: not what it allocated."""
    build = runs(tmp_path, launch=[(1e-5, {"peak_bytes": 616 * 2**20, "peak_gib": 0.5}),
                                   (2e-5, {"peak_bytes": 616 * 2**20, "peak_gib": 0.5}),
                                   (3e-5, {"peak_bytes": 616 * 2**20, "peak_gib": 0.5})])
    assert render(build, "<!-- timing-value: x.launch peak_bytes -->")[0] == "616 MiB"
    assert render(build, "<!-- timing-value: x.launch peak_gib -->")[0] == "0.500 GiB"
    assert "Host-bound: " in render(build, "<!-- timing-value: x.launch median -->")[0]
    table, _ = render(build, "<!-- timing-table: x.launch columns=median,peak_bytes -->")
    row = next(line for line in table.splitlines() if line.startswith("| Launch"))
    assert row.count("host-bound") == 1 and row.endswith("| 616 MiB |"), row


@pytest.mark.parametrize(("field", "measured"), [
    ("median", True), ("per_op", True), ("step_us", True), ("items_per_s", True),
    ("bandwidth_gbs", True), ("peak_bytes", False), ("peak_gpu0_gib", False),
    ("bytes", False), ("num_workers", False)])
def test_which_fields_of_a_host_bound_benchmark_move_with_the_host(field, measured):
    assert host_bound.measured_field(field) is measured


def test_a_crossover_at_the_last_size_alone_says_so():
    """Ahead only at the largest size measured, nothing says the fast side stays ahead: the
    sentence names that size as the largest measured instead of 'from ... upwards'."""
    from types import SimpleNamespace

    from fieldguide.rendering import shortcodes

    def sweep(medians):
        return [SimpleNamespace(value=lambda f, n=n, m=m: n if f == "n" else m)
                for n, m in medians.items()]

    runs = {"slow": sweep({1024: 1.0, 2048: 2.0, 4096: 4.0}),
            "fast": sweep({1024: 3.0, 2048: 3.0, 4096: 3.5})}
    build = SimpleNamespace(benchmarks=lambda code, globs, page: runs[globs[0]])
    code = SimpleNamespace(args=["slow", "fast"], options={"x": "n"})
    assert shortcodes.render_crossover(code, build, None).endswith(", the largest size measured")
    runs["fast"] = sweep({1024: 3.0, 2048: 1.0, 4096: 3.5})
    assert shortcodes.render_crossover(code, build, None).endswith("upwards")


# --- finding: a published claim on one run (issue 40) ----------------------------------------------

def _build(tmp_path, leases, slug_gpus=1):
    (tmp_path / "benchmarks").mkdir(parents=True, exist_ok=True)
    (tmp_path / "benchmarks" / "bench_x.py").write_text(MODULE)
    for i, lease in enumerate(leases):
        write_run(tmp_path / "timings", fake_run(
            [fake_benchmark("benchmarks/bench_x.py::bench_copy", 1.0)],
            date=f"2026-11-2{i}T00:00:00+00:00", boot_id=lease, gpu_count=slug_gpus))
    return shortcodes.Build(tmp_path, "fake-gpu-9000")


@pytest.mark.parametrize(("leases", "short"), [
    (["a"], True), (["a", "a", "a"], True), (["a", "b"], True), (["a", "a", "b"], False),
])
def test_a_number_of_the_reference_gpu_needs_three_runs_from_two_leases(tmp_path, leases, short):
    build = _build(tmp_path, leases)
    _, page = build.render_page("<!-- timing-value: x.copy median -->", "p.md", "p/")
    found = build.too_few_runs(page)
    assert bool(found) == short
    if short:
        assert found[0].startswith("x.copy on fake-gpu-9000: ") and "make gpu-round" in found[0]


def test_a_machine_of_several_reference_gpus_needs_them_too_and_another_gpu_does_not(tmp_path):
    build = _build(tmp_path, ["a"], slug_gpus=2)
    _, page = build.render_page("<!-- timing-value: x.copy median gpu=2x-fake-gpu-9000 -->", "p.md", "p/")
    assert build.too_few_runs(page)
    assert build.is_reference("2x-fake-gpu-9000") and build.is_reference("fake-gpu-9000")
    assert not build.is_reference("other-fake-gpu-9000") and not build.is_reference("nvidia-h100")
