"""Claims of docs/precision/exercises.md: every solution is correct, and faster where measured."""


import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

pytestmark = pytest.mark.snippet("snippets/precision/exercises.py")

# The page's bounds, used by its prose (timing-bound), the live GPU tests and the measured data.
CLAIMS = {
    "mlp_speedup": 2.0,
    "mlp_width_speedup": 2.0,     # the width fix alone, both under autocast
    "loader_speedup": 2.0,
    "tokens_speedup": 2.0,
    "tokens_width_speedup": 1.5,  # the sizes fix alone, both under autocast
    "loop_speedup": 5.0,
    "device_busy": 0.85,  # kernels fill at least 85 % of a timed step (or loop): GPU-bound
    "loss_gap": 0.03,  # the mixed-precision loop's losses within 3 % of the float32 loop's
}


def linears(model):
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


# --- Exercise 1 ---------------------------------------------------------------------------------

def test_exercise_1_widths_are_odd_before_and_multiples_of_64_after(snippet):
    before = [m.out_features for m in linears(snippet.mlp_before)][:2]
    after = [m.out_features for m in linears(snippet.mlp_after)][:2]
    assert all(w % 2 == 1 for w in before), before
    assert all(w % 64 == 0 for w in after), after


def test_exercise_1_solution_runs_in_bf16_and_learns(snippet):
    model = snippet.make_mlp(hidden=64)
    outputs = []
    hook = model[2].register_forward_hook(lambda m, args, out: outputs.append(out.dtype))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = [snippet.mlp_step_after(model, optimizer) for _ in range(10)]
    hook.remove()
    assert set(outputs) == {torch.bfloat16}
    assert losses[-1] < losses[0], losses
    assert all(p.dtype == torch.float32 for p in model.parameters())


# --- Exercise 2 ---------------------------------------------------------------------------------

def epoch_contents(loader):
    """Every (image, label) of one epoch, in an order-free form."""
    items = []
    for images, labels in loader:
        items += [(image.numpy().tobytes(), int(label))
                  for image, label in zip(images, labels, strict=True)]
    return sorted(items)


def test_exercise_2_fixed_loader_yields_the_same_items(snippet):
    assert snippet.loader_before.num_workers == 0
    assert snippet.loader_after.num_workers >= 1 and snippet.loader_after.persistent_workers
    assert snippet.loader_after.pin_memory == (snippet.device.type == "cuda")
    items = (snippet.dataset[i] for i in range(len(snippet.dataset)))
    everything = sorted((image.numpy().tobytes(), label) for image, label in items)
    assert len({image for image, _ in everything}) == len(snippet.dataset)
    for _ in range(2):  # two epochs: the persistent workers serve the second one too
        assert epoch_contents(snippet.loader_before) == everything
        assert epoch_contents(snippet.loader_after) == everything


def test_exercise_2_items_are_deterministic_and_shaped_as_images(snippet):
    image, label = snippet.dataset[3]
    again, _ = snippet.dataset[3]
    assert torch.equal(image, again) and image.shape == (3, snippet.SIDE, snippet.SIDE)
    assert 0 <= label < snippet.CLASSES


def test_exercise_2_epoch_trains_with_either_loader(snippet):
    for loader, non_blocking in ((snippet.loader_before, False), (snippet.loader_after, True)):
        model = snippet.make_cnn()
        before = [p.detach().clone() for p in model.parameters()]
        snippet.cnn_epoch(model, torch.optim.SGD(model.parameters(), lr=0.01), loader,
                          non_blocking)
        assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(),
                                                         strict=True))


# --- Exercise 3 ---------------------------------------------------------------------------------

def test_exercise_3_pads_the_vocabulary_to_a_multiple_of_64(snippet):
    assert snippet.VOCAB % 2 == 1
    assert snippet.PADDED_VOCAB % 64 == 0 and 0 <= snippet.PADDED_VOCAB - snippet.VOCAB < 64
    assert snippet.token_model_after.head.out_features == snippet.PADDED_VOCAB
    assert snippet.token_model_after.head.in_features % 64 == 0


def test_exercise_3_padding_does_not_change_the_loss(snippet):
    """The padded model with the original weights (zero rows added) gives the same loss."""
    width = 64
    plain = snippet.TokenModel(snippet.VOCAB, width).to(snippet.device)
    padded = snippet.TokenModel(snippet.PADDED_VOCAB, width).to(snippet.device)
    with torch.no_grad():
        padded.mlp.load_state_dict(plain.mlp.state_dict())
        for name in ("embed.weight", "head.weight", "head.bias"):
            target = padded.get_parameter(name).zero_()
            target[: snippet.VOCAB] = plain.get_parameter(name)
        tokens, targets = snippet.tokens, snippet.targets
        expected = F.cross_entropy(plain(tokens), targets)
        got = F.cross_entropy(padded(tokens)[:, : snippet.VOCAB], targets)
        unsliced = F.cross_entropy(padded(tokens), targets)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)  # kernels may differ
    assert not torch.isclose(unsliced, expected, rtol=1e-5, atol=1e-5), \
        "the padded classes would enter the loss without the slice"


def test_exercise_3_both_steps_train(snippet):
    for step, model in ((snippet.token_step_before, snippet.TokenModel(snippet.VOCAB, 32)),
                        (snippet.token_step_after, snippet.TokenModel(snippet.PADDED_VOCAB, 32))):
        model = model.to(snippet.device)
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        losses = [step(model, optimizer, snippet.tokens, snippet.targets) for _ in range(5)]
        assert losses[-1] < losses[0], losses


# --- Exercise 4 ---------------------------------------------------------------------------------

def train_clipping_scaled_gradients(model, optimizer, batches, max_norm=1.0):
    """The classic mistake, for the control below: clip before unscale_."""
    device = next(model.parameters()).device.type
    scaler = torch.amp.GradScaler(device)
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # sees gradients x 65536
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.detach())
    return torch.stack(losses)


@pytest.fixture(scope="module")
def fp32_losses(snippet):
    return snippet.train_fp32(*snippet.make_problem())


def test_exercise_4_the_float32_loop_learns(fp32_losses):
    assert fp32_losses[-1] < 0.95 * fp32_losses[0], fp32_losses


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_exercise_4_solution_keeps_the_losses(snippet, fp32_losses, dtype):
    losses, scaler = snippet.train_mixed(*snippet.make_problem(), dtype=dtype)
    gap = ((losses - fp32_losses).abs() / fp32_losses).max().item()
    assert gap < CLAIMS["loss_gap"], gap
    assert scaler.is_enabled() == (dtype == torch.float16)


def test_exercise_4_clipping_before_unscale_would_not_train(snippet, fp32_losses):
    """The control: with the mistake the same test fails, so the one above can fail."""
    losses = train_clipping_scaled_gradients(*snippet.make_problem())
    gap = ((losses - fp32_losses).abs() / fp32_losses).max().item()
    assert gap > 2 * CLAIMS["loss_gap"], gap


def test_exercise_4_solution_survives_a_batch_that_overflows(snippet):
    model, optimizer, batches = snippet.make_problem(steps=6)
    x, y = batches[2]
    batches[2] = (torch.full_like(x, float("inf")), y)  # its loss and gradients are not finite
    losses, scaler = snippet.train_mixed(model, optimizer, batches)
    assert not torch.isfinite(losses[2])
    assert all(torch.isfinite(p).all() for p in model.parameters()), "the bad step was skipped"
    assert scaler.get_scale() == 2.0**15  # halved once, from 2^16


# --- Speed, live on the GPU (loose bounds: these run on a shared, noisy machine) ---------------

@pytest.mark.gpus(1)
@pytest.mark.timed
def test_exercise_1_solution_is_faster_live(snippet):
    def sgd(model):
        return torch.optim.SGD(model.parameters(), lr=0.01)

    before = snippet.median_seconds(snippet.mlp_step_before, snippet.mlp_before,
                                    sgd(snippet.mlp_before))
    after = snippet.median_seconds(snippet.mlp_step_after, snippet.mlp_after,
                                   sgd(snippet.mlp_after))
    assert before > CLAIMS["mlp_speedup"] * after, (before, after)


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) --------

PAIRS = {"mlp": ("before", "after"), "loader": ("before", "after"),
         "tokens": ("before", "after"), "loop": ("fp32", "mixed"),
         "mlp_width": ("autocast-only", "after"), "tokens_width": ("autocast-only", "after")}


@pytest.mark.parametrize("pair", list(PAIRS))
def test_every_solution_is_faster_in_every_run(measured, pair):
    """Ratios within one run: the loader's times move with the host, their ratio less so."""
    exercise = pair.removesuffix("_width")
    before, after = (f"exercises.{exercise}[{v}]" for v in PAIRS[pair])
    for run in measured(before, after):
        speedup = run.value(before) / run.value(after)
        assert speedup >= CLAIMS[f"{pair}_speedup"], (run, pair, speedup)


@pytest.mark.parametrize("exercise", ["mlp", "tokens", "loop"])
def test_timed_steps_are_gpu_bound_in_every_run(measured, exercise):
    """The kernels' time (profiler) fills each timed step: the ratios compare GPU work."""
    versions = {"mlp": ("before", "autocast-only", "after"),
                "tokens": ("before", "autocast-only", "after"), "loop": ("fp32", "mixed")}
    names = [f"exercises.{exercise}[{v}]" for v in versions[exercise]]
    for run in measured(*names):
        for name in names:
            busy = run.value(name, "device_busy_pct") / 100
            assert busy >= CLAIMS["device_busy"], (run, name, busy)
