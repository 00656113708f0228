"""channels_last (NHWC) against the default NCHW layout for a convolutional network.

Run it anywhere: python -m snippets.precision.channels_last
(on a CPU the same code runs a smaller batch of smaller images)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; the speedup is measured on a GPU

# --8<-- [start:setup]
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if device.type == "cuda":
    BATCH, IMAGE, WIDTHS = 128, 224, (64, 128, 256, 512)
else:  # a CPU gets a toy version of the same network
    BATCH, IMAGE, WIDTHS = 4, 32, (8, 16, 32, 64)


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize()


def median_seconds(fn, *args, repeats=20, warmup=3):
    """Median time of fn(*args), with the GPU drained before and after every call."""
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn(*args)
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
# --8<-- [end:setup]


# --8<-- [start:model]
def conv_block(channels_in, channels_out, stride):
    return nn.Sequential(
        nn.Conv2d(channels_in, channels_out, 3, stride, padding=1, bias=False),
        nn.BatchNorm2d(channels_out),
        nn.ReLU(inplace=True),
    )


def make_net(classes=1000, seed=0):
    """A plain VGG/ResNet-style stack: the channels double as the image halves."""
    torch.manual_seed(seed)
    layers, channels = [], 3
    for width in WIDTHS:
        layers += [conv_block(channels, width, 2), conv_block(width, width, 1)]
        channels = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes)]
    return nn.Sequential(*layers).to(device)


def make_batch(seed=0, classes=1000):
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g)
    labels = torch.randint(classes, (BATCH,), generator=g)
    return images.to(device), labels.to(device)
# --8<-- [end:model]


# --8<-- [start:convert]
def to_channels_last(model, images):
    """Both the weights and the input: the model once, every batch as it arrives."""
    model = model.to(memory_format=torch.channels_last)  # converts 4-d weights in place
    images = images.to(memory_format=torch.channels_last)  # a copy, same shape
    return model, images


def is_channels_last(x):
    return x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)
# --8<-- [end:convert]


# --8<-- [start:layouts]
def layouts(model, images):
    """The memory layout each layer's output had in a real forward pass."""
    seen = []

    def record(module, args, output):
        if output.dim() != 4:
            kind = "-"  # 2-d: no layout question
        else:
            kind = "NHWC" if is_channels_last(output) else "NCHW"
        seen.append((type(module).__name__, kind))

    hooks = [m.register_forward_hook(record) for m in model.modules()
             if not isinstance(m, nn.Sequential)]
    try:
        with torch.no_grad():
            model(images)
    finally:
        for hook in hooks:
            hook.remove()
    return seen
# --8<-- [end:layouts]


# --8<-- [start:train_step]
def train_step(model, optimizer, images, labels):
    """One bf16 mixed-precision step; the layout is whatever model and images have."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss.detach()


def make_training(layout):
    model = make_net()
    images, labels = make_batch()
    if layout == "channels_last":
        model, images = to_channels_last(model, images)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, optimizer, images, labels
# --8<-- [end:train_step]


# --8<-- [start:autotune]
def with_cudnn_autotuner(fn, *args, enabled=True):
    """fn(*args) with cuDNN's autotuner on (or off); the previous setting comes back.

    With torch.backends.cudnn.benchmark = True, the first convolution of each new
    input shape times cuDNN's algorithms and keeps the fastest for that shape.
    """
    saved = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = enabled
    try:
        return fn(*args)
    finally:
        torch.backends.cudnn.benchmark = saved
# --8<-- [end:autotune]


if __name__ == "__main__":
    # --8<-- [start:main]
    model, images = to_channels_last(make_net(), make_batch()[0])
    seen = layouts(model, images)
    flat = [name for name, kind in seen if kind == "-"]
    print(f"channels_last model: {sum(kind == 'NHWC' for _, kind in seen)} of {len(seen)} "
          f"layer outputs NHWC; 2-d, after the pooling: {', '.join(flat)}")
    times = {}
    for layout in ("contiguous", "channels_last"):
        times[layout] = median_seconds(train_step, *make_training(layout), repeats=10)
        print(f"{layout:14s} {BATCH} images of {IMAGE}x{IMAGE}, one training step: "
              f"{times[layout] * 1e3:.1f} ms")
    print(f"channels_last: {times['contiguous'] / times['channels_last']:.2f}x")
    # --8<-- [end:main]
