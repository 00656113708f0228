"""`make timings-report`: how the kept runs agree, per GPU.

    python3 -m fieldguide.measuring.report            # every GPU under timings/
    python3 -m fieldguide.measuring.report --gpu SLUG # one GPU

Lists the runs (date, commit, complete or partial, machine lease), then the benchmarks whose runs
disagree by more than 20 % (slowest median over fastest) and which lease was slowest, the ones
whose rounds spread wider than their median within a run, and the ones measured in too few runs
or on too few leases. Needs no GPU and no torch.
Exits 0; it reports, it does not judge (the claims tests judge).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from fieldguide.measuring.host_bound import host_bound
from fieldguide.measuring.numbers import format_seconds
from fieldguide.measuring.timings import (
    DISAGREEMENT,
    LEASES_WANTED,
    RUNS_WANTED,
    TIMINGS_DIR,
    TimingError,
    Timings,
    all_timings,
)


def report(timings: Timings) -> list[str]:
    unrecorded = sum(1 for run in timings.runs if not run.lease)
    lines = [f"{timings.gpu} ({timings.slug}): {len(timings.runs)} run(s) on "
             f"{len(timings.leases())} recorded machine lease(s)"
             + (f" ({unrecorded} run(s) recorded no lease)" if unrecorded else "")]
    for run in timings.runs:
        fp = run.fingerprint
        kind = "complete" if fp.get("complete") else "partial"
        count = len(run.data["benchmarks"])
        lines.append(f"  {run.id}: {kind}, {count} benchmark(s), commit {run.commit[:10]}, "
                     f"lease {(run.lease or 'not recorded')[:12]}, torch {fp.get('torch')}"
                     + (", a process per module" if fp.get("process_per_module") else ""))
    disagree, unsteady, few = [], [], []
    for bench in timings.benchmarks:
        spread = bench.spread("median")
        if spread:
            disagree.append((spread[1] / spread[0], bench, bench.per_run("median")))
        if bench.unsteady():
            unsteady.append(bench)
        if len(bench.records) < RUNS_WANTED:
            few.append(bench)
    root = timings.source.parent.parent  # timings/<gpu> of a checkout: its benchmarks' root
    marked = {b.name for _, b, _ in disagree if host_bound(b, root)}
    lines.append(f"  runs disagree by more than {DISAGREEMENT - 1:.0%}: {len(disagree)} "
                 f"({len(marked)} marked host-bound: HOST_BOUND beside the benchmark)")
    for factor, bench, medians in sorted(disagree, key=lambda t: -t[0]):
        shown = ", ".join(format_seconds(m) for m in medians)
        tag = "  [host-bound]" if bench.name in marked else ""
        lines.append(f"    {factor:5.2f}x  {bench.name}: {shown}{tag}")
    if disagree:  # one lease slowest nearly everywhere: that machine, not the method
        slowest = Counter((max(b.records, key=lambda r: r.stats["median"]).run.lease
                           or "not recorded")[:12] for _, b, _ in disagree)
        lines.append("  the slowest run of those, by lease: "
                     + ", ".join(f"{lease} {n}" for lease, n in slowest.most_common()))
    lines.append(f"  rounds spread wider than their median (IQR > median) in some run: {len(unsteady)}")
    for bench in unsteady:
        worst = max(bench.records, key=lambda r: r.stats["iqr"] / r.stats["median"])
        lines.append(f"    {bench.name}: median {format_seconds(worst.stats['median'])}, "
                     f"IQR {format_seconds(worst.stats['iqr'])} ({worst.run.id})")
    lines.append(f"  measured in fewer than {RUNS_WANTED} runs: {len(few)} of {len(timings.benchmarks)}")
    one_lease = [b for b in timings.benchmarks if len({r.run.lease for r in b.records}) < LEASES_WANTED]
    lines.append(f"  measured on fewer than {LEASES_WANTED} leases: {len(one_lease)} of "
                 f"{len(timings.benchmarks)}")
    superseded = sum(len(b.superseded) for b in timings.benchmarks)
    if superseded:
        lines.append(f"  records of older code kept as history: {superseded}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make timings-report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", help="one GPU's folder name under timings/ (default: all)")
    parser.add_argument("--dir", type=Path, default=TIMINGS_DIR, help="the timings folder")
    args = parser.parse_args(argv)
    try:
        found = [Timings.for_gpu(args.gpu, args.dir)] if args.gpu else all_timings(args.dir)
    except TimingError as exc:
        print(f"make timings-report: error: {exc}", file=sys.stderr)
        return 2
    for timings in found:
        print("\n".join(report(timings)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
