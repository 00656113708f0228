"""Two-process benchmarks on two GPUs: the timing run's process is rank 0, on GPU 0, and a
follower process is rank 1, on GPU 1, in one NCCL process group.

pytest-benchmark times what runs in its own process, so rank 0 lives there and times its calls
as usual; the follower does the same calls at the same moments. `pair.call(fn, *args)` first
sends `fn` and its arguments to the follower (over a separate gloo group, so an idle follower
waits on a socket, not inside an NCCL collective), then runs `fn(*args)` here; the follower runs
it too. For timing, `pair.announcer(fn, *args)` is the `setup` of `benchmark.pedantic`: every
round is announced outside the timed region, then timed on rank 0:

    benchmark.pedantic(fn, args=args, setup=pair.announcer(fn, *args), rounds=10)

`fn` must be a module-level function (of a benchmark module or a snippet) that both ranks can
run: collectives in it are matched, and it should end with a synchronization if it is timed.
Results the follower computes come back through collectives inside `fn` (all_gather_object).

Benchmark modules name this file in their `snippet` marker, so its code is part of their
staleness key, and GPUS_NEEDED keeps them off machines with fewer than two GPUs.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import inspect
import os
import subprocess
import sys
import traceback
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

GPUS_NEEDED = 2

ROOT = Path(__file__).resolve().parents[1]
WORK_TIMEOUT = timedelta(minutes=10)   # an NCCL collective that takes longer has hung
IDLE_TIMEOUT = timedelta(hours=3)      # the follower may wait this long for the next call


def device() -> torch.device:
    """This rank's GPU: cuda:0 on rank 0, cuda:1 on rank 1 (the CPU in a CPU pair)."""
    if dist.get_backend() == "gloo":
        return torch.device("cpu")
    return torch.device("cuda", dist.get_rank())


def _store(rank: int, world_size: int, port: int = 0) -> dist.TCPStore:
    """Where the ranks meet: rank 0 hosts it on a port the OS picks (port 0) before any
    follower starts, and gives the followers its port; they connect to it. (A port picked free,
    let go and then bound could be another program's by then: in a test run beside others,
    every gloo process and TCPStore binds one.)"""
    return dist.TCPStore("127.0.0.1", port, world_size, is_master=rank == 0,
                         timeout=WORK_TIMEOUT, wait_for_workers=False)


def _join(rank: int, store: dist.Store, cpu: bool) -> dist.ProcessGroup:
    """Join the work group (NCCL on GPU `rank`, or gloo for a CPU pair); return the control group."""
    if cpu:
        dist.init_process_group("gloo", store=store, rank=rank, world_size=2,
                                timeout=WORK_TIMEOUT)
    else:
        gpu = torch.device("cuda", rank)
        torch.cuda.set_device(gpu)
        dist.init_process_group("nccl", store=store, rank=rank, world_size=2,
                                device_id=gpu, timeout=WORK_TIMEOUT)
    return dist.new_group(backend="gloo", timeout=IDLE_TIMEOUT)


def _address(fn) -> tuple[str, str, str]:
    return fn.__module__, inspect.getfile(fn), fn.__qualname__


def _resolve(module: str, file: str, name: str, cache: dict):
    if module not in cache:
        try:
            cache[module] = importlib.import_module(module)
        except ImportError:  # a benchmark module imported by path (pytest's importlib mode)
            spec = importlib.util.spec_from_file_location(module, file)
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[module] = loaded
            spec.loader.exec_module(loaded)
            cache[module] = loaded
    target = cache[module]
    for part in name.split("."):
        target = getattr(target, part)
    return target


# --- The training workload that the chapter's two-GPU benchmarks share ------------------------------
# The MLP of the DDP page's script at a size where a step is real work: 8 layers of 4096 x 4096
# (about 134 million parameters), bf16 autocast, Adam, 4096 samples per GPU in every step.

WIDTH, DEPTH, BATCH_PER_GPU = 4096, 8, 4096


def workload_model(seed: int = 0) -> torch.nn.Module:
    from snippets.several_gpus.ddp_with_torchrun import make_model

    torch.manual_seed(seed)
    return make_model(features=WIDTH, width=WIDTH, depth=DEPTH)


def workload_batch(on: torch.device, samples: int = BATCH_PER_GPU) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.randn(samples, WIDTH, device=on), torch.randn(samples, 1, device=on))


def parameter_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def peak_gib(on: torch.device) -> float:
    torch.cuda.synchronize(on)
    return torch.cuda.max_memory_allocated(on) / 2**30


def everyones(value):
    """[rank 0's value, rank 1's value]: an all_gather_object, so both ranks must call it."""
    found = [None] * dist.get_world_size()
    dist.all_gather_object(found, value)
    return found


class Pair:
    """Rank 0 here, rank 1 in a follower process; a context manager.

    `Pair(cpu=True)` runs both ranks on the CPU with gloo: the tests check the plumbing with it
    on machines without GPUs. The benchmarks use the default, two GPUs with NCCL.
    """

    def __init__(self, cpu: bool = False):
        self.cpu = cpu

    def __enter__(self) -> Pair:
        if not self.cpu and torch.cuda.device_count() < 2:
            raise RuntimeError("two-rank benchmarks need two CUDA devices")
        store = _store(0, 2)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        command = [sys.executable, "-m", "benchmarks.two_ranks", str(store.port),
                   *(["cpu"] if self.cpu else [])]
        self.follower = subprocess.Popen(command, cwd=ROOT, env=env)
        self.control = _join(0, store, self.cpu)
        return self

    def announce(self, fn, *args, **kwargs) -> None:
        if self.follower.poll() is not None:
            raise RuntimeError(f"the follower (rank 1) exited with {self.follower.returncode}")
        dist.broadcast_object_list([(*_address(fn), args, kwargs)], src=0, group=self.control)

    def announcer(self, fn, *args, **kwargs):
        """A `setup` for benchmark.pedantic: announces each round before it is timed."""
        return lambda: self.announce(fn, *args, **kwargs)

    def call(self, fn, *args, **kwargs):
        """Run fn(*args, **kwargs) on both ranks; return rank 0's result."""
        self.announce(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    def __exit__(self, *exc) -> None:
        try:
            if self.follower.poll() is None:
                dist.broadcast_object_list([None], src=0, group=self.control)
            gc.collect()  # models in reference cycles go while the group still exists
            dist.destroy_process_group()
        finally:
            try:
                self.follower.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.follower.kill()
                self.follower.wait()


def follow(port: int, cpu: bool) -> int:
    """Rank 1: run whatever rank 0 announces, until it says stop (None)."""
    control = _join(1, _store(1, 2, port), cpu)
    cache: dict = {}
    while True:
        box = [None]
        dist.broadcast_object_list(box, src=0, group=control)
        if box[0] is None:
            break
        module, file, name, args, kwargs = box[0]
        try:
            _resolve(module, file, name, cache)(*args, **kwargs)
        except Exception:
            traceback.print_exc()
            return 1  # rank 0 then fails at its next announcement or collective
    cache.clear()
    gc.collect()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(follow(int(sys.argv[1]), cpu=sys.argv[2:] == ["cpu"]))
