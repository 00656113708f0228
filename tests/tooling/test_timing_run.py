"""`make timings` fails clearly and never damages the committed file.

The runner is driven in-process against small stand-in benchmarks, with the CUDA check and the
fingerprint replaced, so these faults are tested on any machine.
"""

import json
import sys
import textwrap

import pytest

from fieldguide import timing_run
from fieldguide.timings import SCHEMA, Timings

GOOD = """
def bench_fast(benchmark):
    benchmark.extra_info["bytes"] = 1000
    benchmark.pedantic(lambda: sum(range(100)), rounds=5)
"""
BROKEN = """
def bench_broken(benchmark):
    def boom():
        raise ValueError("kernel exploded")
    benchmark.pedantic(boom, rounds=3)
"""
OOM = """
import torch

def bench_too_big(benchmark):
    def allocate():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 900.00 GiB")
    benchmark.pedantic(allocate, rounds=3)
"""
FINGERPRINT = {
    "gpu_name": "Fake GPU 9000", "compute_capability": "9.0", "sm_count": 1,
    "memory_bytes": 2**30, "gpu_count": 1, "driver": "1", "cuda_runtime": "13.0",
    "torch": "2.13.0", "cupy": None, "python": "3.11", "git_commit": "0" * 40,
    "git_dirty": False, "date": "2026-01-01T00:00:00+00:00",
}


@pytest.fixture
def bench_env(tmp_path, monkeypatch):
    bench_dir = tmp_path / "benchmarks"
    bench_dir.mkdir()
    out_dir = tmp_path / "timings"
    monkeypatch.setattr(timing_run, "_cuda_device_count", lambda: 1)
    monkeypatch.setattr("fieldguide.fingerprint.collect", lambda: dict(FINGERPRINT))

    def write(**modules):
        for name, source in modules.items():
            (bench_dir / f"bench_{name}.py").write_text(textwrap.dedent(source))
        return bench_dir, out_dir

    yield write
    # In-process pytest runs import each stand-in module as `bench_<name>`; forget them so the
    # next test's files of the same name are imported afresh.
    for module in [m for m in sys.modules if m.startswith("bench_")]:
        del sys.modules[module]


def run(bench_dir, out_dir, only=None):
    return timing_run.run(only, out_dir, bench_dir=bench_dir)


def test_full_run_writes_fingerprint_stats_and_files(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD)
    path = run(bench_dir, out_dir)
    assert path.name == "fake-gpu-9000.json"
    timings = Timings.load(path)
    record = timings.record("good.fast")
    assert record.stats["rounds"] == 5 and record.stats["median"] > 0
    assert record.stats["q1"] <= record.stats["median"] <= record.stats["q3"]
    assert record.run["gpu_name"] == "Fake GPU 9000" and record.run["complete"] is True
    assert record.value("bandwidth_gbs") > 0


def test_unknown_benchmark_is_named_with_a_suggestion(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD)
    with pytest.raises(timing_run.TimingRunError, match=r"unknown benchmark 'good\.fsat'.*good\.fast"):
        run(bench_dir, out_dir, only=["good.fsat"])
    assert not out_dir.exists()


def test_failing_benchmark_is_named_and_nothing_is_written(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD)
    committed = run(bench_dir, out_dir).read_bytes()
    bench_env(broken=BROKEN)
    with pytest.raises(timing_run.TimingRunError) as excinfo:
        run(bench_dir, out_dir)
    message = str(excinfo.value)
    assert "broken.broken" in message and "kernel exploded" in message
    assert "not written" in message
    assert (out_dir / "fake-gpu-9000.json").read_bytes() == committed


def test_out_of_memory_is_reported_as_such(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD, oom=OOM)
    with pytest.raises(timing_run.TimingRunError, match=r"oom\.too_big ran out of GPU memory"):
        run(bench_dir, out_dir)
    assert not out_dir.exists()


def test_partial_run_merges_and_keeps_each_records_run(bench_env, monkeypatch):
    bench_dir, out_dir = bench_env(good=GOOD, other=GOOD.replace("bench_fast", "bench_slow"))
    path = run(bench_dir, out_dir)
    first_run = Timings.load(path).record("other.slow").data["run"]
    later = dict(FINGERPRINT, date="2026-02-02T00:00:00+00:00", git_commit="1" * 40)
    monkeypatch.setattr("fieldguide.fingerprint.collect", lambda: dict(later))
    run(bench_dir, out_dir, only=["good.fast"])
    timings = Timings.load(path)
    assert timings.record("other.slow").data["run"] == first_run
    assert timings.record("good.fast").run["complete"] is False
    assert len(timings.data["runs"]) == 2


def test_no_cuda_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setattr(timing_run, "_cuda_device_count", timing_run._cuda_device_count)
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert timing_run.main([]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_crash_during_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "gpu.json"
    old = json.dumps({"schema": SCHEMA})
    path.write_text(old)

    def interrupted(fd):  # the run is killed while the new file is half written
        raise KeyboardInterrupt

    monkeypatch.setattr("os.fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        timing_run.write_atomically(path, {"schema": SCHEMA})
    assert path.read_text() == old
    assert list(tmp_path.iterdir()) == [path]


def test_benchmark_names():
    assert (timing_run.benchmark_name("benchmarks/bench_pinned_memory.py::bench_copy[h2d-pinned-1KiB]")
            == "pinned_memory.copy[h2d-pinned-1KiB]")


def test_only_accepts_a_wildcard_and_records_keep_source_order(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD + GOOD.replace("bench_fast", "bench_a_second"))
    path = run(bench_dir, out_dir, only=["good.*"])
    timings = Timings.load(path)
    assert [r.name for r in timings.matching("good.*")] == ["good.fast", "good.a_second"]
