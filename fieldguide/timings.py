"""The timings JSON: what the timing run writes and the site reads.

One file per GPU model, `timings/<gpu-slug>.json`:

    {
      "schema": 1,
      "gpu": "NVIDIA H100 80GB HBM3",
      "runs": {"<run id>": {<fingerprint: GPU, driver, CUDA, torch, cupy, python, commit, date>}},
      "benchmarks": {
        "<name>": {
          "run": "<run id>",
          "stats": {"median": s, "q1": s, "q3": s, "iqr": s, "mean": s, "stddev": s,
                    "min": s, "max": s, "rounds": n},
          "extra": {...},                       # what the benchmark recorded (sizes, labels, ...)
          "files": [{"path": "snippets/...", "sha256": "..."}, ...]
        }
      }
    }

Every record points at the run that measured it, so a file merged from a full run and a later
partial one still says where each number came from. Times are in seconds.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fieldguide import ROOT

SCHEMA = 1
TIMINGS_DIR = ROOT / "timings"
TIME_FIELDS = ("median", "q1", "q3", "iqr", "mean", "stddev", "min", "max")
DERIVED_FIELDS = ("bandwidth_gbs", "tflops", "per_op")


class TimingError(LookupError):
    """A page or a tool asked for timing data that is missing, malformed or stale."""


def gpu_slug(gpu_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")
    if not slug:
        raise ValueError(f"cannot make a file name from GPU name {gpu_name!r}")
    return slug


def sha256_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def file_entry(relpath: str, root: Path = ROOT) -> dict[str, str]:
    return {"path": relpath, "sha256": sha256_of(root / relpath)}


@dataclass(frozen=True)
class Record:
    name: str
    data: dict[str, Any]
    run: dict[str, Any]

    @property
    def stats(self) -> dict[str, float]:
        return self.data["stats"]

    @property
    def extra(self) -> dict[str, Any]:
        return self.data.get("extra", {})

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
        if field in self.extra:
            return self.extra[field]
        known = sorted({*TIME_FIELDS, "rounds", *DERIVED_FIELDS, *self.extra})
        raise TimingError(f"benchmark {self.name!r} has no field {field!r} (known: {', '.join(known)})")

    def _require_extra(self, key: str) -> float:
        if key not in self.extra:
            raise TimingError(f"benchmark {self.name!r} recorded no {key!r}, which this field needs")
        return self.extra[key]

    def stale_files(self, root: Path = ROOT) -> list[str]:
        """Paths whose content no longer matches what was timed (or that are gone)."""
        stale = []
        for entry in self.data.get("files", []):
            path = root / entry["path"]
            if not path.is_file() or sha256_of(path) != entry["sha256"]:
                stale.append(entry["path"])
        return stale


class Timings:
    """One GPU's timings file."""

    def __init__(self, data: dict[str, Any], source: Path):
        if data.get("schema") != SCHEMA:
            raise TimingError(f"{source}: schema {data.get('schema')!r}, expected {SCHEMA}")
        self.data = data
        self.source = source

    @classmethod
    def load(cls, path: Path) -> Timings:
        path = Path(path)
        if not path.is_file():
            raise TimingError(f"no timings file {path}; run `make timings` on that GPU")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise TimingError(f"{path} is not valid JSON: {exc}") from exc
        return cls(data, path)

    @classmethod
    def for_gpu(cls, slug: str, directory: Path = TIMINGS_DIR) -> Timings:
        return cls.load(Path(directory) / f"{slug}.json")

    @property
    def names(self) -> list[str]:
        return sorted(self.data["benchmarks"])

    def record(self, name: str) -> Record:
        try:
            data = self.data["benchmarks"][name]
        except KeyError:
            raise TimingError(
                f"{self.source.name} has no benchmark {name!r}; is it spelled right, "
                "and has `make timings` run since it was added?"
            ) from None
        return Record(name, data, self.data["runs"][data["run"]])

    def matching(self, pattern: str) -> list[Record]:
        """Records whose name matches `pattern`, where `*` is the only wildcard.

        (Brackets are literal: benchmark names carry parameters such as `[pinned-1KiB]`.)
        """
        regex = re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + r"\Z")
        names = [n for n in self.data["benchmarks"] if regex.match(n)]
        names.sort(key=lambda n: (self.data["benchmarks"][n].get("order", float("inf")), n))
        hits = [self.record(n) for n in names]
        if not hits:
            raise TimingError(f"{self.source.name} has no benchmark matching {pattern!r}")
        return hits


def fingerprint_caption(run: dict[str, Any]) -> str:
    """One line saying where and when a number was measured."""
    memory_gib = run["memory_bytes"] / 2**30
    parts = [
        f"{run['gpu_name']} (sm_{run['compute_capability'].replace('.', '')}, "
        f"{run['sm_count']} SMs, {memory_gib:.0f} GiB)",
        f"driver {run['driver']}",
        f"CUDA {run['cuda_runtime']}",
        f"PyTorch {run['torch']}",
        f"CuPy {run['cupy'] or 'not installed'}",
        f"Python {run['python']}",
        f"commit {run['git_commit'][:10]}{'+dirty' if run.get('git_dirty') else ''}",
        run["date"][:10],
    ]
    return "Measured on " + ", ".join(parts)


def format_seconds(seconds: float) -> str:
    """Seconds in the unit a reader expects: 3.2 µs, 41.0 ms, 1.25 s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_value(field: str, value: Any, spec: str | None = None) -> str:
    if spec:
        return format(value, spec)
    if field in TIME_FIELDS or field == "per_op":
        return format_seconds(value)
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
