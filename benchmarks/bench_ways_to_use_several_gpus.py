"""Benchmarks behind docs/several-gpus/ways-to-use-several-gpus.md: the link between two GPUs.

Needs two GPUs. Budget on two H200s: 11 copy sizes x 30 rounds, 11 all-reduce sizes x 20 rounds
of 20 to 50 operations, plus starting the follower process and NCCL: about 20 s.
"""

import functools

import pytest
import torch

from benchmarks import two_ranks
from snippets.several_gpus import all_reduce_bandwidth as all_reduce
from snippets.several_gpus import ways_to_use_several_gpus as snippet

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "p2p_copy": "Copy from GPU 0 to GPU 1, {bytes}",
    "all_reduce": "All-reduce of {message_bytes} in bf16 over {world_size} GPUs (NCCL)",
    "all_reduce_graph": "All-reduce of {message_bytes} in bf16 over {world_size} GPUs (NCCL), "
                        "replayed from a CUDA graph",
}
WORDS = {}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "p2p_copy[1KiB]": "Python and the copy's launch",
    "p2p_copy[4KiB]": "Python and the copy's launch",
    "p2p_copy[16KiB]": "Python and the copy's launch",
    "p2p_copy[64KiB]": "Python and the copy's launch",
    "p2p_copy[256KiB]": "Python and the copy's launch",
    "all_reduce[1KiB]": "Python, launches and NCCL's per-call latency",
    "all_reduce[4KiB]": "Python, launches and NCCL's per-call latency",
    "all_reduce[16KiB]": "Python, launches and NCCL's per-call latency",
    "all_reduce[64KiB]": "Python, launches and NCCL's per-call latency",
    "all_reduce[256KiB]": "Python, launches and NCCL's per-call latency",
    "all_reduce[1MiB]": "Python, launches and NCCL's per-call latency",
}

KiB, MiB, GiB = 2**10, 2**20, 2**30
SIZES = [KiB * 4**i for i in range(11)]  # 1 KiB ... 1 GiB


def size_label(nbytes):
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= scale:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


def synchronize_both():
    for gpu in (0, 1):
        torch.cuda.synchronize(gpu)


@pytest.mark.snippet("snippets/several_gpus/ways_to_use_several_gpus.py")
@pytest.mark.gpus(2)
@pytest.mark.parametrize("nbytes", SIZES, ids=[size_label(s) for s in SIZES])
def bench_p2p_copy(benchmark, nbytes):
    """One copy GPU 0 -> GPU 1, waited for on both: bandwidth_gbs is the copy's speed."""
    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda:0")
    y = torch.empty(nbytes, dtype=torch.uint8, device="cuda:1")
    benchmark.extra_info.update(bytes=nbytes, peer_to_peer=snippet.peer_to_peer(0, 1))
    # plain benchmark: two GPUs; gpu_benchmark synchronizes only the current one
    benchmark.pedantic(snippet.copy_and_wait, args=(x, y), setup=synchronize_both,
                       rounds=30, warmup_rounds=3)


# --- All-reduce: this process is rank 0 on GPU 0, a follower is rank 1 on GPU 1 -----------------

@pytest.fixture(scope="module")
def pair():
    with two_ranks.Pair() as running:
        yield running


@functools.lru_cache(maxsize=1)  # one buffer at a time: 1 GiB is freed before the next size
def buffer(nbytes):
    return torch.zeros(nbytes // 2, dtype=torch.bfloat16, device=two_ranks.device())


def all_reduce_and_wait(nbytes, ops):
    """`ops` all-reduces of one buffer, back to back, then wait for the GPU (both ranks run it)."""
    all_reduce.all_reduce_many(buffer(nbytes), ops)
    torch.cuda.synchronize()


def ops_for(nbytes):
    """Back-to-back operations per round: 50 for small messages, at least 20 for any (as
    nccl-tests times 20 iterations). Rank 1 hears of each round over a socket and starts it
    ~0.2 ms after rank 0, so a round of one 64 MiB operation read 443 us where 20 in a row
    take 251 us each: the lag must be spread over many operations."""
    return max(20, min(50, 64 * MiB // nbytes))


@pytest.mark.snippet("snippets/several_gpus/all_reduce_bandwidth.py", "benchmarks/two_ranks.py")
@pytest.mark.parametrize("nbytes", SIZES, ids=[size_label(s) for s in SIZES])
def bench_all_reduce(benchmark, pair, nbytes):
    """nccl-tests' all_reduce_perf, from Python: time per all-reduce and its bus bandwidth."""
    ops = ops_for(nbytes)
    pair.call(all_reduce_and_wait, nbytes, 3)  # warm-up on both ranks, outside the rounds
    # plain benchmark: two ranks; pair.announcer starts each round on the other rank too
    benchmark.pedantic(all_reduce_and_wait, args=(nbytes, ops),
                       setup=pair.announcer(all_reduce_and_wait, nbytes, ops),
                       rounds=20, warmup_rounds=2)
    seconds = benchmark.stats.stats.median / ops
    benchmark.extra_info.update(
        message_bytes=nbytes, ops=ops, world_size=2, dtype="bfloat16",
        algbw_gbs=nbytes / seconds / 1e9,
        busbw_gbs=all_reduce.bus_bandwidth(nbytes, seconds, 2) / 1e9,
    )


# --- The same small all-reduces, captured in a CUDA graph: no Python, no per-call launch ----------

_graphs = {}
GRAPH_OPS = 200  # operations per graph: rank 1's late start (~0.2 ms) adds ~1 us to each
GRAPH_SIZES = [KiB, 64 * KiB, MiB]


def capture_all_reduces(nbytes, ops):
    """Both ranks: capture `ops` all-reduces of the buffer in one CUDA graph (after eager
    warm-up, so NCCL's communicator and buffers exist before capture)."""
    x = buffer(nbytes)
    all_reduce.all_reduce_many(x, 3)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        all_reduce.all_reduce_many(x, ops)
    torch.cuda.synchronize()
    _graphs[nbytes, ops] = graph


def replay_and_wait(nbytes, ops):
    _graphs[nbytes, ops].replay()
    torch.cuda.synchronize()


def forget_graphs():
    _graphs.clear()


@pytest.mark.snippet("snippets/several_gpus/all_reduce_bandwidth.py", "benchmarks/two_ranks.py")
@pytest.mark.parametrize("nbytes", GRAPH_SIZES, ids=[size_label(s) for s in GRAPH_SIZES])
def bench_all_reduce_graph(benchmark, pair, nbytes):
    """The per-operation cost of a small all-reduce with the host out of the way: one graph
    replay launches GRAPH_OPS all-reduces, and per_op = round time / GRAPH_OPS."""
    pair.call(capture_all_reduces, nbytes, GRAPH_OPS)
    pair.call(replay_and_wait, nbytes, GRAPH_OPS)  # the first replay uploads the graph
    # plain benchmark: two ranks; pair.announcer starts each round on the other rank too
    benchmark.pedantic(replay_and_wait, args=(nbytes, GRAPH_OPS),
                       setup=pair.announcer(replay_and_wait, nbytes, GRAPH_OPS),
                       rounds=20, warmup_rounds=2)
    pair.call(forget_graphs)
    seconds = benchmark.stats.stats.median / GRAPH_OPS
    benchmark.extra_info.update(
        message_bytes=nbytes, ops=GRAPH_OPS, world_size=2, dtype="bfloat16",
        algbw_gbs=nbytes / seconds / 1e9,
        busbw_gbs=all_reduce.bus_bandwidth(nbytes, seconds, 2) / 1e9,
    )
