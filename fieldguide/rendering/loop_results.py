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


def stress_table(results: dict) -> list[str]:
    """Markdown: the newest stress run, one row per case: launches and failures alone and under
    load, the causes of the failures, the seconds one launch took."""
    run = results["runs"][-1]
    phases = list(run["phases"])
    lines = ["| Case | " + " | ".join(f"{_phase(p)}: failed / launches" for p in phases)
             + " | Causes | One launch |",
             "|:--" + "|--:" * len(phases) + "|:--|--:|"]
    cases = list(dict.fromkeys(c for phase in run["phases"].values() for c in phase))
    for case in cases:
        found = [run["phases"][p].get(case, {}) for p in phases]
        cells = [("skipped" if "skipped" in f else f"{f['failures']} / {f['launches']}")
                 if f else "—" for f in found]
        causes = {}
        for f in found:
            for cause, n in f.get("causes", {}).items():
                causes[cause] = causes.get(cause, 0) + n
        seconds = [f["s_per_launch"] for f in found if "s_per_launch" in f]
        lines.append(f"| `{case}` | " + " | ".join(cells) + " | "
                     + ("; ".join(f"{c} ({n})" for c, n in causes.items()) or "none") + " | "
                     + (f"{_launch(min(seconds))} – {_launch(max(seconds))} s" if seconds else "—")
                     + " |")
    load = run["machine"]
    lines += ["", f"- {run['date'][:16].replace('T', ' ')} UTC, `{run['commit']}`: "
              f"{load['cpus']} CPUs, Python {load['python']}, load average (1 min) "
              f"{load['load_before'][0]:.1f} → {load['load_after'][0]:.1f}, "
              f"{_seconds(run['seconds'])} in all." + (f" {run['note']}" if run.get("note") else "")]
    return lines


def _launch(seconds: float) -> str:
    return f"{seconds:.2f}" if seconds < 1 else f"{seconds:.1f}"


def _phase(name: str) -> str:
    return "alone" if name == "alone" else f"beside {name.removeprefix('load-')} busy processes"


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
