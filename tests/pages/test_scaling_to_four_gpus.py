"""Claims of docs/several-gpus/scaling-to-four-gpus.md: what each GPU holds under DDP and FSDP2
at 2 and 4 processes (torchrun; gloo on the CPU in CI), the yardsticks, the n-rank benchmark
harness, and the scaling the timing runs measured on every machine.

This file is also the worker for the per-rank checks (`python tests/pages/test_scaling_to_four_gpus.py
OUT_DIR` under torchrun): each rank writes what it holds to OUT_DIR/rank<N>.json.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_python

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300
PROCESSES = [("gloo", 2), ("gloo", 4),
             pytest.param(("nccl", 2), marks=pytest.mark.gpus(2)),
             pytest.param(("nccl", 4), marks=pytest.mark.gpus(4))]


def process_id(param):
    backend, n = param
    return f"{backend}-{n}"

pytestmark = pytest.mark.snippet("snippets/several_gpus/scaling.py")

CLAIMS = {
    "busbw_4_over_2_min": 0.9,  # 4-GPU all-reduce bus bandwidth at 1 GiB over the 2-GPU one
    "ddp_weak_scaling_min": 0.85,  # DDP at 4 GPUs, 16384 samples per GPU: t(1 GPU) / t(4 GPUs)
    "fsdp2_state_share_max": 0.26,  # what one of 4 GPUs holds under FSDP2, over one GPU's whole
}


@pytest.fixture(scope="module", params=PROCESSES, ids=process_id)
def ranks(request, tmp_path_factory):
    """What each of n ranks saw: n = 2 and 4 CPU processes (gloo), and as many GPUs (NCCL)
    where the machine has them (the others are skipped, and listed by make test-gpu)."""
    backend, n = request.param
    out = tmp_path_factory.mktemp(f"scaling-{backend}-{n}")
    # gloo: hide the GPUs, so the script takes the CPU path even on a GPU machine
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           **({"CUDA_VISIBLE_DEVICES": ""} if backend == "gloo" else {})}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         str(n), Path(__file__).resolve(), out],
        cwd=out, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = [json.loads((out / f"rank{r}.json").read_text()) for r in range(n)]
    assert {s["backend"] for s in seen} == {backend}  # NCCL ran on GPUs, not on a fallback
    return seen


def test_one_process_holds_16_bytes_per_parameter(snippet):
    import torch

    model = snippet.make_mlp(width=64, depth=2)
    optimizer = torch.optim.Adam(model.parameters())
    snippet.train_step(model, optimizer, torch.randn(8, 64), torch.randn(8, 1))
    held = snippet.training_state_bytes(model, optimizer)
    parameters = sum(p.numel() for p in model.parameters())
    assert held == {"parameters": 4 * parameters, "gradients": 4 * parameters,
                    "optimizer": 8 * parameters}
    assert sum(snippet.BYTES_PER_PARAMETER.values()) == 16


def test_ddp_replicates_and_fsdp2_shards_the_state(ranks):
    n = len(ranks)
    whole = ranks[0]["whole"]
    for r in ranks:
        assert r["ddp"] == whole  # a whole copy on every rank
    for what in whole:  # the shards add up to one copy; rows that do not split evenly differ
        assert sum(r["fsdp2"][what] for r in ranks) == whole[what]
        assert all(r["fsdp2"][what] <= whole[what] / n * 1.02 for r in ranks), (what, ranks)
    assert all(r["same_loss"] for r in ranks)  # DDP and FSDP2 train the model alike


def test_state_budget_per_gpu(snippet):
    assert snippet.state_gib_per_gpu(2**30, "ddp", 4) == 16
    assert snippet.state_gib_per_gpu(2**30, "fsdp2", 4) == 4
    with pytest.raises(KeyError):
        snippet.state_gib_per_gpu(2**30, "zero", 4)


def test_yardsticks(snippet):
    assert snippet.weak_scaling_efficiency(0.010, 0.0125) == pytest.approx(0.8)
    assert snippet.strong_scaling_efficiency(0.040, 0.0125, 4) == pytest.approx(0.8)
    assert snippet.model_flops_utilisation(6e12, 0.02, 600e12) == pytest.approx(0.5)
    model = snippet.make_mlp(width=8, depth=2)  # 3 weight matrices: 8x8, 8x8, 1x8
    assert snippet.matmul_flops(model, 10) == 6 * (64 + 64 + 8) * 10


def test_lay_out_refuses_an_unknown_layout(snippet):
    import torch

    with pytest.raises(ValueError, match="unknown layout 'zero'"):
        snippet.lay_out(snippet.make_mlp(width=8, depth=1), "zero", torch.device("cpu"))


@pytest.mark.fresh_interpreter
def test_n_rank_benchmark_harness_on_cpu():
    """The benchmarks' rank-0-here, followers-elsewhere harness, on 4 CPU processes with gloo,
    switching to a group of 2 as the benchmarks do."""
    code = """
import torch
from benchmarks import ranks
from snippets.several_gpus import all_reduce_bandwidth as all_reduce

with ranks.Worlds(cpu=True) as worlds:
    x = torch.ones(1000)
    worlds(4).call(all_reduce.all_reduce_many, x, 2)  # a sum over 4 ranks, twice
    y = torch.ones(10)
    worlds(2).call(all_reduce.all_reduce_many, y, 3)  # a new group of 2, three times
    print(x.unique().tolist(), y.unique().tolist(), worlds(2).call(ranks.everyones, 7))
"""
    result = run_python(["-c", code], timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["[16.0] [8.0] [7, 7]"]


# --- The page's claims against every recorded run (timings/; runs in CI) -------------------------

def test_four_gpus_keep_the_bus_bandwidth_of_two(measured):
    two, four = "scaling.all_reduce[2gpus-1GiB]", "scaling.all_reduce[4gpus-1GiB]"
    for run in measured(two, four):
        ratio = run.value(four, "busbw_gbs") / run.value(two, "busbw_gbs")
        assert ratio >= CLAIMS["busbw_4_over_2_min"], (str(run), ratio)


def test_ddp_weak_scaling_at_four_gpus(measured):
    one, four = "scaling.step[one-1gpu-16384]", "scaling.step[ddp-4gpus-16384]"
    for run in measured(one, four):
        assert run.value(one) / run.value(four) >= CLAIMS["ddp_weak_scaling_min"], str(run)


def test_fsdp2_keeps_a_quarter_of_the_state_on_each_of_four_gpus(measured):
    one, four = "scaling.step[one-1gpu-4096]", "scaling.step[fsdp2-4gpus-4096]"
    for run in measured(one, four):
        share = run.value(four, "state_gib_per_gpu") / run.value(one, "state_gib_per_gpu")
        assert 0.25 <= share <= CLAIMS["fsdp2_state_share_max"], (str(run), share)


def test_ddp_holds_a_whole_copy_on_each_gpu(measured):
    one, four = "scaling.step[one-1gpu-4096]", "scaling.step[ddp-4gpus-4096]"
    for run in measured(one, four):
        assert run.value(four, "state_gib_per_gpu") == run.value(one, "state_gib_per_gpu")


# --- The worker ----------------------------------------------------------------------------------

def rank_checks(out_dir):
    import torch
    import torch.distributed as dist

    from snippets.several_gpus import scaling

    _, device = scaling.start_mesh(names=("dp",))
    rank = dist.get_rank()
    seen, losses = {}, {}
    torch.manual_seed(rank)  # each rank its own batch, as in data-parallel training
    x, y = torch.randn(32, 64, device=device), torch.randn(32, 1, device=device)
    for layout in ("whole", *scaling.LAYOUTS):
        model = scaling.make_mlp(width=64, depth=3).to(device)
        if layout != "whole":
            model = scaling.lay_out(model, layout, device)
        optimizer = torch.optim.Adam(model.parameters())
        for _ in range(2):
            losses[layout] = scaling.train_step(model, optimizer, x, y).item()
        seen[layout] = scaling.training_state_bytes(model, optimizer)
    # both average the ranks' gradients: the same model after each step, so the same loss
    # (up to the order of the sums; on GPUs, bf16 autocast rounds the activations too)
    tolerance = 1e-2 if device.type == "cuda" else 1e-5
    seen["same_loss"] = abs(losses["ddp"] - losses["fsdp2"]) <= tolerance * abs(losses["ddp"])
    seen["backend"] = dist.get_backend()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(seen, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    rank_checks(sys.argv[1])
