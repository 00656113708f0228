"""Numbers that measure the host: declared once, beside their benchmark, and said so on the page.

A benchmark that times Python, kernel launches, allocation, page-locking, process start or the
CPU's own work measures the host as much as the GPU: across machine leases that report the same
CPU it moves by 2-4x, where a GPU-bound number holds within a few percent. Its module declares
it, at module level, as a literal dict read without running anything (like LABELS):

    HOST_BOUND = {"launch_only": "Python and one kernel launch",        # a benchmark function
                  "copy[*-pageable-*]": "the host's copy through a staging buffer"}  # or ids

A key is a function (every parameter of it) or `function[ids]`, where `*` is the only wildcard;
the value says what of the host the number measures. An assignment that no benchmark reads
never enters a code key (fieldguide/measuring/codekey.py), so marking a benchmark makes nothing stale.

The renderers (fieldguide/rendering/shortcodes.py) ask `host_bound(bench, root)`; for a marked benchmark
a number reads with its range over every run and the machines they ran on
(`spread_note`), and `hosts_line` names the host CPUs under a table. Claims about such numbers
compare ratios measured within one run (the `measured` fixture), never a number across runs.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from fieldguide.measuring.numbers import SIZE_SUFFIXES, SUFFIXES, format_range
from fieldguide.measuring.timings import DERIVED_FIELDS, TIME_FIELDS, Benchmark, benchmark_location, matches


@cache
def declarations(path: Path) -> dict[str, str]:
    """HOST_BOUND of one benchmark module; empty where it declares none."""
    if not path.is_file():
        return {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "HOST_BOUND"):
            declared = ast.literal_eval(node.value)
            if not (isinstance(declared, dict) and all(
                    isinstance(k, str) and isinstance(v, str) and v for k, v in declared.items())):
                raise ValueError(f"{path}: HOST_BOUND must map benchmark names to what of the "
                                 "host they measure (non-empty strings)")
            return declared
    return {}


def host_bound(bench: Benchmark, root: Path) -> str | None:
    """What of the host `bench` measures, or None where its module does not mark it."""
    bench_file, function = benchmark_location(bench.fullname)
    short = bench.name.split(".", 1)[1]  # "copy[h2d-pageable-1KiB]"
    for key, reason in declarations(root / bench_file).items():
        if key == function.removeprefix("bench_") or matches(key, short):
            return reason
    return None


def unmatched_keys(path: Path, names: list[str]) -> list[str]:
    """Keys of a module's HOST_BOUND that name none of `names` (its benchmarks' short names):
    a misspelt key would mark nothing, silently."""
    return [key for key in declarations(path)
            if not any(key == name.split("[", 1)[0] or matches(key, name) for name in names)]


def measured_field(field: str) -> bool:
    """A time, a quantity derived from one, or a recorded field with a unit (`step_us`,
    `items_per_s`): what moves with the host. A setting the benchmark recorded
    (`num_workers`, `bytes`) does not, nor does a size it measured (`peak_bytes`,
    `peak_gpu0_gib`): HOST_BOUND says what of the host the benchmark's time measures."""
    if field in (*TIME_FIELDS, *DERIVED_FIELDS):
        return True
    if field.endswith(SIZE_SUFFIXES):
        return False
    return any(field.endswith(suffix) for suffix in SUFFIXES)


def machines(bench: Benchmark) -> int:
    """How many machine leases measured the current code (a run without a lease counts alone)."""
    return len({r.run.lease or r.run.id for r in bench.records})


def spread_note(bench: Benchmark, field: str = "median", spec: str | None = None,
                unit: str = "") -> str:
    """'host-bound: 8.1 µs–15 µs over 5 runs on 3 machines': the whole range, however close."""
    values = [v for v in bench.per_run(field) if isinstance(v, (int, float))]
    runs = f"{len(bench.records)} run" + ("s" if len(bench.records) > 1 else "")
    count = machines(bench)
    where = f"{count} machine" + ("s" if count > 1 else "")
    if len(values) > 1:  # the ends in the value's own unit, written once (fieldguide/measuring/timings.py)
        _, ends = format_range(field, bench.value(field), min(values), max(values), spec)
        glued = unit in ("×", "%") and not ends.endswith(unit)
        return f"host-bound: {ends}{unit if glued else ''} over {runs} on {where}"
    return f"host-bound: {runs} on {where}"


def hosts(benches: list[Benchmark]) -> list[str]:
    """The host CPUs of the runs behind `benches`, as their runs recorded them."""
    found = []
    for bench in benches:
        for record in bench.records:
            fp = record.run.fingerprint
            cpu = (f"{fp['cpu_brand']}, {fp['cpu_count']} cores" if fp.get("cpu_brand")
                   else "host CPU not recorded")
            if cpu not in found:
                found.append(cpu)
    return found


def hosts_line(benches: list[Benchmark], reasons: list[str]) -> str:
    """The note under a table with host-bound rows: what they measure, and on which hosts."""
    what = "; ".join(dict.fromkeys(reasons))
    return (f"*host-bound* rows measure the host ({what}) more than the GPU: such a number "
            "moves with the machine, even between machines that report the same CPU, so each "
            f"gives its range over every run and machine. Hosts: {' · '.join(hosts(benches))}.")
