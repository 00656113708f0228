"""Claims of docs/first-steps/pytorch-on-a-gpu.md about its complete small training loop."""

import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/first_steps/training_loop.py")


def test_the_spirals_are_balanced_and_deterministic(snippet):
    points, labels = snippet.spirals(1000, torch.Generator().manual_seed(1))
    again, _ = snippet.spirals(1000, torch.Generator().manual_seed(1))
    assert points.shape == (1000, 2) and torch.equal(points, again)
    assert 400 < int(labels.sum()) < 600


def test_the_loop_learns_the_spirals(snippet):
    """The loss falls by a factor of several, and the network separates the two spirals."""
    logged, accuracy = snippet.logged, snippet.accuracy
    assert [step for step, _ in logged] == [0, 100, 200, 300, 400, 500, 599]
    assert logged[-1][1] < logged[0][1] / 4, logged
    assert accuracy > 0.9, accuracy


def test_the_data_and_the_model_live_on_the_chosen_device(snippet):
    assert snippet.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    points, _ = snippet.spirals(4, torch.Generator().manual_seed(0))
    assert points.device.type == "cpu"   # made on the CPU, as data from a file would be
