"""The estimators of snippets/start_here/will_it_fit.py against the committed runs that
measured the same case: what the page docs/start-here/will-it-fit.md states as each one's error.

A check (`CHECKS`) names an estimator and the benchmarks that measured its case; it makes one
`Point` per run of each of those benchmarks. The estimator's inputs come from what the
benchmark recorded (`extra_info`) and, for a ceiling (a peak rate, a bus bandwidth, a latency),
from the same machine's own measurements: the estimate is what a reader with this site's
numbers would have predicted.

A point counts (`points(name)`) only where every benchmark it reads, the measured one and its
ceilings, measured the current code in at least RUNS_WANTED runs from LEASES_WANTED machine
leases: the rule fieldguide.rendering.render's `require_runs` holds a page's numbers to, here on every
machine. A case none of whose points counts yet is `pending(name)`: the page says it is not yet
measured, and names what falls short, and the page's test skips it with the same reason.

`tests/pages/test_will_it_fit.py` holds each check within the bound the page quotes (its
CLAIMS); `fieldguide/rendering/calculators.py` renders the tables and the errors on the pages.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fieldguide import ROOT
from fieldguide.measuring.timings import (
    LEASES_WANTED,
    RUNS_WANTED,
    Benchmark,
    CodeKeys,
    Record,
    TimingError,
    Timings,
    all_timings,
)
from snippets.start_here import will_it_fit as est


@dataclass(frozen=True)
class Point:
    """One run's measurement of a case beside the estimate for it."""

    case: str          # how the case reads in a table
    benchmark: str
    machine: str       # the timings folder: nvidia-h200, 2x-nvidia-h200 ...
    run: str
    estimate: float
    measured: float
    unit: str          # "bytes", "seconds" or "share"
    inputs: tuple[tuple[str, str], ...] = ()   # (machine, benchmark) of the ceilings it read

    @property
    def sources(self) -> tuple[tuple[str, str], ...]:
        """Every (machine, benchmark) the point reads: the measured one, then its ceilings."""
        return ((self.machine, self.benchmark), *self.inputs)

    @property
    def error(self) -> float:
        """How far the estimate is from the measurement, as a share of the measurement."""
        return self.estimate / self.measured - 1


@dataclass(frozen=True)
class Pending:
    """A case no run that the rule admits has measured yet, and why, benchmark by benchmark."""

    case: str
    machine: str
    why: tuple[str, ...]   # "NAME on MACHINE: 1 run from 1 lease", ...


@dataclass(frozen=True)
class Check:
    title: str         # what is compared, in a table's caption
    estimator: str     # the function of will_it_fit that makes the estimate
    points: Callable[[Data], Iterator[Point]]


class Data:
    """Every machine's runs, which benchmarks measured the current code, and which of those
    measured it often enough to be shown."""

    def __init__(self, root: Path = ROOT, stale: bool = False):
        self.machines: dict[str, Timings] = {t.slug: t for t in all_timings(root / "timings")}
        self.keys = CodeKeys(root)
        self.stale = stale   # read the benchmarks whose code changed instead (pending cases)
        self.used: set[tuple[str, str]] = set()   # (machine, benchmark) shown since cleared
        self._short: dict[tuple[str, str], str | None] = {}
        self._checks: dict[str, tuple[list[Point], list[Pending]]] = {}

    def stale_view(self) -> Data:
        """The same runs, read for the benchmarks whose code changed since they ran."""
        view = Data.__new__(Data)
        view.__dict__.update(self.__dict__, stale=True, used=set())
        return view

    def short(self, machine: str, name: str) -> str | None:
        """Why benchmark `name` on `machine` cannot be shown yet, or None if it can: it
        measured the current code in at least RUNS_WANTED runs from LEASES_WANTED machine
        leases (a run that recorded no lease counts as a run, never as a lease)."""
        if (machine, name) not in self._short:
            why = None
            timings = self.machines.get(machine)
            if timings is None or name not in timings.names:
                why = "not measured"
            else:
                bench = timings.benchmark(name)
                leases = {r.run.lease for r in bench.records if r.run.lease}
                if self.keys.stale_files(bench):
                    why = "its code changed since it was measured"
                elif len(bench.records) < RUNS_WANTED or len(leases) < LEASES_WANTED:
                    runs, count = len(bench.records), len(leases)
                    why = (f"{runs} run{'s' if runs != 1 else ''} from {count} "
                           f"lease{'s' if count != 1 else ''}")
            self._short[(machine, name)] = why
        return self._short[(machine, name)]

    def thin(self, reference: str) -> list[str]:
        """The benchmarks shown since `used` was cleared that the rule does not admit yet,
        on the reference GPU or a machine of several of it: fieldguide.rendering.render's
        `require_runs` rule, which a page's numbers answer to (a guard: `points` and the
        calculators' defaults read only what it admits)."""
        out = []
        for slug, name in sorted(self.used):
            ref = slug == reference or (slug.endswith("-" + reference)
                                        and slug.split("-", 1)[0].rstrip("x").isdigit())
            if ref and (why := self.short(slug, name)):
                out.append(f"{name} on {slug}: {why}, fewer than {RUNS_WANTED} runs of the "
                           f"current code from {LEASES_WANTED} leases (an estimate compared "
                           "with it)")
        return out

    def current(self, pattern: str) -> Iterator[tuple[str, Benchmark]]:
        """(machine, benchmark) for each benchmark matching `pattern` whose newest records
        measured the code as it is now (in the stale view: whose code changed since)."""
        for slug, timings in self.machines.items():
            try:
                found = timings.matching(pattern)
            except TimingError:
                continue
            for bench in found:
                if bool(self.keys.stale_files(bench)) == self.stale:
                    yield slug, bench

    def records(self, pattern: str) -> Iterator[tuple[str, Benchmark, Record]]:
        for slug, bench in self.current(pattern):
            for record in bench.records:
                yield slug, bench, record

    def ceiling(self, machine: str, name: str, field: str) -> float | None:
        """A machine's median of a measured ceiling (a peak rate, a bandwidth), if it
        measured the current code; whether enough runs did is the point's to say (its
        `inputs`)."""
        timings = self.machines.get(machine)
        if timings is None or name not in timings.names:
            return None
        bench = timings.benchmark(name)
        if self.keys.stale_files(bench) and not self.stale:
            return None
        return bench.value(field)

    def shown(self, machine: str, name: str, field: str) -> float | None:
        """A ceiling a page shows by itself (a calculator's default): only where the rule
        admits its runs."""
        if self.short(machine, name):
            return None
        self.used.add((machine, name))
        return self.ceiling(machine, name, field)


GIB = 2**30


# --- Memory: peak bytes of a training step ----------------------------------------------------

def _needing_less_memory(data: Data) -> Iterator[Point]:
    """16 feed-forward blocks of width 512 on 16384 tokens (docs/memory/needing-less-memory.md)."""
    options = {"baseline": {}, "sgd": {"optimizer": "sgd"}, "checkpoint": {"checkpoint": True},
               "accumulate": {"micro_batches": 4}, "autocast": {"precision": "autocast"},
               "bf16": {"precision": "bf16"}}
    for technique, kwargs in options.items():
        for slug, bench, record in data.records(f"needing_less_memory.step[{technique}]"):
            x = record.extra
            per_number = 2 if x["dtype"] == "bfloat16" else 4
            parameters = x["parameter_bytes"] // per_number
            estimate = est.training_memory(parameters, x["blocks"], x["tokens"], x["width"],
                                           saved_widths=10, **kwargs)["total"]
            yield Point(f"one GPU, {technique}", bench.name, slug, record.run.id, estimate,
                        x["peak_bytes"], "bytes")


def _mlp(record: Record, parallel: str, bucket_view: bool = False) -> float:
    """8 Linear(4096, 4096) + ReLU layers and a head under autocast, Adam
    (snippets/several_gpus/scaling.py, the model of the DDP and FSDP2 pages)."""
    x = record.extra
    # fsdp2.step records each GPU's share of the weights (float32) rather than their count
    parameters = x.get("parameters") or round(x["params_gib_per_gpu"] * GIB * x["gpus"] / 4)
    return est.training_memory(parameters, 9, x["batch_per_gpu"], 4096, saved_widths=1,
                               precision="autocast", gpus=x["gpus"], parallel=parallel,
                               bucket_view=bucket_view)["total"]


def _peak(record: Record) -> float:
    x = record.extra
    gib = x.get("peak_gib_per_gpu", x.get("peak_gpu0_gib"))
    return gib * GIB


def _one_gpu_mlp(data: Data) -> Iterator[Point]:
    for pattern in ("scaling.step[one-1gpu-*]", "ddp_with_torchrun.step[1gpu-*]"):
        for slug, bench, record in data.records(pattern):
            yield Point(f"one GPU, {record.extra['batch_per_gpu']} samples", bench.name, slug,
                        record.run.id, _mlp(record, "ddp"), _peak(record), "bytes")


def _ddp(data: Data, bucket_view: bool) -> Iterator[Point]:
    """DDP as each benchmark builds it: ddp_with_torchrun.step with DDP's defaults (a second
    copy of the gradients in the buckets), its step_bucket_view and scaling.lay_out with
    gradient_as_bucket_view=True (the gradients live in the buckets)."""
    patterns = (("scaling.step[ddp-*]", "ddp_with_torchrun.step_bucket_view") if bucket_view
                else ("ddp_with_torchrun.step[2gpus-*]",))
    for pattern in patterns:
        for slug, bench, record in data.records(pattern):
            x = record.extra
            yield Point(f"DDP, {x['gpus']} GPUs, {x['batch_per_gpu']} samples each", bench.name,
                        slug, record.run.id, _mlp(record, "ddp", bucket_view), _peak(record),
                        "bytes")


def _fsdp2(data: Data, small: bool) -> Iterator[Point]:
    for pattern in ("scaling.step[fsdp2-*]", "fsdp2.step"):
        for slug, bench, record in data.records(pattern):
            x = record.extra
            if (x["batch_per_gpu"] <= 4096) != small:
                continue
            yield Point(f"FSDP2, {x['gpus']} GPUs, {x['batch_per_gpu']} samples each",
                        bench.name, slug, record.run.id, _mlp(record, "fsdp2"), _peak(record),
                        "bytes")


def _tensor_parallel(data: Data, plan: str) -> Iterator[Point]:
    """Forward and backward of one pre-norm transformer block (width 4096, an MLP of
    16384, bfloat16 weights, no optimizer step) on 8192 tokens, whole and split by tensor
    parallelism (snippets/several_gpus/tensor_parallelism.py and its benchmark's docstring).
    Sequence parallelism splits the norms too but gathers the split products' inputs whole:
    2 widths of 17 kept whole, against 4 without it."""
    parameters = 4 * 4096**2 + 2 * 4096 * 16384 + 16384 + 4096 + 4 * 4096
    whole = {"tp": 4, "sp": 2, "one": 0}[plan]
    for slug, bench, record in data.records(f"tensor_parallelism.step[{plan}-*]"):
        x = record.extra
        estimate = est.training_memory(parameters, 1, x["tokens"], 4096, saved_widths=17,
                                       optimizer="sgd", precision="bf16", gpus=x["gpus"],
                                       parallel="tp", whole_widths=whole)["total"]
        words = {"one": "the whole block", "tp": "tensor parallel",
                 "sp": "tensor and sequence parallel"}[plan]
        yield Point(f"{words}, {x['gpus']} GPU{'s' if x['gpus'] > 1 else ''}", bench.name,
                    slug, record.run.id, estimate, x["peak_gib_per_gpu"] * GIB, "bytes")


# --- Copies, collectives ----------------------------------------------------------------------

def _copies(data: Data, kind: str) -> Iterator[Point]:
    """Copies of 256 MiB and more at the link's speed (the PCIe generation and width the GPU
    reports, recorded by the pinned benchmarks)."""
    for slug, bench, record in data.records(f"pinned_memory.copy[*-{kind}-*]"):
        x = record.extra
        if x["bytes"] < 256 * 2**20:
            continue
        link_bench = "pinned_memory.copy[h2d-pinned-1GiB]"
        link = data.ceiling(slug, link_bench, "link_gbs")
        if not link:
            continue
        size = bench.name.rsplit("-", 1)[1].rstrip("]")
        direction = "host → device" if x["direction"] == "h2d" else "device → host"
        estimate = est.copy_seconds(x["bytes"], link * 1e9, pinned=kind == "pinned")
        yield Point(f"{direction}, {kind}, {size}", bench.name, slug, record.run.id, estimate,
                    record.stats["median"], "seconds", ((slug, link_bench),))


ALL_REDUCES = ("scaling.all_reduce[*]", "ways_to_use_several_gpus.all_reduce[*]")


def _sizes(data: Data, pattern: str, slug: str, run_id: str) -> list[Record]:
    found = [r for s, _, r in data.records(pattern) if s == slug and r.run.id == run_id]
    return sorted(found, key=lambda r: r.extra["message_bytes"])


def _all_reduce(data: Data, large: bool) -> Iterator[Point]:
    """Every size from the latency (the smallest size's time) and the bus bandwidth (the
    largest size's), both measured in the same run."""
    for pattern in ALL_REDUCES:
        seen = set()
        for slug, _, record in data.records(pattern):
            if (slug, record.run.id) in seen:
                continue
            seen.add((slug, record.run.id))
            sizes = _sizes(data, pattern, slug, record.run.id)
            if len(sizes) < 3:
                continue
            small, big = sizes[0], sizes[-1]
            latency = small.stats["median"] / small.extra["ops"]
            bus = big.extra["busbw_gbs"] * 1e9
            for r in sizes[1:-1]:
                x = r.extra
                if (x["message_bytes"] >= 16 * 2**20) != large:
                    continue
                gpus = x.get("gpus") or x.get("world_size")
                estimate = est.collective_seconds(x["message_bytes"], gpus, bus, latency=latency)
                size = r.name.rsplit("-", 1)[-1].rsplit("[", 1)[-1].rstrip("]")
                yield Point(f"all-reduce of {size} on {gpus} GPUs", r.name, slug, r.run.id,
                            estimate, r.stats["median"] / x["ops"], "seconds",
                            ((slug, small.name), (slug, big.name)))


def _across_gpu_counts(data: Data) -> Iterator[Point]:
    """The bus bandwidth two GPUs reached predicts four: NCCL's busbw is meant not to depend
    on the GPU count."""
    for slug, bench, record in data.records("scaling.all_reduce[4gpus-*]"):
        x = record.extra
        if x["message_bytes"] < 64 * 2**20:
            continue
        two = "2x-" + slug.split("-", 1)[1]
        size = bench.name.rsplit("-", 1)[1].rstrip("]")
        pair = f"scaling.all_reduce[2gpus-{size}]"
        bus = data.ceiling(two, pair, "busbw_gbs")
        if not bus:
            continue
        estimate = est.collective_seconds(x["message_bytes"], 4, bus * 1e9)
        yield Point(f"all-reduce of {size} on 4 GPUs, from 2 GPUs' bus bandwidth", bench.name,
                    slug, record.run.id, estimate, record.stats["median"] / x["ops"], "seconds",
                    ((two, pair),))


# --- Compute: the roofline, waves, the pipeline -----------------------------------------------

def _roofline(data: Data) -> Iterator[Point]:
    """A training step's FLOPs at the peak rate its precision measured (an 8192² product)."""
    for slug, bench, record in data.records("mixed_precision_training.train_step[*]"):
        x = record.extra
        matmul, triad = f"cpu_vs_gpu.matmul[{x['variant']}]", "cpu_vs_gpu.triad[gpu]"
        peak = data.ceiling(slug, matmul, "tflops")
        bandwidth = data.ceiling(slug, triad, "bandwidth_gbs")
        if not (peak and bandwidth):
            continue
        bound = est.step_lower_bound(x["flops"], 1, peak * 1e12, bandwidth * 1e9)["bound_s"]
        yield Point(f"training step, {x['variant']}", bench.name, slug, record.run.id, bound,
                    record.stats["median"], "seconds", ((slug, matmul), (slug, triad)))


def _waves(data: Data, full: bool) -> Iterator[Point]:
    """Products of m x 8192 by 8192 x 8192 in bfloat16, paying for every wave of 128 x 256
    tiles in full, at the rate of the 8192² product."""
    for slug, bench, record in data.records("tensor_cores_and_shapes.waves[*]"):
        x = record.extra
        rate = "tensor_cores_and_shapes.matmul[bf16]"
        peak = data.ceiling(slug, rate, "tflops")
        shape = est.matmul_waves(x["m"], x["n"], sms=x["sms"])
        if not peak or (shape["fill"] >= 0.95) != full:
            continue
        estimate = est.matmul_seconds(x["m"], x["n"], x["k"], peak * 1e12, sms=x["sms"])
        waves = f"{shape['waves']} wave{'s' if shape['waves'] > 1 else ''}"
        yield Point(f"m = {x['m']}: {waves}, last {shape['fill']:.0%} full",
                    bench.name, slug, record.run.id, estimate,
                    record.stats["median"] / x["ops"], "seconds", ((slug, rate),))


def _bubble(data: Data, many: bool) -> Iterator[Point]:
    """GPipe and 1F1B, one stage a GPU (the schedules the formula describes), against the
    median over profiled steps of each GPU's idle share of the step (idle_share)."""
    for slug, bench, record in data.records("pipeline_parallelism.step[*]"):
        x = record.extra
        if x["schedule"] not in ("gpipe", "1f1b") or (x["microbatches"] > x["stages"]) != many:
            continue
        m = x["microbatches"]
        yield Point(f"{x['schedule']}, {x['stages']} stages, {m} micro-batch"
                    f"{'es' if m != 1 else ''} of {x['microbatch_rows']} samples",
                    bench.name, slug, record.run.id,
                    est.bubble_fraction(x["stages"], x["microbatches"]), x["idle_share"],
                    "share")


CHECKS: dict[str, Check] = {
    "memory_one_gpu": Check("Peak memory of a training step on one GPU", "training_memory",
                            lambda d: (*_needing_less_memory(d), *_one_gpu_mlp(d))),
    "memory_ddp": Check("Peak memory per GPU under DDP", "training_memory",
                        lambda d: _ddp(d, bucket_view=False)),
    "memory_ddp_bucket_view": Check("Peak memory per GPU under DDP with "
                                    "gradient_as_bucket_view=True", "training_memory",
                                    lambda d: _ddp(d, bucket_view=True)),
    "memory_fsdp2": Check("Peak memory per GPU under FSDP2, 4096 samples a GPU",
                          "training_memory", lambda d: _fsdp2(d, small=True)),
    "memory_fsdp2_large": Check("Peak memory per GPU under FSDP2, larger batches",
                                "training_memory", lambda d: _fsdp2(d, small=False)),
    "memory_tp": Check("Peak memory per GPU of a transformer block under tensor parallelism",
                       "training_memory",
                       lambda d: (*_tensor_parallel(d, "one"), *_tensor_parallel(d, "tp"))),
    "memory_sp": Check("Peak memory per GPU with sequence parallelism besides",
                       "training_memory", lambda d: _tensor_parallel(d, "sp")),
    "copy_pinned": Check("Copies from and to pinned memory, at the link's speed",
                         "copy_seconds", lambda d: _copies(d, "pinned")),
    "copy_pageable": Check("Copies from and to pageable memory, at the link's speed",
                           "copy_seconds", lambda d: _copies(d, "pageable")),
    "all_reduce": Check("All-reduce of 16 MiB and more, from latency and bus bandwidth",
                        "collective_seconds", lambda d: _all_reduce(d, large=True)),
    "all_reduce_small": Check("All-reduce under 16 MiB, from latency and bus bandwidth",
                              "collective_seconds", lambda d: _all_reduce(d, large=False)),
    "all_reduce_gpus": Check("All-reduce on 4 GPUs from 2 GPUs' bus bandwidth",
                             "collective_seconds", _across_gpu_counts),
    "roofline": Check("A training step's compute-bound lower bound", "step_lower_bound",
                      _roofline),
    "waves_full": Check("Matrix products whose last wave is full", "matmul_seconds",
                        lambda d: _waves(d, full=True)),
    "waves_partial": Check("Matrix products whose last wave is partly empty", "matmul_seconds",
                           lambda d: _waves(d, full=False)),
    "bubble": Check("Pipeline bubble, up to one micro-batch a stage", "bubble_fraction",
                    lambda d: _bubble(d, many=False)),
    "bubble_many": Check("Pipeline bubble, more micro-batches", "bubble_fraction",
                         lambda d: _bubble(d, many=True)),
}


_cached: dict[str, tuple[tuple, Data]] = {}


def _inputs(root: Path) -> tuple:
    """What the points are made from: each run, and the code that decides what is stale."""
    found = []
    for folder in ("timings", "benchmarks", "snippets"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in (".json", ".py") and "__pycache__" not in path.parts:
                stat = path.stat()
                found.append((str(path), stat.st_size, stat.st_mtime_ns))
    return tuple(found)


def _data(root: str) -> Data:
    """The runs, read once and again only when a run or the code changed (`mkdocs serve`)."""
    key = _inputs(Path(root))
    if root not in _cached or _cached[root][0] != key:
        _cached[root] = (key, Data(Path(root)))
    return _cached[root][1]


def _collect(name: str, root: Path) -> tuple[list[Point], list[Pending]]:
    """Check `name`'s points the rule admits, and its cases that none of it measured yet."""
    if name not in CHECKS:
        raise TimingError(f"no estimate check {name!r} (known: {', '.join(CHECKS)})")
    data = _data(str(root))
    if name not in data._checks:
        found = list(CHECKS[name].points(data))
        try:  # cases whose code changed since their runs: named when their records allow
            found += CHECKS[name].points(data.stale_view())
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            pass
        counted, short = [], {}
        for p in found:
            why = [f"{b} on {m}: {reason}" for m, b in p.sources if (reason := data.short(m, b))]
            if why:
                short.setdefault((p.case, p.machine), set()).update(why)
            else:
                counted.append(p)
        measured = {(p.case, p.machine) for p in counted}
        pending = [Pending(case, machine, tuple(sorted(why)))
                   for (case, machine), why in short.items() if (case, machine) not in measured]
        if not counted and not pending:
            raise TimingError(f"estimate check {name!r}: no run measured its benchmarks with "
                              "the current code")
        data._checks[name] = (counted, pending)
    return data._checks[name]


def points(name: str, root: Path = ROOT) -> list[Point]:
    """Every point of check `name` the rule admits (none: every case is pending)."""
    found = _collect(name, root)[0]
    _data(str(root)).used.update(s for p in found for s in p.sources)
    return found


def pending(name: str, root: Path = ROOT) -> list[Pending]:
    """The cases of check `name` that no run the rule admits measured yet."""
    return _collect(name, root)[1]


def errors(name: str, root: Path = ROOT) -> list[float]:
    """Every admitted point's error; an error if there is none (a page may not quote it)."""
    found = points(name, root)
    if not found:
        raise TimingError(f"estimate check {name!r} is not measured yet: "
                          + "; ".join(w for p in pending(name, root) for w in p.why))
    return [p.error for p in found]


@dataclass(frozen=True)
class Row:
    """A table row: one case on one machine, over its runs."""

    case: str
    machine: str
    estimate: float
    measured: float    # median over the runs
    low: float         # the error's range over the runs
    high: float
    runs: int
    unit: str


def rows(name: str, root: Path = ROOT) -> list[Row]:
    grouped: dict[tuple[str, str], list[Point]] = {}
    for p in points(name, root):
        grouped.setdefault((p.case, p.machine), []).append(p)
    out = []
    for (case, machine), found in grouped.items():
        errs = [p.error for p in found]
        out.append(Row(case, machine, statistics.median(p.estimate for p in found),
                       statistics.median(p.measured for p in found), min(errs), max(errs),
                       len(found), found[0].unit))
    return out
