"""Benchmarks over n GPUs: the timing run's process is rank 0, on GPU 0, and n - 1 follower
processes are ranks 1 .. n - 1, on GPUs 1 .. n - 1, in one NCCL process group.

The n-rank form of benchmarks/two_ranks.py (same protocol): pytest-benchmark times what runs in
its own process, so rank 0 lives there and times its calls as usual; the followers do the same
calls at the same moments. `ranks.call(fn, *args)` sends `fn` and its arguments to every follower
over a separate gloo group (an idle follower waits on a socket, not inside an NCCL collective),
then runs `fn(*args)` here. For timing, `ranks.announcer(fn, *args)` is the `setup` of
`benchmark.pedantic`: each round is announced outside the timed region, then timed on rank 0:

    benchmark.pedantic(fn, args=args, setup=ranks.announcer(fn, *args), rounds=10)

`fn` must be a module-level function (of a benchmark module or a snippet) that every rank can
run: collectives in it are matched, and it should end with a synchronization if it is timed.
What other ranks compute comes back through collectives inside `fn` (`everyones`).

`Ranks(n, cpu=True)` runs the n ranks on the CPU with gloo: the tests check the plumbing with it
on machines without GPUs.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

from benchmarks.two_ranks import ROOT, _address, _resolve, _store

GPUS_NEEDED = 2  # a benchmark that needs more marks it: pytest.mark.gpus(4)

WORK_TIMEOUT = timedelta(minutes=10)   # an NCCL collective that takes longer has hung
IDLE_TIMEOUT = timedelta(hours=3)      # a follower may wait this long for the next call


def device() -> torch.device:
    """This rank's device: cuda:<rank>, or the CPU in a gloo group."""
    if dist.get_backend() == "gloo":
        return torch.device("cpu")
    return torch.device("cuda", dist.get_rank())


def everyones(value) -> list:
    """[rank 0's value, rank 1's, ...]: an all_gather_object, so every rank must call it."""
    found = [None] * dist.get_world_size()
    dist.all_gather_object(found, value)
    return found


def _join(rank: int, world_size: int, store: dist.Store, cpu: bool) -> dist.ProcessGroup:
    """Join the work group (NCCL on GPU `rank`, or gloo); return the control group."""
    if cpu:
        dist.init_process_group("gloo", store=store, rank=rank,
                                world_size=world_size, timeout=WORK_TIMEOUT)
    else:
        gpu = torch.device("cuda", rank)
        torch.cuda.set_device(gpu)
        dist.init_process_group("nccl", store=store, rank=rank,
                                world_size=world_size, device_id=gpu, timeout=WORK_TIMEOUT)
    return dist.new_group(backend="gloo", timeout=IDLE_TIMEOUT)


class Ranks:
    """Rank 0 here, ranks 1 .. n - 1 in follower processes; a context manager."""

    def __init__(self, world_size: int, cpu: bool = False):
        self.world_size = world_size
        self.cpu = cpu
        self.followers: list[subprocess.Popen] = []

    def __enter__(self) -> Ranks:
        if not self.cpu and torch.cuda.device_count() < self.world_size:
            raise RuntimeError(f"{self.world_size}-rank benchmarks need {self.world_size} "
                               f"CUDA devices; this machine has {torch.cuda.device_count()}")
        store = _store(0, self.world_size)  # on a port the OS picks, before any follower
        env = {**os.environ,
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        for rank in range(1, self.world_size):
            command = [sys.executable, "-m", "benchmarks.ranks", str(store.port), str(rank),
                       str(self.world_size), *(["cpu"] if self.cpu else [])]
            self.followers.append(subprocess.Popen(command, cwd=ROOT, env=env))
        self.control = _join(0, self.world_size, store, self.cpu)
        return self

    def announce(self, fn, *args, **kwargs) -> None:
        for rank, follower in enumerate(self.followers, start=1):
            if follower.poll() is not None:
                raise RuntimeError(f"rank {rank} exited with {follower.returncode}")
        dist.broadcast_object_list([(*_address(fn), args, kwargs)], src=0, group=self.control)

    def announcer(self, fn, *args, **kwargs):
        """A `setup` for benchmark.pedantic: announces each round before it is timed."""
        return lambda: self.announce(fn, *args, **kwargs)

    def call(self, fn, *args, **kwargs):
        """Run fn(*args, **kwargs) on every rank; return rank 0's result."""
        self.announce(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    def __exit__(self, *exc) -> None:
        try:
            if all(f.poll() is None for f in self.followers):
                dist.broadcast_object_list([None], src=0, group=self.control)
            gc.collect()  # models in reference cycles go while the group still exists
            dist.destroy_process_group()
        finally:
            for follower in self.followers:
                try:
                    follower.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    follower.kill()
                    follower.wait()


class Worlds:
    """`worlds(n)`: a group of n ranks, started when first asked for and replaced by a new one
    when a benchmark asks for another n; a context manager that ends the last one.

    A module's benchmarks share it through a module fixture, ordered so that each size of group
    starts once or twice (about 5-10 s each on a GPU machine)."""

    def __init__(self, cpu: bool = False):
        self.cpu = cpu
        self.current: Ranks | None = None

    def __call__(self, world_size: int) -> Ranks:
        if self.current is None or self.current.world_size != world_size:
            self.close()
            self.current = Ranks(world_size, self.cpu).__enter__()
        return self.current

    def close(self) -> None:
        if self.current is not None:
            running, self.current = self.current, None
            running.__exit__(None, None, None)

    def __enter__(self) -> Worlds:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def follow(port: int, rank: int, world_size: int, cpu: bool) -> int:
    """Ranks 1 .. n - 1: run whatever rank 0 announces, until it says stop (None)."""
    control = _join(rank, world_size, _store(rank, world_size, port), cpu)
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
    port, rank, world = map(int, sys.argv[1:4])
    sys.exit(follow(port, rank, world, cpu=sys.argv[4:] == ["cpu"]))
