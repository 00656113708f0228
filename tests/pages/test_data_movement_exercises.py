"""Claims of docs/data-movement/data-movement-exercises.md: each fix gives the original's results,
the copy back is complete when read, and the GPU-resident epochs serve every row once."""

import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/data_movement/data_movement_exercises.py")


def test_the_overlapped_steps_compute_what_the_waiting_steps_compute(snippet):
    torch.testing.assert_close(snippet.steps_overlapped(snippet.pinned, snippet.weight),
                               snippet.steps_waiting(snippet.batches, snippet.weight))


def non_blocking_of_every_copy(monkeypatch, steps, *args):
    """Runs steps(*args), recording the non_blocking argument of every Tensor.to."""
    to = torch.Tensor.to
    recorded = []

    def recording_to(self, *a, **k):
        recorded.append(k.get("non_blocking", False))
        return to(self, *a, **k)

    with monkeypatch.context() as patch:
        patch.setattr(torch.Tensor, "to", recording_to)
        steps(*args)
    return recorded


def test_the_overlapped_steps_queue_their_copies_and_the_original_waits(snippet, monkeypatch):
    """The fix's copies are non_blocking, one per batch; the original's are not."""
    batches = len(snippet.batches)
    assert non_blocking_of_every_copy(monkeypatch, snippet.steps_overlapped,
                                      snippet.pinned, snippet.weight) == [True] * batches
    assert non_blocking_of_every_copy(monkeypatch, snippet.steps_waiting,
                                      snippet.batches, snippet.weight) == [False] * batches


@pytest.mark.gpus(1)
def test_the_batches_are_pinned_once_on_a_gpu(snippet):
    assert all(b.is_pinned() for b in snippet.pinned)
    assert not any(b.is_pinned() for b in snippet.batches), "pin_memory() returns a pinned copy"


def test_the_read_back_is_the_result(snippet):
    a = torch.randn(512, 512, device=snippet.device)
    expected = (a @ a).sum(dim=1).cpu()
    torch.testing.assert_close(torch.tensor(snippet.row_sums(a)), expected)


@pytest.mark.gpus(1)
def test_the_read_back_is_complete_behind_a_long_queue(snippet):
    a = torch.randn(4096, 4096, device="cuda")
    a @ a  # load the kernels: a first launch can block
    torch.cuda.synchronize()
    for _ in range(20):  # tens of milliseconds of work queued ahead of the copy
        a @ a
    got = torch.tensor(snippet.row_sums(a))
    torch.testing.assert_close(got, (a @ a).sum(dim=1).cpu())


@pytest.mark.gpus(1)
def test_reading_without_waiting_returns_what_the_buffer_held_before(snippet, monkeypatch):
    """The check above can fail: with the buffer filled with NaN beforehand, the original
    reads NaN while the copy still waits behind the queue."""
    empty = torch.empty
    monkeypatch.setattr(snippet.torch, "empty",
                        lambda *a, **k: empty(*a, **k).fill_(float("nan")))
    a = torch.randn(4096, 4096, device="cuda")
    a @ a
    empty(4096, pin_memory=True)  # freed at once: cached, so no cudaHostAlloc below
    torch.cuda.synchronize()
    for _ in range(20):
        a @ a
    assert torch.tensor(snippet.row_sums_too_early(a)).isnan().all()
    torch.cuda.synchronize()


def test_every_epoch_on_the_device_serves_every_row_once_with_its_label(snippet):
    features = torch.arange(2_000, dtype=torch.float32).unsqueeze(1).repeat(1, 4)
    labels = torch.arange(2_000)  # a row's label is its number: pairs stay checkable
    orders = []
    for _ in range(2):
        rows, sizes = [], []
        for x, y in snippet.epoch_on_device(features.to(snippet.device),
                                            labels.to(snippet.device), batch_size=300):
            assert torch.equal(x[:, 0].long(), y), "features and labels stay paired"
            rows += y.tolist()
            sizes.append(len(y))
        assert sorted(rows) == list(range(2_000)), "every row once per epoch"
        assert sizes == [300] * 6 + [200], "the loader's batches: the last one shorter"
        orders.append(rows)
    assert orders[0] != orders[1], "a new order every epoch"


def test_the_loader_serves_the_same_rows(snippet):
    features = torch.arange(1_000, dtype=torch.float32).unsqueeze(1)
    labels = torch.arange(1_000)
    sizes = [len(y) for _, y in snippet.epoch_with_loader(features, labels, batch_size=300)]
    rows = sorted(r for _, y in snippet.epoch_with_loader(features, labels) for r in y.tolist())
    assert sizes == [300, 300, 300, 100] and rows == list(range(1_000))
