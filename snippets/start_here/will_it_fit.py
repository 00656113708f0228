"""Will it fit, how fast: back-of-envelope estimators for a training job, in plain Python.

Memory of a training step per GPU (weights, gradients, optimizer state, saved activations,
with checkpointing and micro-batches, alone, under DDP, FSDP2 and tensor parallelism), a step's
lower bound from its FLOPs and bytes (the roofline), a host-to-device copy, a collective from
its bus bandwidth, the pipeline bubble, and the tile and wave quantization of a matrix product.

Each function is arithmetic on its arguments and nothing else: the site's calculators run the
same functions, translated to JavaScript at build time, and the page compares each with the
GPU runs that measured the same case.

Run it anywhere: python -m snippets.start_here.will_it_fit
"""

GPUS_NEEDED = 0  # arithmetic only: no GPU, no PyTorch

# --8<-- [start:memory]
import math

GIB = 2**30
OPTIMIZER_STATES = {"sgd": 0, "sgd_momentum": 1, "adam": 2, "adamw": 2}
# bytes a number: of weights, gradients and optimizer state; of what autograd saves
STATE_BYTES = {"fp32": 4, "autocast": 4, "bf16": 2}
SAVED_BYTES = {"fp32": 4, "autocast": 2, "bf16": 2}


def state_bytes_per_parameter(optimizer="adam", precision="fp32"):
    """Bytes a parameter costs for the whole run: its weight, its gradient and its
    optimizer state (Adam keeps two numbers a parameter, SGD with momentum one, plain
    SGD none).

    precision: "fp32"; "autocast" (float32 weights, products in bfloat16: still 4
    bytes a number here, so 16 with Adam); "bf16" (bfloat16 weights, gradients and
    state)."""
    return STATE_BYTES[precision] * (2 + OPTIMIZER_STATES[optimizer])


def saved_bytes_per_layer(tokens, width, saved_widths=10, precision="fp32", split=1,
                          whole_widths=0):
    """Bytes autograd saves for backward in one layer: `saved_widths` numbers of
    `width` per token. A feed-forward block x + down(gelu(up(norm(x)))) with a hidden
    width of 4 x width saves 10: the norm's input (1), up's input (1), gelu's input
    (4), down's input (4). A Linear + ReLU layer saves 1 (the ReLU's output, which is
    the next Linear's input). A pre-norm transformer block with attention saves 17.

    Split over `split` GPUs by tensor parallelism, each GPU keeps its share of them
    but `whole_widths` whole: what tensor parallelism does not split, both norms'
    inputs and their outputs, the inputs of the column-split products (4 in a
    transformer block without dropout; 2 with sequence parallelism, which splits
    the norms but here saves the products' gathered inputs whole)."""
    widths = whole_widths + (saved_widths - whole_widths) / split
    return tokens * width * widths * SAVED_BYTES[precision]


def training_memory(parameters, layers, tokens, width, saved_widths=10,
                    optimizer="adam", precision="fp32", checkpoint=False,
                    micro_batches=1, gpus=1, parallel="ddp", whole_widths=0,
                    bucket_view=False):
    """Bytes one GPU holds at the peak of a training step, part by part.

    parameters: of the whole model; layers: how many layers save activations;
    tokens: the batch one GPU sees in a step (samples x sequence length); parallel:
    "ddp" (each GPU holds everything), "fsdp2" (weights, gradients and state sharded
    over `gpus`) or "tp" (tensor parallelism: those and the saved activations split
    over `gpus`, but for `whole_widths` of them, as in saved_bytes_per_layer);
    bucket_view: DDP with gradient_as_bucket_view=True, the gradients living in its
    buckets (no second copy).
    """
    per_number = STATE_BYTES[precision]
    shards = 1 if parallel == "ddp" else gpus
    weights = parameters * per_number / shards
    gradients = parameters * per_number / shards
    optimizer_state = parameters * per_number * OPTIMIZER_STATES[optimizer] / shards
    # DDP all-reduces the gradients from buckets: a second copy of them (unless
    # gradient_as_bucket_view=True); FSDP2 gathers a layer's full weights to use it,
    # and the next layer's meanwhile (its all-gather overlaps this layer's compute).
    buckets = gradients if parallel == "ddp" and gpus > 1 and not bucket_view else 0
    fsdp2 = parallel == "fsdp2" and gpus > 1
    gathered = min(2, layers) * parameters * per_number / layers if fsdp2 else 0
    # autocast keeps a bfloat16 copy of each weight it used, for backward: of the
    # whole weight under FSDP2, which gathers it first; only TP splits activations
    split = gpus if parallel == "tp" else 1
    copies = parameters * 2 / split if precision == "autocast" else 0
    chunk = tokens / micro_batches  # activations of one micro-batch at a time
    layer = saved_bytes_per_layer(chunk, width, saved_widths, precision, split,
                                  whole_widths if split > 1 else 0)
    if checkpoint:  # each layer's input is kept; one layer is recomputed at a time
        # a layer's input is the residual stream, in the weights' type: float32 under
        # autocast, whose bfloat16 products are added back to float32
        activations = layers * chunk * width * per_number + layer
    else:
        activations = layers * layer
    total = (weights + gradients + optimizer_state + buckets + gathered + copies
             + activations)
    return {"weights": weights, "gradients": gradients, "optimizer": optimizer_state,
            "buckets": buckets, "gathered": gathered, "copies": copies,
            "activations": activations, "total": total}
# --8<-- [end:memory]


# --8<-- [start:roofline]
def step_lower_bound(flops, nbytes, peak_flops, bandwidth):
    """The least time a step can take: its FLOPs at the GPU's measured peak rate, or
    its bytes at the measured memory bandwidth, whichever is longer. A measured step
    above it spends the difference elsewhere: launches, the host, kernels far from
    either roof."""
    compute = flops / peak_flops
    memory = nbytes / bandwidth
    return {"compute_s": compute, "memory_s": memory, "bound_s": max(compute, memory),
            "intensity": flops / nbytes, "ridge": peak_flops / bandwidth}
# --8<-- [end:roofline]


# --8<-- [start:copy]
def copy_seconds(nbytes, link_bandwidth, pinned=True, host_bandwidth=0, latency=0):
    """Host-to-device (or back) copy time. From pinned memory the copy engine reads the
    host directly: the link's speed. From pageable memory the driver first copies
    through a pinned staging buffer, at the host's `host_bandwidth` (0: unknown, counted
    as free, so the estimate is a lower bound)."""
    seconds = latency + nbytes / link_bandwidth
    if not pinned and host_bandwidth > 0:
        seconds = seconds + nbytes / host_bandwidth
    return seconds
# --8<-- [end:copy]


# --8<-- [start:collective]
TRAFFIC = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}


def collective_seconds(nbytes, gpus, bus_bandwidth, op="all_reduce", latency=0):
    """Time of a collective on `nbytes` (the whole tensor) from its bus bandwidth, as
    NCCL's tests report it: a ring all-reduce moves 2(n-1)/n of the tensor over each
    GPU's link, an all-gather or reduce-scatter (n-1)/n of the whole result."""
    if gpus < 2:
        return 0
    return latency + nbytes * TRAFFIC[op] * (gpus - 1) / gpus / bus_bandwidth
# --8<-- [end:collective]


# --8<-- [start:pipeline]
def bubble_fraction(stages, micro_batches):
    """Share of a GPipe or 1F1B step each stage sits idle: (S-1)/(M+S-1)."""
    return (stages - 1) / (micro_batches + stages - 1)


def pipeline_seconds(work, stages, micro_batches):
    """A step's time when `work` seconds of compute are split evenly over `stages`."""
    return work / stages * (micro_batches + stages - 1) / micro_batches
# --8<-- [end:pipeline]


# --8<-- [start:waves]
def matmul_waves(m, n, tile_m=128, tile_n=256, sms=132):
    """How an (m x k) @ (k x n) product fills the GPU: output tiles of tile_m x tile_n,
    one per SM at a time (132 SMs on an H100 or H200 SXM), run in waves. `fill` is the
    share of the last wave's SMs that have work: a product with one tile more than a
    full wave takes a whole wave longer."""
    tiles = math.ceil(m / tile_m) * math.ceil(n / tile_n)
    waves = math.ceil(tiles / sms)
    useful = m * n / (waves * sms * tile_m * tile_n)
    return {"tiles": tiles, "waves": waves, "fill": tiles / (waves * sms),
            "useful": useful}


def matmul_seconds(m, n, k, peak_flops, tile_m=128, tile_n=256, sms=132):
    """Time of the product at the peak rate, paying for every wave in full."""
    shape = matmul_waves(m, n, tile_m, tile_n, sms)
    return 2 * m * n * k / peak_flops / shape["useful"]
# --8<-- [end:waves]


if __name__ == "__main__":
    step = training_memory(33_611_776, layers=16, tokens=16384, width=512)
    print(f"16 blocks of width 512 on 16384 tokens, float32 and Adam: "
          f"{step['total'] / GIB:.2f} GiB at the peak")
    print(f"a 1 GiB all-reduce on 4 GPUs at 350 GB/s: "
          f"{collective_seconds(GIB, 4, 350e9) * 1e3:.2f} ms")
    print(f"bubble of 4 stages, 16 micro-batches: {bubble_fraction(4, 16):.0%}")
    print(f"m = 1056, n = 8192 on 132 SMs: {matmul_waves(1056, 8192)}")
