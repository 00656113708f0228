"""Claims of docs/memory/memory-exercises.md: every solution computes what its exercise asks."""

import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/memory/memory_exercises.py")

CLAIMS = {
    "allocator_gap": 0.01,  # the allocator's growth within 1 % of the prediction, on a GPU
}


def test_four_float32_numbers_per_parameter_is_what_the_tensors_hold(snippet):
    model = snippet.make_model(width=256, depth=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    parameters = sum(p.numel() for p in model.parameters())
    assert snippet.training_state_bytes(model, optimizer) == parameters * 4, \
        "before the first step: weights only (no gradients, no Adam state yet)"
    snippet.one_step(model, optimizer, torch.randn(8, 256, device=snippet.device))
    assert snippet.training_state_bytes(model, optimizer) == parameters * 4 * 4
    assert snippet.counted == snippet.predicted_bytes == snippet.parameters * 16


def test_sgd_without_momentum_holds_no_state_so_the_rule_is_adams(snippet):
    model = snippet.make_model(width=128, depth=2)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    snippet.one_step(model, sgd, torch.randn(8, 128, device=snippet.device))
    parameters = sum(p.numel() for p in model.parameters())
    assert snippet.training_state_bytes(model, sgd) == parameters * 4 * 2


@pytest.mark.gpus(1)
def test_the_allocator_grows_by_the_prediction_on_a_gpu(snippet):
    batch = torch.randn(64, 1024, device="cuda")
    measured = snippet.allocated_by_training_state(batch)
    assert measured == pytest.approx(snippet.predicted_bytes, rel=CLAIMS["allocator_gap"])


def test_accumulated_gradients_are_the_full_batchs(snippet):
    model = snippet.make_model(width=64, depth=3)
    inputs, targets = torch.randn(64, 64), torch.randn(64, 64)
    inputs, targets = inputs.to(snippet.device), targets.to(snippet.device)
    full = snippet.full_batch_gradients(model, inputs, targets)
    for micro_batches in (2, 4, 8):
        pieces = snippet.accumulated_gradients(model, inputs, targets, micro_batches)
        for a, b in zip(full, pieces, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


def test_unequal_micro_batches_are_weighed_by_their_rows(snippet):
    """5 rows in 4 chunks are 3 chunks of 2, 2 and 1 rows: dividing by 4 is wrong."""
    import torch.nn.functional as F

    model = snippet.make_model(width=64, depth=3)
    inputs = torch.randn(5, 64, device=snippet.device)
    targets = torch.randn(5, 64, device=snippet.device)
    assert [len(x) for x in inputs.chunk(4)] == [2, 2, 1]
    full = snippet.full_batch_gradients(model, inputs, targets)
    pieces = snippet.accumulated_gradients(model, inputs, targets, micro_batches=4)
    for a, b in zip(full, pieces, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    model.zero_grad(set_to_none=True)  # the control: divide by micro_batches
    for x, y in zip(inputs.chunk(4), targets.chunk(4), strict=True):
        (F.mse_loss(model(x), y) / 4).backward()
    assert not all(torch.allclose(p.grad, a, rtol=1e-3)
                   for a, p in zip(full, model.parameters(), strict=True))


def test_without_the_division_the_gradients_are_micro_batches_times_too_large(snippet):
    """The check above can fail: the classic mistake gives 4x the gradients."""
    import torch.nn.functional as F

    model = snippet.make_model(width=64, depth=3)
    inputs = torch.randn(64, 64, device=snippet.device)
    targets = torch.randn(64, 64, device=snippet.device)
    full = snippet.full_batch_gradients(model, inputs, targets)
    model.zero_grad(set_to_none=True)
    for x, y in zip(inputs.chunk(4), targets.chunk(4), strict=True):
        F.mse_loss(model(x), y).backward()
    for a, p in zip(full, model.parameters(), strict=True):
        torch.testing.assert_close(p.grad, 4 * a, rtol=1e-4, atol=1e-6)


def saved_bytes(fn, model, batches):
    """Bytes autograd keeps for a backward pass while fn(model, batches) runs:
    each storage once (a ReLU's output is saved by the ReLU and by the next
    layer), leaving out the parameters and the inputs, which exist anyway."""
    def storage(tensor):
        return tensor.untyped_storage().data_ptr()

    existing = {storage(t) for t in [*model.parameters(), *batches]}
    saved = {}

    def pack(tensor):
        if storage(tensor) not in existing:
            saved[storage(tensor)] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = fn(model, batches)
    return sum(saved.values()), result


def test_evaluation_with_a_graph_saves_activations_for_every_batch_and_without_none(snippet):
    model = snippet.make_model(width=64, depth=3, outputs=10)
    batches = [torch.randn(256, 64, device=snippet.device) for _ in range(8)]
    kept_4, _ = saved_bytes(snippet.evaluate, model, batches[:4])
    kept_8, predictions = saved_bytes(snippet.evaluate, model, batches)
    outputs_8 = 8 * 256 * 10 * 4
    hidden_8 = 8 * 256 * 64 * 4  # one hidden layer's activations for eight batches
    assert kept_8 == 2 * kept_4, "the saved activations grow with every batch kept"
    assert kept_8 == 2 * hidden_8, "the outputs of the two ReLUs, once each"
    assert kept_8 > 10 * outputs_8, "over ten times the outputs' own bytes"
    none, same = saved_bytes(snippet.evaluate_without_graph, model, batches)
    assert none == 0
    assert torch.equal(same, predictions)


@pytest.mark.gpus(1)
def test_evaluation_without_a_graph_peaks_lower_on_a_gpu(snippet):
    model = snippet.make_model(width=1024, depth=3, outputs=10)
    batches = [torch.randn(4096, 1024, device="cuda") for _ in range(8)]
    saved_activations = 8 * 2 * 4096 * 1024 * 4  # two ReLU outputs per batch
    peaks = []
    for evaluate in (snippet.evaluate, snippet.evaluate_without_graph):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        evaluate(model, batches)
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated() - base)
    # with the graph, the peak holds all eight batches' activations; without it, a
    # batch's few temporaries at a time (about 3 of the 16 MiB hidden tensors)
    assert peaks[0] >= saved_activations, peaks
    assert peaks[1] < peaks[0] / 4, peaks
