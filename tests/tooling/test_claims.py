"""A page's claim is checked against every run of every GPU: one run that contradicts it fails."""

import pytest

from fieldguide.timings import TimingError, Timings, runs_measuring
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
