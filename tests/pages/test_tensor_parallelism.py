"""Claims of docs/several-gpus/tensor-parallelism.md, tested on 2 and 4 processes started by
torchrun: DTensor and tensor parallelism with gloo on the CPU in CI, with NCCL where the machine
has a GPU for every process.

This file is also the worker for the per-rank checks (`python tests/pages/test_tensor_parallelism.py
OUT_DIR [pairs]` under torchrun): each rank writes what it saw to OUT_DIR/rank<N>.json. With
`pairs` (gloo, 4 processes) each rank also runs the checks a second time in one of two 2-rank
groups, the "tp" dimension of a 2 x 1 x 2 mesh (its 1 x 2 "dp" x "tp" part for FSDP2 + TP, as
on 2 processes): one launch of 4 CPU processes checks 2 ranks and 4 (tests.helpers.four_ranks_and_pairs).
"""

import gc
import json
import os
import sys
from pathlib import Path

import pytest

from tests.helpers import RANK_PROCESSES, four_ranks_and_pairs, process_id, run_on_ranks

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300
PROCESSES = RANK_PROCESSES
DIM, HIDDEN = 256, 1024  # the snippet's Block() defaults

pytestmark = pytest.mark.snippet("snippets/several_gpus/tensor_parallelism.py")

CLAIMS = {
    # One block, tensor parallel, against the whole block on one GPU of the same machine. The
    # split step is host-bound (below), so the speedup moves with the host: the runs at the rank
    # harness where rank 0 hosts the store, on 2 H200s (212bda8 and ec8455f, lease 1; e699e0d,
    # lease 2): 1.52, 1.34, 1.25 (earlier code: 1.65, 1.47, 1.48). No 4-H200 run measured the
    # current code (the one run, at the earlier harness, gave 1.37 against the 2-GPU machine's
    # one-GPU point), so nothing checks the 4-GPU bound until one does; the page quotes none.
    "speedup_2gpus_min": 1.2,
    "speedup_4gpus_min": 1.2,
    # host_ms / median, the same runs: split over 2 H200s, TP 0.88, 0.91, 0.99 and TP + SP 1.13,
    # 0.98, 1.03; one H200 0.18, 0.16, 0.22
    "split_host_share_min": 0.75,
    "one_host_share_max": 0.25,
    # Sequence parallelism on one block against plain TP, same GPUs: its step's time (2 H200s,
    # the same runs: 1.15, 1.18, 1.23) and its peak memory per GPU (1.059 in each run)
    "sp_over_tp_time_min": 1.1,
    "sp_peak_over_tp_min": 1.05,
}


_gloo_launch = {}  # the one launch of 4 gloo processes, for n = 4 and its pairs for n = 2


@pytest.fixture(scope="module", params=PROCESSES, ids=process_id)
def ranks(request, tmp_path_factory):
    """What each of n ranks saw: n = 2 and 4 CPU processes (gloo: one launch of 4, whose first
    pair of ranks is the 2-rank group), and as many GPUs (NCCL) where the machine has them (the
    others are skipped, and listed by make test-gpu)."""
    backend, n = request.param
    if backend != "gloo":
        out = tmp_path_factory.mktemp(f"tp-{backend}-{n}")
        return run_on_ranks(__file__, backend, n, out, TIMEOUT)
    if not _gloo_launch:
        out = tmp_path_factory.mktemp("tp-gloo-4-and-pairs")
        _gloo_launch.update(four_ranks_and_pairs(__file__, out, TIMEOUT))
        # ranks 2 and 3 ran the same checks beside ranks 0 and 1: they saw the same
        assert _gloo_launch["second pair"] == _gloo_launch[2], _gloo_launch
    return _gloo_launch[n]


@pytest.mark.parametrize("plan", ["tensor_parallel", "sequence_parallel"])
def test_split_block_computes_what_the_whole_block_computes_on_every_rank(ranks, plan):
    assert all(r[plan] == {"output_equal": True, "grads_equal": True} for r in ranks), ranks


def test_dtensor_layouts_keep_the_global_shape_and_split_the_local_one(ranks):
    n = len(ranks)
    for r in ranks:
        assert r["tour"] == {"rows_local": [8 // n, 4], "cols_local": [8, 4 // n],
                             "copy_local": [8, 4], "global": [8, 4],
                             "same_sum": True, "rows_to_cols": True}


def test_each_rank_holds_its_share_of_every_split_weight(ranks):
    n = len(ranks)
    for r in ranks:
        held = r["held"]
        for name in ("attn.q.weight", "attn.k.weight", "attn.v.weight"):
            assert held[name] == [[DIM // n, DIM], [DIM, DIM], "S(0)"]  # its heads' rows
        assert held["attn.out.weight"] == [[DIM, DIM // n], [DIM, DIM], "S(1)"]
        assert held["mlp.up.weight"] == [[HIDDEN // n, DIM], [HIDDEN, DIM], "S(0)"]
        assert held["mlp.down.weight"] == [[DIM, HIDDEN // n], [DIM, HIDDEN], "S(1)"]
        assert held["mlp.down.bias"] == [[DIM], [DIM], "R"]  # added once, after the sum
        assert held["attn_norm.weight"] == [[DIM], [DIM], "whole"]
        held_sp = r["held_sp"]  # the same split; the norms become replicated DTensors
        assert held_sp["attn.q.weight"] == held["attn.q.weight"]
        assert held_sp["mlp.down.weight"] == held["mlp.down.weight"]
        assert held_sp["attn_norm.weight"] == [[DIM], [DIM], "R"]


def test_forward_sends_two_all_reduces_or_two_gathers_and_two_scatters(ranks):
    for r in ranks:
        assert r["sends_tp"]["forward"] == {"all_reduce": 2}
        assert r["sends_sp"]["forward"] == {"all_gather_into_tensor": 2,
                                            "reduce_scatter_tensor": 2}
        # backward: one reduce of the input gradient per module that made its input a DTensor
        # (attn, shared by q, k and v; and up: two), or, with sequence parallelism, the mirror
        # of the forward
        assert r["sends_tp"]["backward"] == {"all_reduce": 2}
        assert r["sends_sp"]["backward"] == r["sends_sp"]["forward"]
        # the optimizer step: nothing under TP; under SP the norms' weight and bias gradients
        # (each rank's share, Partial) are all-reduced, one per parameter of the two norms
        assert r["sends_tp"]["optimizer"] == {}
        assert r["sends_sp"]["optimizer"] == {"all_reduce": 4}


def test_sequence_parallelism_keeps_only_the_norms_inputs_sharded(ranks):
    """Per block and rank, TP + SP keeps what TP keeps less (1 - 1/n) of the two norms' inputs
    (batch x sequence x width each) and of their per-token statistics (mean and 1/std, one
    number per token each): the column-split layers keep their gathered input whole, under
    both. Both keep less than one device, which keeps every head's and every hidden unit's
    activations."""
    batch, seq = 2, 16  # the worker's input
    for r in ranks:
        n, kept = len(ranks), r["kept"]
        share = 1 - 1 / n
        norms = 2 * batch * seq * DIM * 4 + 2 * 2 * batch * seq * 4  # fp32 inputs, statistics
        if r["backend"] == "gloo":  # fp32 everywhere
            assert kept["tp"] - kept["sp"] == share * norms, kept
        else:  # GPU attention kernels keep other things, the same under both plans
            assert kept["tp"] - kept["sp"] == pytest.approx(share * norms, rel=0.05), kept
        assert kept["sp"] < kept["tp"] < kept["one"], kept


def test_fsdp2_with_tp_on_a_2d_mesh_trains_like_one_device(ranks):
    assert all(r["two_d"] is True for r in ranks)


# --- The page's claims against every recorded run (timings/; runs in CI) -------------------------

STEP = "tensor_parallelism.step[{}]"


@pytest.fixture
def measured_where(measured, _all_timings, _code_keys):
    """measured(*names) for the 2-GPU points (the page shows them); the 4-GPU points only where
    a run of the current code holds them (the page shows none: the four-GPU machine is lent at
    times, and its runs go to the scaling page first)."""
    from fieldguide.timings import TimingError, runs_measuring

    def runs(gpus, *names):
        if gpus == 2:
            return measured(*names)
        try:
            return runs_measuring(_all_timings, *names, keys=_code_keys)
        except TimingError:
            return []

    return runs


@pytest.mark.parametrize("gpus", [2, 4])
def test_n_gpus_run_the_block_faster_than_one(measured_where, gpus):
    """Against the one-GPU point of the same run (the same machine and lease)."""
    one, split = STEP.format("one-1gpu"), STEP.format(f"tp-{gpus}gpus")
    for run in measured_where(gpus, one, split):
        speedup = run.value(one) / run.value(split)
        assert speedup >= CLAIMS[f"speedup_{gpus}gpus_min"], (str(run), speedup)


def test_split_steps_go_at_the_hosts_pace(measured):
    """host_ms, the time to issue one step, is most of a split step and little of the whole's."""
    one, tp, sp = (STEP.format(p) for p in ("one-1gpu", "tp-2gpus", "sp-2gpus"))
    for run in measured(one, tp, sp):
        share = run.value(one, "host_ms") / (1e3 * run.value(one))  # ms against s
        assert share <= CLAIMS["one_host_share_max"], (str(run), share)
        for split in (tp, sp):
            share = run.value(split, "host_ms") / (1e3 * run.value(split))
            assert share >= CLAIMS["split_host_share_min"], (str(run), split, share)


@pytest.mark.parametrize("gpus", [2, 4])
def test_sequence_parallelism_is_slower_and_no_lighter_on_one_block(measured_where, gpus):
    tp, sp = STEP.format(f"tp-{gpus}gpus"), STEP.format(f"sp-{gpus}gpus")
    for run in measured_where(gpus, tp, sp):
        slower = run.value(sp) / run.value(tp)
        assert slower >= CLAIMS["sp_over_tp_time_min"], (str(run), slower)
        peak = run.value(sp, "peak_gib_per_gpu") / run.value(tp, "peak_gib_per_gpu")
        assert peak >= CLAIMS["sp_peak_over_tp_min"], (str(run), peak)


# --- The worker ----------------------------------------------------------------------------------

def checks_on(mesh, mesh_2d, device):
    """What this rank sees in the group of `mesh` (1-D, "tp"), and training under FSDP2 + TP
    on `mesh_2d` ("dp" x "tp", over the same ranks)."""
    import torch
    import torch.distributed as dist

    from snippets.several_gpus import tensor_parallelism as tp

    rank, n = mesh.get_local_rank(), mesh.size()
    seen = {"tour": tp.dtensor_tour(mesh),
            "tensor_parallel": tp.compare_with_one_device(tp.tensor_parallel, mesh, device),
            "sequence_parallel": tp.compare_with_one_device(tp.sequence_parallel, mesh, device,
                                                            sequence_split=True)}
    torch.manual_seed(1)
    x = torch.randn(2, 16, DIM, device=device)
    seen["sends_tp"] = tp.what_a_step_sends(tp.tensor_parallel(tp.Block().to(device), mesh), x)
    mine = x.chunk(n, dim=1)[rank]
    seen["sends_sp"] = tp.what_a_step_sends(tp.sequence_parallel(tp.Block().to(device), mesh),
                                            mine)
    seen["kept"] = {
        "one": tp.activations_kept(tp.Block().to(device), x),
        "tp": tp.activations_kept(tp.tensor_parallel(tp.Block().to(device), mesh), x),
        "sp": tp.activations_kept(tp.sequence_parallel(tp.Block().to(device), mesh),
                                  mine.contiguous())}
    seen["held"] = tp.what_this_rank_holds(tp.tensor_parallel(tp.Block().to(device), mesh))
    seen["held_sp"] = tp.what_this_rank_holds(tp.sequence_parallel(tp.Block().to(device), mesh))
    seen["two_d"] = tp.train_step_2d(mesh_2d, device)
    seen["backend"] = dist.get_backend()
    return seen


def rank_checks(out_dir, pairs=False):
    import torch.distributed as dist

    from snippets.several_gpus import tensor_parallelism as tp

    mesh, device = tp.start_mesh()
    n = dist.get_world_size()
    seen = checks_on(mesh, tp.init_device_mesh(device.type, (n // 2, 2),
                                               mesh_dim_names=("dp", "tp")), device)
    if pairs:  # ranks 0 and 1, ranks 2 and 3; FSDP2 + TP on 1 x 2 as on 2 processes
        three_d = tp.init_device_mesh(device.type, (2, 1, 2),
                                      mesh_dim_names=("pair", "dp", "tp"))
        seen["pair"] = checks_on(three_d["tp"], three_d["dp", "tp"], device)
    with open(os.path.join(out_dir, f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump(seen, f)
    # freed at exit instead, gloo's threads abort Python one run in two (torch 2.13, CPU)
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    rank_checks(sys.argv[1], pairs=sys.argv[2:] == ["pairs"])
