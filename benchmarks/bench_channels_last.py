"""Benchmarks behind docs/precision/channels-last.md.

`train_step`: one bf16 autocast training step of the page's convolutional network on BATCH
images of IMAGE x IMAGE, with the default (contiguous, NCHW) layout and with channels_last
(NHWC) weights and input. `ops` = images, so `per_op` is the time per image.
Budget on an H100: about 4 s.
"""

import pytest
import torch

from snippets.precision import channels_last as snippet

pytestmark = [pytest.mark.snippet("snippets/precision/channels_last.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {"train_step": "Training step, {images} images of {image} × {image}, {layout}"}
WORDS = {"contiguous": "NCHW (the default)", "channels_last": "`channels_last` (NHWC)"}


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def bench_train_step(gpu_benchmark, layout):
    model, optimizer, images, labels = snippet.make_training(layout)
    gpu_benchmark.extra_info.update(
        layout=layout, images=snippet.BATCH, image=snippet.IMAGE, ops=snippet.BATCH,
        widths=list(snippet.WIDTHS), dtype="bfloat16", shape=list(images.shape))
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(snippet.train_step, model, optimizer, images, labels, rounds=20,
                  warmup_rounds=5)
    gpu_benchmark.extra_info["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
