"""A page's claim is checked against every run of every GPU: one run that contradicts it fails."""

import pytest

from fieldguide.measuring.codekey import code_keys
from fieldguide.measuring.timings import CodeKeys, TimingError, Timings, all_timings, runs_measuring
from tests.helpers import fake_benchmark, fake_run, write_run

FAST = "benchmarks/bench_t.py::bench_fast"
SLOW = "benchmarks/bench_t.py::bench_slow"


def test_every_run_and_every_gpu_is_checked(tmp_path):
    write_run(tmp_path, fake_run([fake_benchmark(FAST, 1e-3), fake_benchmark(SLOW, 2e-3)]))
    write_run(tmp_path, fake_run([fake_benchmark(FAST, 3e-3), fake_benchmark(SLOW, 2e-3)],
                                 date="2026-11-22T00:00:00+00:00"))
    write_run(tmp_path, fake_run([fake_benchmark(FAST, 1e-3)], gpu_name="Other GPU"))
    everything = [Timings.load(d) for d in sorted(tmp_path.iterdir())]
    runs = runs_measuring(everything, "t.fast", "t.slow")
    assert len(runs) == 2  # both runs of the first GPU; the other GPU never measured t.slow
    holds = [run.value("t.fast") < run.value("t.slow") for run in runs]
    assert holds == [True, False]  # the median over runs would hide the second run
    assert len(runs_measuring(everything, "t.fast")) == 3
    with pytest.raises(TimingError, match="no recorded run measured all of t.nope"):
        runs_measuring(everything, "t.nope")


def test_a_gpu_whose_runs_measured_older_code_is_left_out(tmp_path):
    """The claim is about the code as it is: a GPU that measured other code has no say, and
    where no GPU measured this code the claim fails, naming the stale GPU."""
    bench = tmp_path / "benchmarks" / "bench_t.py"
    bench.parent.mkdir()
    bench.write_text("def bench_fast():\n    return 1\n")
    now = code_keys(tmp_path, "benchmarks/bench_t.py", "bench_fast", [])
    write_run(tmp_path / "timings", fake_run([fake_benchmark(FAST, 1e-3, code=now)]))
    write_run(tmp_path / "timings", fake_run([fake_benchmark(FAST, 9e-3, code={
        "benchmarks/bench_t.py": "older"})], gpu_name="Other GPU"))
    everything = all_timings(tmp_path / "timings")
    keys = CodeKeys(tmp_path)
    runs = runs_measuring(everything, "t.fast", keys=keys)
    assert [run.value("t.fast") for run in runs] == [1e-3]
    assert len(runs_measuring(everything, "t.fast")) == 2  # without keys: every GPU's newest
    bench.write_text("def bench_fast():\n    return 2\n")  # now both GPUs measured older code
    with pytest.raises(TimingError, match=r"with the current code \(the runs on "
                                          r"fake-gpu-9000, other-gpu measured code"):
        runs_measuring(everything, "t.fast", keys=CodeKeys(tmp_path))
