"""`make timings` keeps every run, fails clearly, and never damages the committed timings.

The runner is driven against small stand-in benchmarks, with the CUDA check and the GPU
fingerprint replaced (in its child processes by tests/tooling/fake_machine.py), so these faults
are tested on any machine.
"""

import json
import sys
import textwrap

import pytest

from fieldguide.measuring import timing_run
from fieldguide.measuring.timings import Timings, benchmark_name

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
    "torch": "2.13.0", "cupy": None, "numpy": "2.0", "nccl": None, "interconnect": None,
    "boot_id": "boot-1",
}


def fake_fingerprint(monkeypatch, **changes):
    monkeypatch.setenv("FIELDGUIDE_FAKE_FINGERPRINT", json.dumps({**FINGERPRINT, **changes}))


@pytest.fixture
def bench_env(tmp_path, monkeypatch):
    bench_dir = tmp_path / "benchmarks"
    bench_dir.mkdir()
    out_dir = tmp_path / "timings"
    monkeypatch.setattr(timing_run, "_cuda_device_count", lambda: 1)
    fake_fingerprint(monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p tests.tooling.fake_machine")
    monkeypatch.setenv("FIELDGUIDE_GIT_COMMIT", "0" * 40)

    def write(**modules):
        for name, source in modules.items():
            (bench_dir / f"bench_{name}.py").write_text(textwrap.dedent(source))
        return bench_dir, out_dir

    yield write
    # In-process pytest runs import each stand-in module as `bench_<name>`; forget them so the
    # next test's files of the same name are imported afresh.
    for module in [m for m in sys.modules if m.startswith("bench_")]:
        del sys.modules[module]


def run(bench_dir, out_dir, only=None, stale=False, wanted=False):
    return timing_run.run(only, out_dir, bench_dir=bench_dir, stale=stale, wanted=wanted)


@pytest.mark.fresh_interpreter  # a timing run: a child pytest per module
def test_full_run_writes_one_pytest_benchmark_file(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD)
    path = run(bench_dir, out_dir)
    assert path.parent.name == "fake-gpu-9000" and path.name.endswith("Z_0000000000.json")
    data = json.loads(path.read_text())
    assert {"machine_info", "commit_info", "benchmarks", "datetime", "version"} <= data.keys()
    assert data["machine_info"]["fieldguide"]["complete"] is True
    assert "python_version" in data["machine_info"]  # pytest-benchmark's own host facts
    bench = Timings.load(path.parent).benchmark("good.fast")
    assert bench.stats["rounds"] == 5 and bench.value("median") > 0
    assert bench.stats["q1"] <= bench.value("median") <= bench.stats["q3"]
    assert bench.value("bandwidth_gbs") > 0
    (keyed,) = bench.code  # keyed by the code it ran (its path is relative to pytest's rootdir)
    assert keyed.endswith("bench_good.py")


def test_unknown_benchmark_is_named_with_a_suggestion(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD)
    with pytest.raises(timing_run.TimingRunError, match=r"unknown benchmark 'good\.fsat'.*good\.fast"):
        run(bench_dir, out_dir, only=["good.fsat"])
    assert not out_dir.exists()


@pytest.mark.fresh_interpreter  # a timing run: a child pytest per module
def test_failing_benchmark_is_named_and_nothing_is_written(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD)
    committed = run(bench_dir, out_dir).read_bytes()
    bench_env(broken=BROKEN)
    with pytest.raises(timing_run.TimingRunError) as excinfo:
        run(bench_dir, out_dir)
    message = str(excinfo.value)
    assert "broken.broken" in message and "kernel exploded" in message
    assert "not written" in message
    (only,) = (out_dir / "fake-gpu-9000").iterdir()
    assert only.read_bytes() == committed


@pytest.mark.fresh_interpreter  # a timing run: a child pytest per module
def test_out_of_memory_is_reported_as_such(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD, oom=OOM)
    with pytest.raises(timing_run.TimingRunError, match=r"oom\.too_big ran out of GPU memory"):
        run(bench_dir, out_dir)
    assert not out_dir.exists()


@pytest.mark.fresh_interpreter  # a timing run: a child pytest per module
def test_every_run_is_kept_and_a_value_is_the_median_over_runs(bench_env, monkeypatch):
    bench_dir, out_dir = bench_env(good=GOOD, other=GOOD.replace("bench_fast", "bench_slow"))
    first = run(bench_dir, out_dir)
    monkeypatch.setenv("FIELDGUIDE_GIT_COMMIT", "1" * 40)
    fake_fingerprint(monkeypatch, boot_id="boot-2")
    second = run(bench_dir, out_dir, only=["good.fast"])
    assert first != second and first.exists()
    timings = Timings.load(out_dir / "fake-gpu-9000")
    assert len(timings.runs) == 2 and timings.leases() == {"boot-1", "boot-2"}
    fast, slow = timings.benchmark("good.fast"), timings.benchmark("other.slow")
    assert len(fast.records) == 2 and len(slow.records) == 1
    assert fast.records[-1].run.fingerprint["complete"] is False
    per_run = [r.value("median") for r in fast.records]
    assert fast.value("median") == pytest.approx(sum(per_run) / 2)  # median of two


@pytest.mark.fresh_interpreter  # a timing run: a child pytest per module
def test_a_changed_benchmark_supersedes_its_old_records(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD)
    run(bench_dir, out_dir)
    bench_env(good=GOOD.replace("range(100)", "range(200)"))
    run(bench_dir, out_dir)
    fast = Timings.load(out_dir / "fake-gpu-9000").benchmark("good.fast")
    assert len(fast.records) == 1 and len(fast.superseded) == 1


@pytest.mark.fresh_interpreter  # a timing run: a child pytest per module
def test_stale_measures_only_what_changed_or_was_never_measured_here(bench_env, capsys):
    bench_dir, out_dir = bench_env(good=GOOD, other=GOOD.replace("bench_fast", "bench_slow"))
    first = run(bench_dir, out_dir, stale=True)   # nothing measured on this GPU yet: all of it
    assert {b.name for b in Timings.load(first.parent).benchmarks} == {"good.fast", "other.slow"}
    assert "a full run of 2 benchmarks on fake-gpu-9000 takes about" in capsys.readouterr().out

    assert run(bench_dir, out_dir, stale=True) is None
    out = capsys.readouterr().out
    assert "nothing to measure: fake-gpu-9000 has a measurement of the current code of each of the 2" in out
    assert "a full run of 2 benchmarks on fake-gpu-9000 takes about 0 min" in out

    bench_env(good=GOOD.replace("range(100)", "range(200)"),   # changed code
              third=GOOD.replace("bench_fast", "bench_new"))   # never measured
    (bench_dir / "bench_other.py").write_text(                # a comment: not stale
        (bench_dir / "bench_other.py").read_text() + "# a comment changes no key\n")
    assert timing_run.run(None, out_dir, list_only=True, bench_dir=bench_dir, stale=True) is None
    assert "2 of 3 benchmarks are stale or new" in capsys.readouterr().out   # listed, not run
    assert len(list((out_dir / "fake-gpu-9000").iterdir())) == 1
    second = run(bench_dir, out_dir, stale=True)
    data = json.loads(second.read_text())
    assert sorted(benchmark_name(b["fullname"]) for b in data["benchmarks"]) == ["good.fast", "third.new"]
    assert data["machine_info"]["fieldguide"]["complete"] is False
    out = capsys.readouterr().out
    assert "2 of 3 benchmarks are stale or new on fake-gpu-9000: good.fast, third.new" in out


@pytest.mark.parametrize(("records", "lease", "wanted"), [
    ([], "a", 2),                                  # new: two here, the third from another lease
    ([("a", "r1")], "a", 1),
    ([("a", "r1"), ("a", "r2")], "a", 0),          # the third must come from another lease
    ([("a", "r1"), ("a", "r2")], "b", 1),          # ... and this is one
    ([("a", "r1")], "b", 2),                       # one run elsewhere: two more make three
    ([("a", "r1"), ("b", "r2"), ("b", "r3")], "c", 0),
    ([(None, "r1"), (None, "r2")], "a", 1),        # runs without a lease count as runs only
    ([("a", "r1"), ("a", "r2"), ("a", "r3")], "b", 1),  # three from one lease: a second lease
    ([("a", "r1"), ("a", "r2"), ("a", "r3")], "a", 0),
])
def test_a_lease_makes_the_runs_that_three_from_two_leases_need(records, lease, wanted):
    assert timing_run.runs_wanted_here(records, lease) == wanted


@pytest.mark.fresh_interpreter  # timing runs: a child pytest per module
def test_wanted_runs_until_three_runs_from_two_leases(bench_env, monkeypatch, capsys):
    bench_dir, out_dir = bench_env(good=GOOD)
    for _ in range(2):
        assert run(bench_dir, out_dir, wanted=True) is not None   # two on this lease ...
    assert run(bench_dir, out_dir, wanted=True) is None             # ... and no third
    assert "nothing to measure" in capsys.readouterr().out
    fake_fingerprint(monkeypatch, boot_id="boot-2")                 # another lease
    assert run(bench_dir, out_dir, wanted=True) is not None
    assert run(bench_dir, out_dir, wanted=True) is None
    bench = Timings.load(out_dir / "fake-gpu-9000").benchmark("good.fast")
    assert len(bench.records) == 3 and {r.run.lease for r in bench.records} == {"boot-1", "boot-2"}


@pytest.mark.fresh_interpreter
def test_a_deadline_keeps_what_was_measured_and_names_the_rest(bench_env, capsys):
    bench_dir, out_dir = bench_env(good=GOOD, other=GOOD.replace("bench_fast", "bench_slow"))
    path = timing_run.run(None, out_dir, bench_dir=bench_dir, deadline=0)
    data = json.loads(path.read_text())
    assert [benchmark_name(b["fullname"]) for b in data["benchmarks"]] == ["good.fast"]
    assert data["machine_info"]["fieldguide"]["complete"] is False  # never passes for a full run
    assert "not measured: the deadline (0 s) passed before 1 module(s) started; measure them " \
           "with --only other.slow" in capsys.readouterr().out


@pytest.mark.fresh_interpreter
def test_keep_going_writes_the_modules_that_measured_and_still_fails(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD, broken=BROKEN)
    with pytest.raises(timing_run.TimingRunError, match="1 benchmark"):
        timing_run.run(None, out_dir, bench_dir=bench_dir, keep_going=True)
    (path,) = (out_dir / "fake-gpu-9000").glob("*.json")
    data = json.loads(path.read_text())
    assert [benchmark_name(b["fullname"]) for b in data["benchmarks"]] == ["good.fast"]
    assert data["machine_info"]["fieldguide"]["complete"] is False
    assert data["machine_info"]["fieldguide"]["benchmarks_run"] == 1


@pytest.mark.fresh_interpreter  # a timing run: a child pytest per module
def test_only_narrows_what_stale_picks(bench_env):
    """A round's plan: --stale (or --wanted) picks only among --only's names."""
    bench_dir, out_dir = bench_env(good=GOOD, other=GOOD.replace("bench_fast", "bench_slow"))
    path = timing_run.run(["other.*"], out_dir, bench_dir=bench_dir, stale=True)
    assert {b.name for b in Timings.load(path.parent).benchmarks} == {"other.slow"}


def test_no_cuda_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setattr(timing_run, "_cuda_device_count", timing_run._cuda_device_count)
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert timing_run.main([]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_crash_during_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "gpu.json"
    old = json.dumps({"benchmarks": []})
    path.write_text(old)

    def interrupted(fd):  # the run is killed while the new file is half written
        raise KeyboardInterrupt

    monkeypatch.setattr("os.fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        timing_run.write_atomically(path, {"benchmarks": [1]})
    assert path.read_text() == old
    assert list(tmp_path.iterdir()) == [path]


def test_benchmark_names():
    assert (benchmark_name("benchmarks/bench_pinned_memory.py::bench_copy[h2d-pinned-1KiB]")
            == "pinned_memory.copy[h2d-pinned-1KiB]")


@pytest.mark.fresh_interpreter  # a timing run: a child pytest per module
def test_only_accepts_a_wildcard_and_records_keep_source_order(bench_env):
    bench_dir, out_dir = bench_env(good=GOOD + GOOD.replace("bench_fast", "bench_a_second"))
    path = run(bench_dir, out_dir, only=["good.*"])
    timings = Timings.load(path.parent)
    assert [b.name for b in timings.matching("good.*")] == ["good.fast", "good.a_second"]


LEAVES = """
import builtins

builtins.left_behind = "by bench_leaves.py"  # as a snippet's module-level tensors would be

def bench_something(benchmark):
    benchmark.pedantic(lambda: None, rounds=1)
"""
LOOKS = """
import builtins

def bench_around(benchmark):
    benchmark.extra_info["found"] = getattr(builtins, "left_behind", None)
    benchmark.pedantic(lambda: None, rounds=1)
"""


@pytest.mark.fresh_interpreter  # a timing run: a child pytest per module
def test_each_module_runs_in_a_process_of_its_own(bench_env):
    bench_dir, out_dir = bench_env(leaves=LEAVES, looks=LOOKS)
    data = json.loads(run(bench_dir, out_dir).read_text())
    assert [benchmark_name(b["fullname"]) for b in data["benchmarks"]] == [
        "leaves.something", "looks.around"]  # one after the other, in one file
    assert data["benchmarks"][1]["extra_info"]["found"] is None
    assert data["machine_info"]["fieldguide"]["process_per_module"] is True


def test_a_machine_of_several_gpus_has_its_own_folder():
    from fieldguide.measuring.timings import link_summary, machine_slug

    assert machine_slug({"gpu_name": "NVIDIA H200", "gpu_count": 1}) == "nvidia-h200"
    assert machine_slug({"gpu_name": "NVIDIA H200", "gpu_count": 2}) == "2x-nvidia-h200"
    topology = ("\x1b[4mGPU0\tGPU1\tCPU Affinity\x1b[0m\n"
                "GPU0\t X \tNV18\t0-31\nGPU1\tNV18\t X \t0-31\n")
    assert link_summary(topology) == "NVLink (NV18)"
    assert link_summary("GPU0\t X \tSYS\nGPU1\tSYS\t X \n") == "PCIe (SYS)"
    assert link_summary(None) is None


def test_the_link_summary_tells_nvswitch_from_direct_links():
    from fieldguide.measuring.timings import link_summary

    header = "\x1b[4m\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\x1b[0m\n"
    switched = header + "".join(
        f"GPU{i}\t" + "\t".join("X" if i == j else "NV18" for j in range(4)) + "\t0-63\n"
        for i in range(4))
    assert link_summary(switched) == "NVLink (NV18) between every pair of the 4 GPUs"
    paired = header + ("GPU0\tX\tNV12\tSYS\tSYS\t0-31\nGPU1\tNV12\tX\tSYS\tSYS\t0-31\n"
                       "GPU2\tSYS\tSYS\tX\tNV12\t32-63\nGPU3\tSYS\tSYS\tNV12\tX\t32-63\n")
    assert link_summary(paired) == ("PCIe (SYS) between 4 pairs, NVLink (NV12) between 2 pairs"
                                    " of the 4 GPUs")
    assert link_summary(header) is None  # no matrix rows: nothing to tell
