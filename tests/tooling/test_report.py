"""`make timings-report` names the benchmarks whose runs disagree, and says how many runs each has."""

from fieldguide.measuring import report
from fieldguide.measuring.timings import Timings
from tests.helpers import fake_benchmark, fake_run, write_run

STEADY = "benchmarks/bench_t.py::bench_steady"
JUMPY = "benchmarks/bench_t.py::bench_jumpy"
TWO_CASES = "benchmarks/bench_t.py::bench_two_cases"


def test_report_lists_disagreeing_and_unsteady_benchmarks(tmp_path, capsys):
    for day, (steady, jumpy) in enumerate([(1.0, 1.0), (1.05, 2.4)], start=1):
        write_run(tmp_path, fake_run([fake_benchmark(STEADY, steady * 1e-3),
                                      fake_benchmark(JUMPY, jumpy * 1e-3),
                                      fake_benchmark(TWO_CASES, 1e-5, iqr=6e-3)],
                                     date=f"2026-11-2{day}T00:00:00+00:00", boot_id=f"boot-{day}"))
    lines = report.report(Timings.load(tmp_path / "fake-gpu-9000"))
    text = "\n".join(lines)
    assert "2 run(s) on 2 recorded machine lease(s)" in text
    assert "runs disagree by more than 20%: 1" in text and "2.40x  t.jumpy" in text
    assert "t.steady" not in text.split("runs disagree")[1].split("rounds spread")[0]
    assert "IQR > median) in some run: 1" in text and "t.two_cases" in text
    assert "measured in fewer than 3 runs: 3 of 3" in text
    assert "the slowest run of those, by lease: boot-2 1" in text  # jumpy was slow on boot-2
    assert "measured on fewer than 2 leases: 0 of 3" in text
    assert report.main(["--dir", str(tmp_path)]) == 0
    assert report.main(["--dir", str(tmp_path), "--gpu", "nope"]) == 2
    assert "no timings folder" in capsys.readouterr().err
