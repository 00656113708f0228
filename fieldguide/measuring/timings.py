"""The timings: every run the timing run made, kept, and what the site reads from them.

One folder per GPU model, one file per timing run, each file pytest-benchmark's own JSON
(`pytest-benchmark compare timings/nvidia-h100-80gb-hbm3/*.json` reads them):

    timings/<machine>/<YYYYmmddTHHMMSSZ>_<commit>.json   machine: e.g. 2x-nvidia-h200
        machine_info.fieldguide   the GPU, driver, CUDA, torch, CuPy, NumPy, host CPU, boot id
        commit_info               the commit measured
        benchmarks[]              name, fullname, stats (seconds), extra_info (what the benchmark
                                  recorded, and `code`: the staleness key of each file it ran)

A benchmark's value on a page is the median over the runs that measured its current code, with
the range where runs disagree. Records of older code stay in their files as history but are
superseded; if the newest records' code no longer matches the tree, the number is stale.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from fieldguide import ROOT
from fieldguide.measuring.codekey import code_keys

TIMINGS_DIR = ROOT / "timings"
TIME_FIELDS = ("median", "q1", "q3", "iqr", "mean", "stddev", "min", "max")
DERIVED_FIELDS = ("bandwidth_gbs", "tflops", "per_op")
DISAGREEMENT = 1.2  # runs "disagree" when the slowest run's median exceeds the fastest's by 20 %


# A claim rests on RUNS_WANTED runs of the current code from LEASES_WANTED machine leases of the
# reference GPU (runs on one lease share its host's quirks): the timing run's --wanted measures
# toward it, the report lists what falls short, and the build fails a published page below it.
RUNS_WANTED = 3
LEASES_WANTED = 2


class TimingError(LookupError):
    """A page or a tool asked for timing data that is missing, malformed or stale."""


def gpu_slug(gpu_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")
    if not slug:
        raise ValueError(f"cannot make a file name from GPU name {gpu_name!r}")
    return slug


def machine_slug(fingerprint: dict[str, Any]) -> str:
    """A run's folder: the GPU model, prefixed with the GPU count on a machine of several
    ('2x-nvidia-h200'), whose numbers (a link, a collective) belong to the machine, not one GPU."""
    slug = gpu_slug(fingerprint["gpu_name"])
    count = fingerprint.get("gpu_count") or 1
    return slug if count == 1 else f"{count}x-{slug}"


def link_summary(topology: str | None) -> str | None:
    """How the GPUs are joined, from `nvidia-smi topo -m`: 'NVLink (NV18)' or 'PCIe (SYS)' for
    two; for more, whether every pair has the same link (NVSwitch: NV18 between every pair)
    or which pairs have which (direct links to some neighbours only)."""
    if not topology:
        return None
    rows: dict[int, list[str]] = {}
    for line in topology.splitlines():
        words = re.sub(r"\x1b\[[0-9;]*m", "", line).split()
        found = re.fullmatch(r"GPU(\d+)", words[0]) if words else None
        if found and len(words) > int(found[1]) + 1 and words[int(found[1]) + 1] == "X":
            rows[int(found[1])] = words[1:]  # a matrix row: X where the GPU meets itself
    gpus = sorted(rows)
    if len(gpus) < 2 or gpus != list(range(len(gpus))):
        return None
    pairs = Counter(rows[i][j] for i in gpus for j in gpus if i < j)

    def named(link: str) -> str:
        return f"NVLink ({link})" if link.startswith("NV") else f"PCIe ({link})"

    if len(pairs) == 1:
        link = named(next(iter(pairs)))
        return link if len(gpus) == 2 else f"{link} between every pair of the {len(gpus)} GPUs"
    return ", ".join(f"{named(link)} between {count} pair{'s' if count > 1 else ''}"
                     for link, count in pairs.most_common()) + f" of the {len(gpus)} GPUs"


def benchmark_name(fullname: str) -> str:
    """`benchmarks/bench_pinned_memory.py::bench_h2d[pinned-1KiB]` -> `pinned_memory.h2d[pinned-1KiB]`."""
    file_part, _, func = fullname.partition("::")
    module = Path(file_part).stem.removeprefix("bench_")
    return f"{module}.{func.removeprefix('bench_')}"


def benchmark_location(fullname: str) -> tuple[str, str]:
    """(benchmark file, function) of a pytest-benchmark fullname."""
    file_part, _, func = fullname.partition("::")
    return file_part, func.split("[", 1)[0]


@dataclass(frozen=True)
class Run:
    """One timing run: one pytest-benchmark JSON file."""

    id: str
    data: dict[str, Any]

    @property
    def fingerprint(self) -> dict[str, Any]:
        """The GPU side (ours) with the host side that pytest-benchmark recorded."""
        info = self.data["machine_info"]
        cpu = info.get("cpu") or {}
        return {"python": info.get("python_version"), "cpu_brand": cpu.get("brand_raw"),
                "cpu_count": cpu.get("count"), **info["fieldguide"],
                "git_dirty": bool(self.data.get("commit_info", {}).get("dirty"))}

    @property
    def date(self) -> str:
        return self.data["datetime"]

    @property
    def commit(self) -> str:
        return self.data.get("commit_info", {}).get("id") or "unknown"

    @property
    def lease(self) -> str | None:
        """What tells machine leases apart: the host's boot id (a fresh machine boots anew)."""
        return self.fingerprint.get("boot_id")


@dataclass(frozen=True)
class Record:
    """One benchmark's measurement in one run."""

    name: str
    data: dict[str, Any]
    run: Run

    @property
    def stats(self) -> dict[str, float]:
        return self.data["stats"]

    @property
    def extra(self) -> dict[str, Any]:
        return {k: v for k, v in self.data.get("extra_info", {}).items() if k != "code"}

    @property
    def code(self) -> dict[str, str]:
        return self.data.get("extra_info", {}).get("code", {})

    def value(self, field: str, stat: str = "median") -> Any:
        """A stat (seconds), a recorded extra, or a derived quantity.

        Derived: `bandwidth_gbs` = extra["bytes"] / time / 1e9 (decimal GB/s),
        `tflops` = extra["flops"] / time / 1e12, and `per_op` = time / extra["ops"].
        `stat` picks which time a derived value uses.
        """
        if field in TIME_FIELDS or field == "rounds":
            return self.stats[field]
        if field == "bandwidth_gbs":
            return self._require_extra("bytes") / self.stats[stat] / 1e9
        if field == "tflops":
            return self._require_extra("flops") / self.stats[stat] / 1e12
        if field == "per_op":
            return self.stats[stat] / self._require_extra("ops")
        extra = self.extra
        if field in extra:
            return extra[field]
        known = sorted({*TIME_FIELDS, "rounds", *DERIVED_FIELDS, *extra})
        raise TimingError(f"benchmark {self.name!r} has no field {field!r} (known: {', '.join(known)})")

    def _require_extra(self, key: str) -> float:
        if key not in self.extra:
            raise TimingError(f"benchmark {self.name!r} recorded no {key!r}, which this field needs")
        return self.extra[key]


def disagreeing_range(values: list[Any]) -> tuple[float, float] | None:
    """(lowest, highest) of the numbers among `values` (one per run) when the highest exceeds
    the lowest by more than DISAGREEMENT; None when they agree or are too few to compare."""
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) < 2 or min(numbers) <= 0:
        return None
    low, high = min(numbers), max(numbers)
    return (low, high) if high > DISAGREEMENT * low else None


@dataclass
class Benchmark:
    """Every run's record of one benchmark's current code, and what a page shows of them."""

    name: str
    fullname: str
    records: list[Record]                 # measured the newest code, oldest run first
    superseded: list[Record] = field(default_factory=list)  # measured older code

    @property
    def runs(self) -> list[Run]:
        return [r.run for r in self.records]

    @property
    def newest(self) -> Record:
        return self.records[-1]

    @property
    def code(self) -> dict[str, str]:
        return self.newest.code

    @property
    def extra(self) -> dict[str, Any]:
        """What the benchmark recorded, as of its newest run."""
        return self.newest.extra

    @property
    def stats(self) -> dict[str, float]:
        """Each statistic's median over runs (for one run, that run's statistics)."""
        return {k: statistics.median(r.stats[k] for r in self.records)
                for k in (*TIME_FIELDS, "rounds")}

    def per_run(self, field: str) -> list[Any]:
        return [r.value(field) for r in self.records]

    def value(self, field: str, stat: str = "median") -> Any:
        """The median over runs of a number; a recorded non-number from the newest run."""
        values = [r.value(field, stat) for r in self.records]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            median = statistics.median(values)
            # a setting recorded as an integer (num_workers, ops, a size) stays one: the median
            # of an even number of runs comes back as 8.0, which would read "8.00 workers"
            if all(isinstance(v, int) for v in values) and float(median).is_integer():
                return int(median)
            return median
        return values[-1]

    def spread(self, field: str = "median") -> tuple[float, float] | None:
        """(lowest, highest) over runs when they disagree by more than DISAGREEMENT, else None."""
        return disagreeing_range(self.per_run(field))

    def unsteady(self) -> bool:
        """Within a run: the rounds' spread exceeds their median, so one number hides two cases."""
        return any(r.stats["iqr"] > r.stats["median"] for r in self.records)


class CodeKeys:
    """Staleness keys of the tree as it is now, each file parsed once per (benchmark, files)."""

    def __init__(self, root: Path = ROOT):
        self.root = root
        self._cache: dict[tuple, dict[str, str]] = {}
        self.computed = 0

    def current(self, fullname: str, paths: list[str]) -> dict[str, str] | None:
        bench_file, function = benchmark_location(fullname)
        snippets = tuple(p for p in paths if p != bench_file)
        key = (bench_file, function, snippets)
        if key not in self._cache:
            missing = [p for p in (bench_file, *snippets) if not (self.root / p).is_file()]
            try:
                self._cache[key] = None if missing else code_keys(self.root, bench_file, function,
                                                                  list(snippets))
            except (LookupError, SyntaxError):
                self._cache[key] = None
            self.computed += 1
        return self._cache[key]

    def stale_files(self, benchmark: Benchmark) -> list[str]:
        """Files whose timed code changed since the newest records (or that are gone)."""
        recorded = benchmark.code
        now = self.current(benchmark.fullname, list(recorded)) or {}
        return [p for p, key in recorded.items() if now.get(p) != key]


class Timings:
    """All runs of one GPU model."""

    def __init__(self, slug: str, runs: list[Run], source: Path):
        self.slug = slug
        self.source = source
        self.runs = sorted(runs, key=lambda r: r.date)
        if not self.runs:
            raise TimingError(f"{source} holds no timing runs; run `make timings` on that GPU")
        names = {r.data["machine_info"]["fieldguide"]["gpu_name"] for r in self.runs}
        if len(names) > 1:
            raise TimingError(f"{source} mixes runs of different GPUs: {', '.join(sorted(names))}")
        counts = {r.data["machine_info"]["fieldguide"].get("gpu_count") or 1 for r in self.runs}
        if len(counts) > 1:
            raise TimingError(f"{source} mixes machines of {' and '.join(map(str, sorted(counts)))}"
                              " GPUs: a machine of several has its own folder (machine_slug)")
        count = counts.pop()
        self.gpu = names.pop() if count == 1 else f"{count} × {names.pop()}"
        self._benchmarks = self._collect()

    @classmethod
    def load(cls, directory: Path) -> Timings:
        directory = Path(directory)
        if not directory.is_dir():
            raise TimingError(f"no timings folder {directory}; run `make timings` on that GPU")
        runs = []
        for path in sorted(directory.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise TimingError(f"{path} is not valid JSON: {exc}") from exc
            if "fieldguide" not in data.get("machine_info", {}) or "benchmarks" not in data:
                raise TimingError(f"{path} is not a timing run of this project (no machine_info."
                                  "fieldguide or no benchmarks)")
            runs.append(Run(path.stem, data))
        return cls(directory.name, runs, directory)

    @classmethod
    def for_gpu(cls, slug: str, directory: Path = TIMINGS_DIR) -> Timings:
        return cls.load(Path(directory) / slug)

    def _collect(self) -> dict[str, Benchmark]:
        by_name: dict[str, list[tuple[Record, str]]] = {}
        order: dict[str, tuple[int, int]] = {}
        for run in self.runs:
            for position, bench in enumerate(run.data["benchmarks"]):
                name = benchmark_name(bench["fullname"])
                by_name.setdefault(name, []).append((Record(name, bench, run), bench["fullname"]))
                if run.fingerprint.get("complete"):  # pages list benchmarks in the order they ran
                    order[name] = (0, position)
                else:
                    order.setdefault(name, (1, position))
        benchmarks = {}
        for name, entries in by_name.items():
            newest_code = entries[-1][0].code
            current = [r for r, _ in entries if r.code == newest_code]
            older = [r for r, _ in entries if r.code != newest_code]
            benchmarks[name] = Benchmark(name, entries[-1][1], current, older)
        return dict(sorted(benchmarks.items(), key=lambda kv: (order[kv[0]], kv[0])))

    @property
    def names(self) -> list[str]:
        return sorted(self._benchmarks)

    @property
    def benchmarks(self) -> list[Benchmark]:
        return list(self._benchmarks.values())

    def benchmark(self, name: str) -> Benchmark:
        try:
            return self._benchmarks[name]
        except KeyError:
            raise TimingError(
                f"{self.source.name} has no benchmark {name!r}; is it spelled right, "
                "and has `make timings` run since it was added?"
            ) from None

    def matching(self, pattern: str) -> list[Benchmark]:
        """Benchmarks whose name matches `pattern`, where `*` is the only wildcard.

        (Brackets are literal: benchmark names carry parameters such as `[pinned-1KiB]`.)
        In the order the benchmarks ran.
        """
        hits = [b for b in self._benchmarks.values() if matches(pattern, b.name)]
        if not hits:
            raise TimingError(f"{self.source.name} has no benchmark matching {pattern!r}")
        return hits

    def run_views(self) -> list[RunView]:
        """One view per run, holding that run's records of each benchmark's current code."""
        return [RunView(self, run) for run in self.runs]

    def leases(self) -> set[str]:
        """The machine leases the runs came from, where a run recorded its lease."""
        return {run.lease for run in self.runs if run.lease}


@dataclass
class RunView:
    """What one run measured: the same questions as Timings, answered from that run alone."""

    timings: Timings
    run: Run

    @cached_property
    def _records(self) -> dict[str, Record]:
        found = {}
        for bench in self.timings.benchmarks:
            for record in bench.records:
                if record.run is self.run:
                    found[bench.name] = record
        return found

    def has(self, *names: str) -> bool:
        return all(n in self._records for n in names)

    def record(self, name: str) -> Record:
        try:
            return self._records[name]
        except KeyError:
            raise TimingError(f"run {self.run.id} did not measure {name!r}") from None

    def value(self, name: str, field: str = "median") -> Any:
        return self.record(name).value(field)

    def __str__(self) -> str:
        return f"{self.timings.slug}/{self.run.id}"


def matches(pattern: str, name: str) -> bool:
    """`*` is the only wildcard: benchmark names contain brackets."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, name) is not None


def runs_measuring(timings: list[Timings], *names: str,
                   keys: CodeKeys | None = None) -> list[RunView]:
    """Every run, of every GPU, whose records of the current code include all of `names`.

    With `keys` (the tree's code keys), a GPU whose newest records of one of `names` measured
    code that has changed since gives no run: its numbers belong to other code, and a claim
    about this code is checked on the GPUs that measured it, or fails where none has."""
    found, stale = [], []
    for t in timings:
        if keys is not None and any(keys.stale_files(b) for b in t.benchmarks if b.name in names):
            stale.append(t.slug)
            continue
        found += [view for view in t.run_views() if view.has(*names)]
    if not found:
        older = (f" with the current code (the runs on {', '.join(stale)} measured code that "
                 "has changed since: re-measure)" if stale else "")
        raise TimingError(f"no recorded run measured all of {', '.join(names)}{older}")
    return found


def all_timings(directory: Path = TIMINGS_DIR) -> list[Timings]:
    """Every GPU's timings under `directory`."""
    return [Timings.load(d) for d in sorted(Path(directory).iterdir()) if d.is_dir()]
