"""Claims of docs/several-gpus/several-gpus-exercises.md, in two gloo processes on the CPU."""

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, DistributedSampler

from tests.helpers import within

pytestmark = pytest.mark.snippet("snippets/several_gpus/several_gpus_exercises.py")


@pytest.fixture(autouse=True)
def spawn_where_fork_cannot_run_autograd(snippet, monkeypatch):
    """Under pytest-xdist launch() forks (a worker's __main__ has no file). On a machine with a
    GPU, earlier tests in this worker ran backward passes, which start autograd's GPU threads,
    and a child forked after that cannot run one: there the children are spawned (the snippet's
    functions are importable). Without a GPU forking works, and is what a notebook does."""
    if torch.accelerator.is_available():  # any accelerator's devices start such threads
        monkeypatch.setattr(snippet, "start_method", lambda: "spawn")


def test_without_a_sampler_every_process_sees_the_whole_dataset(snippet):
    first, second = snippet.launch(snippet.samples_seen)
    everything = list(range(len(snippet.DATASET)))
    for epoch in range(2):
        assert sorted(first[epoch]) == sorted(second[epoch]) == everything


def test_the_sharded_processes_split_every_epoch_between_them(snippet):
    first, second = snippet.launch(snippet.samples_seen_sharded)
    for epoch in range(2):
        assert not set(first[epoch]) & set(second[epoch]), "a sample seen by both"
        assert sorted(first[epoch] + second[epoch]) == list(range(len(snippet.DATASET)))
        assert len(first[epoch]) == len(second[epoch]), "equal shares: no rank waits"
    assert first[0] != first[1], "set_epoch gives every epoch a new order"


def test_without_set_epoch_every_epoch_repeats_the_first_order(snippet):
    """What the solution's set_epoch prevents (same sampler, no process group needed)."""
    sampler = DistributedSampler(snippet.DATASET, num_replicas=2, rank=0, shuffle=True, seed=0)
    loader = DataLoader(snippet.DATASET, batch_size=8, sampler=sampler)
    epochs = [[int(i) for (batch,) in loader for i in batch] for _ in range(2)]
    assert epochs[0] == epochs[1]


def test_summed_gradients_are_world_size_times_too_large(snippet):
    reference = torch.tensor(snippet.launch(snippet.reference_gradients, world_size=1)[0])
    for grads in snippet.launch(snippet.gradients_after_sync):
        torch.testing.assert_close(torch.tensor(grads), snippet.WORLD_SIZE * reference)


def test_averaged_gradients_are_the_one_process_gradients_on_every_rank(snippet):
    reference = torch.tensor(snippet.launch(snippet.reference_gradients, world_size=1)[0])
    first, second = snippet.launch(snippet.gradients_averaged)
    assert first == second, "every rank holds the same gradients, so the replicas stay equal"
    torch.testing.assert_close(torch.tensor(first), reference)


BARRIERS_BEFORE_WORK = []  # in each forked child: the barriers it passed before its work


def barriers_passed(rank, world_size):
    return len(BARRIERS_BEFORE_WORK)


def test_every_process_passes_a_barrier_before_its_work(snippet, monkeypatch):
    """launch's start barrier: no process starts its work before every process has joined.
    Without it a process whose work sends nothing (exercise 1's) could finish and close its
    connections while another was still connecting to it: that one's init_process_group then
    failed with gloo's "Connection closed by peer" (7 of 500 launches of such work, on a busy
    2-core machine; `make stress` launches it; pytorch/pytorch#61396 names the same race). The
    race is inside gloo's connect, so this checks the barrier, and the stress check the race."""
    barrier = dist.barrier

    def counted(*args, **kwargs):
        barrier(*args, **kwargs)
        BARRIERS_BEFORE_WORK.append(1)

    monkeypatch.setattr(snippet, "start_method", lambda: "fork")  # the children inherit the patch
    monkeypatch.setattr(snippet.dist, "barrier", counted)
    assert launched(snippet, barriers_passed) == [1, 1]


def many_numbers(rank, world_size):
    return [float(i) for i in range(200_000)]  # far more than a pipe's 64 KiB buffer


def test_launch_returns_a_result_larger_than_a_pipes_buffer(snippet):
    """Joining before reading would hang here: the child waits for its result to be read."""
    import threading

    returned = []
    runner = threading.Thread(target=lambda: returned.append(
        snippet.launch(many_numbers, world_size=1)), daemon=True)
    runner.start()
    runner.join(timeout=60)
    assert not runner.is_alive(), "launch hangs on a result larger than a pipe's buffer"
    assert returned == [[[float(i) for i in range(200_000)]]]


# Each fails after a barrier: the group is whole by then, so rank 0 ends normally and rank 1's is
# the only failure. Failing during the group's set-up made rank 0's gloo connect fail too
# ("Connection closed by peer"), and launch raised whichever failure it saw first (a make test
# run, 2026-11-27).
def fails_on_rank_1(rank, world_size):
    dist.barrier()
    if rank == 1:
        raise ValueError("rank 1 cannot go on")
    return rank


def dies_on_rank_1(rank, world_size):
    dist.barrier()
    if rank == 1:
        os._exit(3)  # as a crash ends a process: no exception, no result
    return rank


def launched(snippet, work, timeout=120):
    """What launch(work) raised, or its result; fails if it is still waiting after timeout."""
    return within(timeout, lambda: snippet.launch(work))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_process_that_raises_makes_launch_raise_its_error(snippet, monkeypatch, method):
    """Not a wait for a result that never comes: the child's traceback, in the parent.
    Both start methods: spawn from a script, fork in a notebook (and in pytest-xdist's workers
    on a machine without a GPU)."""
    monkeypatch.setattr(snippet, "start_method", lambda: method)
    error = launched(snippet, fails_on_rank_1)
    assert isinstance(error, mp.ProcessRaisedException), error
    assert "ValueError: rank 1 cannot go on" in str(error)


def test_a_process_that_dies_makes_launch_raise(snippet):
    error = launched(snippet, dies_on_rank_1)
    assert isinstance(error, mp.ProcessExitedException), error
    assert error.exit_code == 3


def test_a_dataset_that_does_not_divide_is_padded_with_repeats_or_cut(snippet):
    """The page: shares are disjoint only when the dataset divides; else padded or cut."""
    from torch.utils.data import TensorDataset

    five = TensorDataset(torch.arange(5))

    def shares(drop_last):
        return [list(DistributedSampler(five, num_replicas=2, rank=rank, shuffle=True,
                                        seed=0, drop_last=drop_last))
                for rank in range(2)]

    first, second = shares(drop_last=False)
    assert len(first) == len(second) == 3, "equal shares, padded"
    assert set(first) | set(second) == set(range(5)) and set(first) & set(second), \
        "every sample seen, one of them twice"
    first, second = shares(drop_last=True)
    assert len(first) == len(second) == 2, "equal shares, cut"
    assert not set(first) & set(second) and len(set(first) | set(second)) == 4, \
        "no sample twice, one not at all"
