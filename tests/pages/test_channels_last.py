"""Claims of docs/precision/channels-last.md."""


import pytest
import torch
import torch.nn as nn

pytestmark = pytest.mark.snippet("snippets/precision/channels_last.py")

# The page's bounds, used by its prose (timing-bound), the live GPU tests and the measured data.
CLAIMS = {"channels_last_speedup": 1.1}  # NHWC training step over NCHW, bf16 autocast


SPATIAL = ("Conv2d", "BatchNorm2d", "ReLU")


def test_converting_copies_the_input_and_keeps_its_shape(snippet):
    model, images = snippet.make_net(), snippet.make_batch()[0]
    model_cl, images_cl = snippet.to_channels_last(model, images)
    assert model_cl is model, "Module.to converts the parameters in place"
    assert images_cl.shape == images.shape and torch.equal(images_cl, images)
    assert images_cl.data_ptr() != images.data_ptr()
    assert snippet.is_channels_last(images_cl) and not snippet.is_channels_last(images)
    for p in model.parameters():
        assert p.dim() != 4 or snippet.is_channels_last(p)


def test_every_spatial_layer_keeps_the_layout_it_is_given(snippet):
    images = snippet.make_batch()[0]
    default = snippet.layouts(snippet.make_net(), images)
    nhwc = snippet.layouts(*snippet.to_channels_last(snippet.make_net(), images))
    assert [n for n, _ in default] == [n for n, _ in nhwc]
    spatial = [i for i, (name, _) in enumerate(nhwc) if name in SPATIAL]
    assert len(spatial) == 3 * 2 * len(snippet.WIDTHS)
    assert all(nhwc[i][1] == "NHWC" for i in spatial), nhwc
    assert all(default[i][1] == "NCHW" for i in spatial), default
    assert [kind for name, kind in nhwc if name in ("Flatten", "Linear")] == ["-", "-"]


def test_a_channels_last_model_converts_an_nchw_input_in_its_first_convolution(snippet):
    model = snippet.make_net().to(memory_format=torch.channels_last)
    images = snippet.make_batch()[0]  # NCHW, not converted
    seen = snippet.layouts(model, images)
    assert seen[0] == ("Conv2d", "NHWC")


def test_both_layouts_compute_the_same_network(snippet):
    images, _ = snippet.make_batch()
    model = snippet.make_net().eval()
    with torch.no_grad(), torch.autocast(snippet.device.type, dtype=torch.bfloat16):
        default = model(images).float()
        model_cl, images_cl = snippet.to_channels_last(model, images)
        nhwc = model_cl(images_cl).float()
    error = ((nhwc - default).norm() / default.norm()).item()
    assert error < 5e-2, error  # bf16 rounding through eight convolutions, not layout


def test_a_training_step_gives_the_same_loss_in_both_layouts(snippet):
    losses = {}
    for layout in ("contiguous", "channels_last"):
        model, optimizer, images, labels = snippet.make_training(layout)
        assert snippet.is_channels_last(images) == (layout == "channels_last")
        losses[layout] = [snippet.train_step(model, optimizer, images, labels).item()
                          for _ in range(2)]
    for a, b in zip(losses["contiguous"], losses["channels_last"], strict=True):
        assert abs(a - b) < 0.02 * abs(a), losses


def test_view_fails_and_contiguous_converts_back(snippet):
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    with pytest.raises(RuntimeError):
        x.view(2, -1)
    assert torch.equal(x.reshape(2, -1), x.contiguous().view(2, -1))
    assert not snippet.is_channels_last(x.contiguous())
    assert snippet.is_channels_last(x.contiguous(memory_format=torch.channels_last))


def test_conv_block_is_what_the_page_shows(snippet):
    block = snippet.conv_block(3, 8, 2)
    assert [type(m) for m in block] == [nn.Conv2d, nn.BatchNorm2d, nn.ReLU]
    assert block[0].bias is None, "BatchNorm follows: a bias would be cancelled"


def test_the_cudnn_autotuner_is_off_by_default_and_restored(snippet):
    """The page: cudnn.benchmark is False unless you set it; the helper turns it on for one
    call and restores it, and the step computes the same loss with it on."""
    import torch

    assert torch.backends.cudnn.benchmark is False
    seen = snippet.with_cudnn_autotuner(lambda: torch.backends.cudnn.benchmark)
    assert seen is True and torch.backends.cudnn.benchmark is False
    torch.manual_seed(0)
    model, optimizer, images, labels = snippet.make_training("channels_last")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    plain = snippet.train_step(model, optimizer, images, labels)
    model.load_state_dict(state)
    tuned = snippet.with_cudnn_autotuner(snippet.train_step, model, optimizer, images, labels)
    torch.testing.assert_close(tuned, plain, rtol=2e-2, atol=2e-2)


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_channels_last_is_faster_live(snippet):
    times = {layout: snippet.median_seconds(snippet.train_step, *snippet.make_training(layout),
                                            repeats=10)
             for layout in ("contiguous", "channels_last")}
    assert times["contiguous"] > times["channels_last"], times


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) --------

def test_channels_last_speedup_in_every_run(measured):
    nchw, nhwc = (f"channels_last.train_step[{k}]" for k in ("contiguous", "channels_last"))
    for run in measured(nchw, nhwc):
        speedup = run.value(nchw) / run.value(nhwc)
        assert speedup >= CLAIMS["channels_last_speedup"], (run, speedup)
