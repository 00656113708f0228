"""Claims of docs/memory/where-gpu-memory-goes.md (the snippet needs CUDA: GPU tests, marked
one by one, except the old names' warning and the checks of the recorded runs at the end)."""


import pytest

from snippets.memory import where_gpu_memory_goes as module  # importable without a GPU

on_gpu = pytest.mark.snippet("snippets/memory/where_gpu_memory_goes.py")
MiB = 2**20


@pytest.mark.parametrize(("old", "new"), [("memory_cached", "memory_reserved"),
                                          ("max_memory_cached", "max_memory_reserved")])
def test_the_old_names_warn_and_name_their_replacement(old, new):
    import torch

    with pytest.warns(FutureWarning, match=f"renamed to `torch.cuda.{new}`"):
        getattr(torch.cuda, old)()


@pytest.fixture
def clean():
    """As little cached from earlier tests as empty_cache can manage, so reserved memory moves
    with this test: their reference cycles collected first (tensors in a cycle freed by a later
    collection would add to the cache mid-test). Free blocks of segments still partly in use
    stay cached: a test that needs the cache's size reads it."""
    import gc

    import torch

    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return module


@on_gpu
@pytest.mark.whole_gpu  # "used on the GPU" is the whole device's: tests beside it change it
def test_del_frees_allocated_memory_and_empty_cache_gives_reserved_memory_back(clean):
    seen = list(clean.allocate_delete_release(1024).values())
    before, made, deleted, released = seen
    assert made["allocated"] - before["allocated"] == 1024
    assert made["reserved"] - before["reserved"] >= 1024
    assert deleted["allocated"] == before["allocated"]        # del: no tensor holds it...
    assert deleted["reserved"] == made["reserved"]            # ...but the cache keeps the block
    assert deleted["used on the GPU"] >= made["used on the GPU"] - 1  # and the GPU sees it used
    assert released["reserved"] <= before["reserved"]         # empty_cache: back to the driver
    assert deleted["used on the GPU"] - released["used on the GPU"] >= 1000
    assert made["peak allocated"] >= made["allocated"]


@on_gpu
def test_a_view_or_the_autograd_graph_keeps_deleted_memory_alive(clean):
    held = clean.still_referenced(256)
    assert held["a view of it"] == pytest.approx(256, abs=0.01)
    assert held["the autograd graph"] == pytest.approx(256, abs=0.01)
    assert held["after backward()"] < 0.01


@on_gpu
def test_a_running_total_of_losses_keeps_every_steps_graph(clean):
    steps = 10
    kept = clean.running_loss_growth(steps, keep="graph")
    assert kept >= steps * 16, kept  # at least each step's 16 MiB input, kept by the graph
    assert clean.running_loss_growth(steps, keep="detached") < 0.01  # one number's block
    assert clean.running_loss_growth(steps, keep="item") < 0.01


@on_gpu
def test_a_detached_running_total_never_waits_for_the_gpu(clean, monkeypatch):
    """The cheat sheet: accumulate loss.detach() and call .item() rarely; every .item() is a
    synchronization (counted here by wrapping Tensor.item)."""
    import torch

    calls = []
    item = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda self: calls.append(1) or item(self))
    clean.running_loss_growth(5, keep="detached")
    assert calls == []
    clean.running_loss_growth(5, keep="item")
    assert len(calls) == 5


def test_looking_for_cycles_leaves_the_callers_collector_settings_alone():
    # Readers copy the helper: it must not clobber their gc debug flags or gc.garbage.
    import gc

    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_UNCOLLECTABLE)
    gc.garbage.append("the caller's")
    try:
        module.tensors_in_cycles()
        assert gc.get_debug() == gc.DEBUG_UNCOLLECTABLE
        assert gc.garbage[-1:] == ["the caller's"]
    finally:
        gc.garbage.remove("the caller's")
        gc.set_debug(flags)


@on_gpu
def test_a_reference_cycle_keeps_gpu_memory_until_the_collector_runs(clean):
    import gc

    import torch

    gc.disable()  # no automatic collection in the middle of the test
    try:
        base = torch.cuda.memory_allocated()
        clean.leak_through_a_cycle(64)
        assert torch.cuda.memory_allocated() - base == 64 * MiB  # no name refers to it
        found = clean.tensors_in_cycles()
        assert ((64 * MiB,), torch.uint8, torch.device("cuda", torch.cuda.current_device()),
                64 * MiB) in found, found
        assert torch.cuda.memory_allocated() == base  # freed by the collection
        assert clean.tensors_in_cycles() == []
    finally:
        gc.enable()


@on_gpu
@pytest.mark.parametrize(("nbytes", "pool"), [(512, "small_pool"), (2**20, "small_pool"),
                                              (2**20 + 1, "large_pool"), (64 * MiB, "large_pool")])
def test_up_to_a_mib_comes_from_the_small_pool(clean, nbytes, pool):
    assert clean.pool_of(nbytes) == pool


@on_gpu
def test_a_block_freed_on_one_stream_is_reused_by_that_stream_only(clean):
    assert clean.reused_on() == {"default stream": False, "side stream": True}


@on_gpu
def test_peak_counts_what_was_alive_at_once(clean):
    assert clean.peak_mib(clean.two_temporaries, 512) == pytest.approx(1024, abs=0.01)


@on_gpu
def test_allocator_stats_name_real_counters(clean):
    import torch

    x = torch.empty(64 * MiB, dtype=torch.uint8, device=clean.device)
    stats = clean.allocator_stats()
    assert stats["bytes in live tensors"] >= 64 * MiB
    assert stats["bytes the cache holds"] >= stats["bytes in live tensors"]
    assert stats["cudaMalloc'd segments"] >= 1
    keys = torch.cuda.memory_stats()
    for key in ("allocated_bytes.all.current", "reserved_bytes.all.current",
                "inactive_split_bytes.all.current", "segment.all.current", "num_alloc_retries",
                "num_ooms"):
        assert key in keys, key  # a renamed counter would read 0 on the page, silently
    del x


@on_gpu
@pytest.mark.whole_gpu
def test_nvidia_smi_lists_this_process_or_says_none(clean):
    import torch

    torch.zeros(1, device=clean.device)
    listed = clean.nvidia_smi_mib()
    if listed is None:
        pytest.skip("nvidia-smi does not list this process (a PID namespace): the page says so")
    assert listed >= torch.cuda.memory_reserved() / MiB


@on_gpu
@pytest.mark.whole_gpu
def test_fits_counts_free_and_cached_memory_and_keeps_a_share_spare(clean, monkeypatch):
    import torch

    total = torch.cuda.get_device_properties(clean.device).total_memory
    assert clean.fits(MiB) and not clean.fits(total)
    cached = torch.empty(1024 * MiB, dtype=torch.uint8, device=clean.device)
    del cached  # 1 GiB in the cache now: the driver no longer counts it free, fits() does
    # The cache as it is now: 1 GiB, and whatever empty_cache could not give back before it
    # (free blocks of segments still partly in use by earlier tests' tensors or cuBLAS
    # workspaces, the pools of live CUDA graphs: 1.5 GiB or more in make test-gpu's serial
    # half, 2026-11-27), which the 1 GiB may also have been carved from.
    cache = torch.cuda.memory_reserved(clean.device) - torch.cuda.memory_allocated(clean.device)
    assert cache >= 1024 * MiB
    free, _ = torch.cuda.mem_get_info(clean.device)
    # The driver's free memory held still from here: another process giving memory back
    # between this reading and fits()'s own moved the line by more than the 512 MiB margin
    # (an H100 run, 2026-11-26); what is checked is how fits() adds the cache in.
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, total))
    nbytes = int(free + cache - 0.25 * total - 512 * MiB)  # the driver alone has no room for it
    assert nbytes > free - 0.25 * total
    assert clean.fits(nbytes) and not clean.fits(nbytes + 1024 * MiB)


@on_gpu
def test_gpu_batches_shuffle_every_sample_once_without_leaving_the_gpu(clean):
    import torch

    x = torch.arange(1000, device=clean.device).float().unsqueeze(1)
    y = torch.arange(1000, device=clean.device)
    seen = []
    for xb, yb in clean.gpu_batches(x, y, batch_size=128):
        assert xb.is_cuda and yb.is_cuda and len(xb) <= 128
        assert torch.equal(xb[:, 0].long(), yb)  # samples stay paired with their labels
        seen.append(yb)
    order = torch.cat(seen)
    assert sorted(order.tolist()) == list(range(1000))
    assert not torch.equal(order, y)  # shuffled


@pytest.fixture(scope="module")
def fresh():
    import torch

    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return module.watch_fresh_process()


@on_gpu
@pytest.mark.whole_gpu
def test_a_fresh_process_reports_in_order(fresh):
    assert list(fresh) == ["context", "tensors", "matmul", "empty_cache"]


@on_gpu
@pytest.mark.whole_gpu
def test_the_context_is_memory_pytorch_does_not_count(fresh):
    context = fresh["context"]
    assert context["allocated"] < 1 and context["reserved"] <= 2  # torch.zeros(1): one 2 MiB block
    assert 50 <= module.not_pytorchs(context) <= 4096, context


@on_gpu
@pytest.mark.whole_gpu
def test_a_cached_block_is_reserved_and_used_but_not_allocated(fresh):
    tensors = fresh["tensors"]
    assert tensors["allocated"] == pytest.approx(1024, abs=1)
    assert tensors["reserved"] >= 1024 + 512
    # what the process added to the GPU: its cache plus what PyTorch does not count
    outside = module.not_pytorchs(tensors)
    assert outside == pytest.approx(module.not_pytorchs(fresh["context"]), abs=64)
    if tensors["nvidia-smi"] is not None:
        assert tensors["nvidia-smi"] == pytest.approx(tensors["added to the GPU"], abs=64)


@on_gpu
@pytest.mark.whole_gpu
def test_the_first_matrix_product_adds_memory_outside_pytorchs_cache(fresh):
    assert module.not_pytorchs(fresh["matmul"]) > module.not_pytorchs(fresh["tensors"])


@on_gpu
@pytest.mark.whole_gpu
def test_the_products_tensors_are_carved_out_of_the_cached_block(fresh):
    tensors, matmul = fresh["tensors"], fresh["matmul"]
    grew = matmul["allocated"] - tensors["allocated"]  # the 4 MiB matrix, cuBLAS's workspace
    assert grew >= 4
    assert matmul["reserved"] - tensors["reserved"] < grew  # no new segment for most of it


@on_gpu
@pytest.mark.whole_gpu
def test_empty_cache_cannot_return_a_segment_a_tensor_still_uses(fresh):
    before, after = fresh["matmul"], fresh["empty_cache"]
    assert before["reserved"] - after["reserved"] < 512  # the 512 MiB segment stays
    assert after["allocated"] == before["allocated"]
    assert module.not_pytorchs(after) == pytest.approx(module.not_pytorchs(before), abs=64)


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) ---

CLAIMS = {}


FRESH = "where_gpu_memory_goes.fresh_process"


def test_the_table_adds_up_in_every_run(measured):
    for run in measured(FRESH):
        value = {field: run.value(FRESH, field) for field in (
            "tensors_allocated_bytes", "tensors_reserved_bytes", "context_outside_bytes",
            "tensors_added_bytes", "nvidia_smi_lists_the_process", "tensors_nvidia_smi_bytes")}
        assert abs(value["tensors_allocated_bytes"] - 1024 * MiB) < MiB, run  # + torch.zeros(1)
        assert value["tensors_reserved_bytes"] >= 1536 * MiB, run
        assert value["context_outside_bytes"] > 0, run
        assert value["tensors_added_bytes"] > value["tensors_reserved_bytes"], run
        if value["nvidia_smi_lists_the_process"] == "yes":
            assert value["tensors_nvidia_smi_bytes"] >= value["tensors_reserved_bytes"], run


def test_empty_cache_gave_back_no_segment_in_every_run(measured):
    """The page: the product's tensors were carved out of the cached 512 MiB block, so
    empty_cache() could not return that segment."""
    for run in measured(FRESH):
        value = {f"{step}_{what}": run.value(FRESH, f"{step}_{what}_bytes")
                 for step in ("tensors", "matmul", "empty_cache")
                 for what in ("allocated", "reserved")}
        grew = value["matmul_allocated"] - value["tensors_allocated"]
        assert grew >= 4 * MiB, run
        assert value["matmul_reserved"] - value["tensors_reserved"] < grew, run
        assert value["matmul_reserved"] - value["empty_cache_reserved"] < 512 * MiB, run
        assert value["empty_cache_allocated"] == value["matmul_allocated"], run


def test_the_gpus_used_memory_counts_the_measuring_process_too_in_every_run(measured):
    """The page: the GPU's used memory counts, besides the new process, the measuring
    process, which holds no tensors: about one context (the child's, within half of it)."""
    for run in measured(FRESH):
        used, added, context = (run.value(FRESH, field) for field in (
            "tensors_gpu_used_bytes", "tensors_added_bytes", "context_outside_bytes"))
        assert 0.5 * context < used - added < 1.5 * context, run
