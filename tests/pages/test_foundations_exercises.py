"""Claims of docs/foundations/foundations-exercises.md: the pipeline crosses the link twice and
computes the same values, the flops per byte moved are counted right, and the process pool runs
the pure-Python work in other processes with the same results."""

import os

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/foundations/foundations_exercises.py")


def count_copies(monkeypatch, fn, *args):
    """Calls of Tensor.to and Tensor.cpu while fn runs: one per trip over the link on a GPU."""
    trips = []
    to, cpu = torch.Tensor.to, torch.Tensor.cpu
    monkeypatch.setattr(torch.Tensor, "to", lambda t, *a, **k: trips.append("to") or to(t, *a, **k))
    monkeypatch.setattr(torch.Tensor, "cpu", lambda t, *a, **k: trips.append("cpu") or cpu(t, *a, **k))
    result = fn(*args)
    monkeypatch.undo()
    return result, trips


def test_the_pipeline_crosses_the_link_twice_instead_of_twice_per_step(monkeypatch, snippet):
    x = snippet.x[:4096]
    before, trips_before = count_copies(monkeypatch, snippet.pipeline_step_by_step, x)
    after, trips_after = count_copies(monkeypatch, snippet.pipeline_on_device, x)
    steps = len(snippet.STEPS)
    assert sorted(trips_before) == ["cpu"] * steps + ["to"] * steps
    assert sorted(trips_after) == ["cpu", "to"]
    assert isinstance(after, np.ndarray) and after.dtype == np.float32
    np.testing.assert_allclose(after, before, rtol=1e-6)


def test_flops_per_byte_moved(snippet):
    flops = snippet.flops_per_byte_moved
    assert flops("elementwise", 2**10) == flops("elementwise", 2**26) == 3 / 8, \
        "the elementwise work per byte never grows"
    for n in (64, 512, 4096):
        assert flops("matmul", n) == pytest.approx(n / 6), "2n^3 flops for 12n^2 bytes"
    assert flops("matmul", 4096) > 1000 * flops("elementwise", 2**26)
    with pytest.raises(ValueError, match="unknown kind"):
        flops("conv", 3)


def test_the_break_even_estimate_is_where_the_work_per_byte_reaches_f_over_b(snippet):
    """The page's hint: the CPU's time 2n^3/F equals the copies' 12n^2/B at n = 6F/B,
    which is where flops_per_byte_moved reaches F/B."""
    cpu_flops, link_bytes = 1.2e12, 8e9  # any rates: the identity holds for all
    n = 6 * cpu_flops / link_bytes
    assert 2 * n**3 / cpu_flops == pytest.approx(3 * n**2 * 4 / link_bytes)
    assert snippet.flops_per_byte_moved("matmul", n) == pytest.approx(cpu_flops / link_bytes)


def pid_of(_):
    return os.getpid()


def test_the_pool_counts_the_same_primes_in_other_processes(snippet):
    ranges = [(2, 2_000), (2_000, 4_000)]
    assert snippet.in_processes(snippet.count_primes, ranges) == \
        snippet.in_threads(snippet.count_primes, ranges) == [303, 247]
    pids = snippet.in_processes(pid_of, [None, None])
    assert os.getpid() not in pids, "the work ran in worker processes"


def test_a_notebook_forks_and_a_script_spawns(snippet, monkeypatch):
    import sys
    import types

    script = types.ModuleType("__main__")
    script.__file__ = "train.py"  # `python train.py`: spawned workers can import it
    monkeypatch.setitem(sys.modules, "__main__", script)
    assert snippet.start_method() == "spawn"
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # a kernel's
    assert snippet.start_method() == "fork"
