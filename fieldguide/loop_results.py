"""Markdown extension: `<!-- loop-benchmark -->` on a page becomes the table of the loop's times.

`make loop-benchmark` (benchmarks/loop/run.py) times a contributor's loop in a fresh clone and
appends each run to benchmarks/loop/results.json, with the targets it is measured against. This
extension writes the newest measurement of each step into the contributing guide, and the spread
of its newest runs (runs of one tree differ by tens of seconds), so the guide's numbers are the
file's: never typed, never older than the last run. A missing or malformed file is a page problem
that fails every build (fieldguide/unrendered.py raises it), naming the file and the command that
writes it.
"""

from __future__ import annotations

import json
from pathlib import Path

from markdown import Extension
from markdown.preprocessors import Preprocessor

from fieldguide import ROOT, unrendered

MARKER = "<!-- loop-benchmark -->"
RESULTS = "benchmarks/loop/results.json"


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


class _LoopResults(Preprocessor):
    def __init__(self, md, path: Path):
        super().__init__(md)
        self.path = path

    def run(self, lines: list[str]) -> list[str]:
        if not any(line.strip() == MARKER for line in lines):
            return lines
        try:
            shown = table(json.loads(self.path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            # a page problem the guard raises (fieldguide/unrendered.py): fails every build
            self.md.fieldguide_problems = [
                *(getattr(self.md, "fieldguide_problems", None) or []),
                f"{RESULTS}: cannot show the loop's times ({type(exc).__name__}: {exc}); "
                "`make loop-benchmark` writes it"]
            shown = [f"*No measurement of the loop: {RESULTS} is missing or malformed.*"]
        out = []
        for line in lines:
            out.extend(shown if line.strip() == MARKER else [line])
        return out


class LoopResultsExtension(Extension):
    def extendMarkdown(self, md) -> None:  # noqa: N802 (Markdown's API)
        md.preprocessors.register(_LoopResults(md, ROOT / RESULTS), "fieldguide-loop-results", 33)
        unrendered.register(md)  # raises the page's problems


def makeExtension(**kwargs):  # noqa: N802 (Markdown's API)
    return LoopResultsExtension(**kwargs)
