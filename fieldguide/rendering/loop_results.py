"""Markdown extension: `<!-- loop-benchmark -->` on a page becomes the table of the loop's times.

`make loop-benchmark` (benchmarks/loop/run.py) times a contributor's loop in a fresh clone and
appends each run to benchmarks/loop/results.json, with the targets it is measured against. This
extension writes the newest measurement of each step into the contributing guide, and the spread
of its newest runs (runs of one tree differ by tens of seconds), so the guide's numbers are the
file's: never typed, never older than the last run. A missing or malformed file is a page problem
that fails every build (fieldguide/rendering/unrendered.py raises it), naming the file and the command that
writes it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from markdown import Extension
from markdown.preprocessors import Preprocessor

from fieldguide import ROOT
from fieldguide.rendering import unrendered

MARKER = "<!-- loop-benchmark -->"
RESULTS = "benchmarks/loop/results.json"
# `make stress` (tests/stress.py) launches every local multi-process case many times and appends
# its failures by cause to STRESS_RESULTS: `<!-- stress-check -->` shows the newest run.
STRESS_MARKER = "<!-- stress-check -->"
STRESS_RESULTS = "benchmarks/loop/stress.json"


def newest_steps(results: dict) -> dict[str, tuple[dict, dict]]:
    """step name -> (its newest measurement, the run that made it), in the order steps first ran."""
    found: dict[str, tuple[dict, dict]] = {}
    for run in results["runs"]:
        for name, step in run["steps"].items():
            found.pop(name, None)
            found[name] = (step, run)
    order = [name for run in results["runs"] for name in run["steps"]]
    return dict(sorted(found.items(), key=lambda kv: order.index(kv[0])))


RECENT = 5  # the spread column: a step's wall time over its newest RECENT runs


def recent_walls(results: dict, name: str) -> list[float]:
    """The wall times of step `name` in its newest RECENT runs, oldest first."""
    return [run["steps"][name]["wall_s"] for run in results["runs"] if name in run["steps"]][-RECENT:]


def _spread(walls: list[float]) -> str:
    if len(walls) < 2:
        return "one run"
    return f"{_seconds(min(walls))} – {_seconds(max(walls))} ({len(walls)} runs)"


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.1f} min"


def table(results: dict) -> list[str]:
    """Markdown: one row per step (its newest measurement), then how and where it was measured."""
    lines = ["| Step | Target | Wall time | CPU time | Load average (1 min) | Measured "
             f"| Wall time, its last {RECENT} runs |",
             "|:--|--:|--:|--:|:--|:--|:--|"]
    runs_used = []
    for name, (step, run) in newest_steps(results).items():
        target = run.get("targets", {}).get(name)
        passed = step.get("rc", 0) == 0 and step.get("answered", True) and step.get("shown", True)
        load = f"{step['load_before'][0]:.1f} → {step['load_after'][0]:.1f}"
        lines.append(f"| {run.get('labels', {}).get(name, name)} | "
                     f"{_seconds(target) if target else '—'} | "
                     f"{_seconds(step['wall_s'])}{'' if passed else ' (failed)'} | "
                     f"{_seconds(step['cpu_s'])} | {load} | {run['date'][:10]}, `{run['commit']}` | "
                     f"{_spread(recent_walls(results, name))} |")
        if run not in runs_used:
            runs_used.append(run)
    lines.append("")
    for run in runs_used:
        machine = run["machine"]
        lines.append(f"- {run['date'][:16].replace('T', ' ')} UTC, `{run['commit']}`: "
                     f"{machine['cpus']} × {machine['cpu_model']}, Python {machine['python']}."
                     + (f" {run['note']}" if run.get("note") else ""))
    return lines


def code_key(files: list[str], read) -> str:
    """A short hash of `files` (paths in the repository) and their contents (`read(path)`: bytes).
    A stress run records each case's files and key (tests/stress.py's CASE_FILES)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + read(path) + b"\0")
    return digest.hexdigest()[:12]


def _current(code: dict, root: Path) -> bool:
    """Whether a run's record of a case's code (files and key) is that code as it is now."""
    try:
        return code_key(code["files"], lambda path: (root / path).read_bytes()) == code["key"]
    except OSError:  # a file the case ran is gone
        return False


def stress_table(results: dict, root: Path = ROOT) -> list[str]:
    """Markdown: for each case and machine, the launches and failures of the case's current code
    alone and under load, summed over every run that launched that code (a run records each
    case's files and their key; a run of code changed since counts no more), the causes of the
    failures and the seconds one launch took; then the runs counted."""
    rows: dict[tuple[str, str], dict] = {}
    counted, stale = [], 0
    for run in results["runs"]:
        machine = run["machine"]
        label = f"{machine['cpus']} CPUs, Python {machine['python']}"
        used = False
        for phase, cases in run["phases"].items():
            for case, found in cases.items():
                row = rows.setdefault((case, label), {"alone": [0, 0], "load": [0, 0], "busy": set(),
                                                      "causes": {}, "seconds": [], "skipped": None})
                if not _current(run.get("code", {}).get(case, {"files": [], "key": ""}), root):
                    continue
                used = True
                if "skipped" in found:
                    row["skipped"] = found["skipped"]
                    continue
                kind = "alone" if phase == "alone" else "load"
                if kind == "load":
                    row["busy"].add(int(phase.removeprefix("load-")))
                row[kind][0] += found["failures"]
                row[kind][1] += found["launches"]
                for cause, n in found["causes"].items():
                    row["causes"][cause] = row["causes"].get(cause, 0) + n
                row["seconds"].append(found["s_per_launch"])
        if used:
            counted.append(run)
        else:
            stale += 1
    lines = ["| Case | Machine | Alone: failed / launches | Beside busy processes: failed / "
             "launches | Causes | One launch |", "|:--|:--|--:|--:|:--|--:|"]
    for (case, label), row in rows.items():
        if not row["alone"][1] and not row["load"][1]:
            cells = [row["skipped"] and "skipped" or "no run of this code"] * 2
        else:
            busy = "/".join(str(n) for n in sorted(row["busy"]))
            cells = [f"{row['alone'][0]} / {row['alone'][1]}",
                     f"{row['load'][0]} / {row['load'][1]}" + (f" ({busy} busy)" if busy else "")]
        seconds = row["seconds"]
        lines.append(f"| `{case}` | {label} | " + " | ".join(cells) + " | "
                     + ("; ".join(f"{c} ({n})" for c, n in row["causes"].items()) or "none") + " | "
                     + (f"{_launch(min(seconds))} – {_launch(max(seconds))} s" if seconds else "—")
                     + " |")
    lines.append("")
    for run in counted:
        machine = run["machine"]
        streams = run.get("streams", 1)
        lines.append(f"- {run['date'][:16].replace('T', ' ')} UTC, `{run['commit']}`: "
                     f"{machine['cpus']} CPUs, Python {machine['python']}"
                     + (f", torch {machine['torch']}" if "torch" in machine else "")
                     + ", load average (1 min) "
                     f"{machine['load_before'][0]:.1f} → {machine['load_after'][0]:.1f}, "
                     f"{_seconds(run['seconds'])} in all"
                     + (f", {streams} streams of launches a case at once" if streams > 1 else "")
                     + "." + (f" {run['note']}" if run.get("note") else ""))
    if stale:
        lines.append(f"- Not counted: {stale} earlier run{'s' if stale > 1 else ''} in the file, of code "
                     "changed since.")
    return lines


def _launch(seconds: float) -> str:
    return f"{seconds:.2f}" if seconds < 1 else f"{seconds:.1f}"


def _shown(path: Path, render, results: str, what: str, command: str, md) -> list[str]:
    try:
        return render(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        # a page problem the guard raises (fieldguide/rendering/unrendered.py): fails every build
        md.fieldguide_problems = [
            *(getattr(md, "fieldguide_problems", None) or []),
            f"{results}: cannot show {what} ({type(exc).__name__}: {exc}); `{command}` writes it"]
        return [f"*No measurement of {what}: {results} is missing or malformed.*"]


class _LoopResults(Preprocessor):
    def __init__(self, md, path: Path, stress_path: Path | None = None):
        super().__init__(md)
        self.path = path
        self.stress_path = stress_path or path.parent / Path(STRESS_RESULTS).name

    def run(self, lines: list[str]) -> list[str]:
        markers = {line.strip() for line in lines} & {MARKER, STRESS_MARKER}
        if not markers:
            return lines
        shown = {}
        if MARKER in markers:
            shown[MARKER] = _shown(self.path, table, RESULTS, "the loop's times",
                                   "make loop-benchmark", self.md)
        if STRESS_MARKER in markers:
            shown[STRESS_MARKER] = _shown(self.stress_path, stress_table, STRESS_RESULTS,
                                          "the stress check's result", "make stress", self.md)
        out = []
        for line in lines:
            out.extend(shown.get(line.strip(), [line]))
        return out


class LoopResultsExtension(Extension):
    def extendMarkdown(self, md) -> None:  # noqa: N802 (Markdown's API)
        md.preprocessors.register(_LoopResults(md, ROOT / RESULTS), "fieldguide-loop-results", 33)
        unrendered.register(md)  # raises the page's problems


def makeExtension(**kwargs):  # noqa: N802 (Markdown's API)
    return LoopResultsExtension(**kwargs)
