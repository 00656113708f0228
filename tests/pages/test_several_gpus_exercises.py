"""Claims of docs/several-gpus/several-gpus-exercises.md, in two gloo processes on the CPU."""

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

pytestmark = pytest.mark.snippet("snippets/several_gpus/several_gpus_exercises.py")


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
    reference = torch.tensor(snippet.gradients_of_one_process())
    for grads in snippet.launch(snippet.gradients_after_sync):
        torch.testing.assert_close(torch.tensor(grads), snippet.WORLD_SIZE * reference)


def test_averaged_gradients_are_the_one_process_gradients_on_every_rank(snippet):
    reference = torch.tensor(snippet.gradients_of_one_process())
    first, second = snippet.launch(snippet.gradients_averaged)
    assert first == second, "every rank holds the same gradients, so the replicas stay equal"
    torch.testing.assert_close(torch.tensor(first), reference)
