"""The loop benchmark's results reach the contributing guide from benchmarks/loop/results.json:
the newest measurement of each step, with its target, load and date; nothing typed by hand."""

import json
from pathlib import Path

import pytest

pytest.importorskip("markdown")  # the table is a Markdown extension

import markdown

from fieldguide import ROOT
from fieldguide.rendering import loop_results


def run(date, commit, steps, note=""):
    return {"date": date, "commit": commit, "note": note,
            "machine": {"cpus": 2, "cpu_model": "Fake CPU", "python": "3.11.7"},
            "targets": {"check_one_page": 90, "make_test": 600},
            "labels": {"check_one_page": "`make check PAGE=docs/x.md`", "make_test": "`make test`"},
            "steps": {name: {"wall_s": wall, "cpu_s": cpu, "load_before": [1.0, 1, 1],
                             "load_after": [2.5, 1, 1], "rc": rc} for name, (wall, cpu, rc) in steps.items()}}


RESULTS = {"runs": [
    run("2026-11-26T13:00:00+00:00", "aaaaaaaaaa", {"make_test": (700.0, 900.0, 0),
                                                    "check_one_page": (100.0, 80.0, 0)}),
    run("2026-11-26T14:00:00+00:00", "bbbbbbbbbb", {"check_one_page": (61.0, 70.0, 1)}, note="Busy."),
]}


def test_each_step_shows_its_newest_measurement_and_target():
    lines = loop_results.table(RESULTS)
    assert lines[2] == ("| `make test` | 10.0 min | 11.7 min | 15.0 min | 1.0 → 2.5 | "
                        "2026-11-26, `aaaaaaaaaa` | one run |")
    assert lines[3] == ("| `make check PAGE=docs/x.md` | 90 s | 61 s (failed) | 70 s | 1.0 → 2.5 | "
                        "2026-11-26, `bbbbbbbbbb` | 61 s – 100 s (2 runs) |")
    assert lines[-2:] == ["- 2026-11-26 13:00 UTC, `aaaaaaaaaa`: 2 × Fake CPU, Python 3.11.7.",
                          "- 2026-11-26 14:00 UTC, `bbbbbbbbbb`: 2 × Fake CPU, Python 3.11.7. Busy."]


def test_the_spread_is_of_the_steps_newest_runs_only():
    runs = [run(f"2026-11-2{d}T10:00:00+00:00", f"{d}" * 10, {"make_test": (wall, 1.0, 0)})
            for d, wall in enumerate([900.0, 500.0, 510.0, 590.0, 530.0, 505.0], start=1)]
    assert loop_results.recent_walls({"runs": runs}, "make_test") == [500.0, 510.0, 590.0, 530.0, 505.0]
    assert loop_results.table({"runs": runs})[2].endswith("| 8.3 min – 9.8 min (5 runs) |")


def test_the_marker_becomes_the_table_and_a_broken_file_is_a_page_problem(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(RESULTS))
    md = markdown.Markdown(extensions=["tables"])
    md.preprocessors.register(loop_results._LoopResults(md, results), "loop", 33)
    html = md.convert(f"# Guide\n\n{loop_results.MARKER}\n")
    assert "<table>" in html and "11.7 min" in html and loop_results.MARKER not in html
    results.write_text("{not json")
    md.convert(f"{loop_results.MARKER}\n")  # without the guard registered: the problem stays on md
    assert any("cannot show the loop's times" in problem for problem in md.fieldguide_problems)


def test_the_guide_shows_the_committed_results():
    assert loop_results.MARKER in (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    assert "  - fieldguide.rendering.loop_results" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    committed = json.loads((ROOT / loop_results.RESULTS).read_text(encoding="utf-8"))
    shown = loop_results.newest_steps(committed)
    for step in ("build_cold", "build_warm", "serve_first_answer", "serve_reload_after_prose_edit",
                 "check_one_page", "make_test"):
        assert step in shown, f"{loop_results.RESULTS} has no measurement of {step}: make loop-benchmark"
    assert loop_results.table(committed)


@pytest.mark.parametrize("name", ["cpu_times", "run"])
def test_the_benchmark_modules_import_without_the_tests(name):
    """`make loop-benchmark` runs with python3 (standard library only)."""
    import ast

    tree = ast.parse((ROOT / "benchmarks" / "loop" / f"{name}.py").read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "argparse", "datetime", "json", "os", "platform", "resource", "shutil",
                        "signal", "socket", "subprocess", "sys", "tempfile", "time", "urllib", "pathlib",
                        "pytest"}, imported


def test_the_make_test_profile_merges_every_process_that_ran_tests(tmp_path):
    """make test runs two pytest sessions, the first on several workers: each writes its own
    file, and the profile counts every test once and every process's CPU once."""
    from benchmarks.loop.run import profile

    per_test = tmp_path / "cpu_times.json"
    (tmp_path / "cpu_times.json.101").write_text(json.dumps(
        {"tests/a.py::t1": {"cpu_s": 3.0, "wall_s": 4.0}, "": {"cpu_s": 10.0, "wall_s": 50.0}}))
    (tmp_path / "cpu_times.json.102").write_text(json.dumps(
        {"tests/b.py::t2": {"cpu_s": 5.0, "wall_s": 6.0}, "": {"cpu_s": 20.0, "wall_s": 40.0}}))
    merged = profile(per_test)
    assert merged["tests"] == 2 and merged["pytest_cpu_s"] == 30.0 and merged["pytest_wall_s"] == 50.0
    assert merged["by_file_cpu_s"] == {"tests/b.py": 5.0, "tests/a.py": 3.0}
    assert profile(tmp_path / "none.json") is None


def _code(root: Path, *files: str) -> dict:
    return {"files": list(files), "key": loop_results.code_key(list(files),
                                                              lambda path: (root / path).read_bytes())}


def _stress_run(root: Path, phases: dict, code: dict, date="2026-11-28T16:00:00+00:00", **machine):
    return {"date": date, "commit": "cccccccccc", "note": "Busy.", "seconds": 600.0,
            "machine": {"cpus": 2, "python": "3.11.7", "load_before": [1.0, 1, 1],
                        "load_after": [3.0, 1, 1], **machine},
            "runs_per_case": 5, "code": code, "phases": phases}


def stress_results(root: Path) -> dict:
    (root / "launch.py").write_text("launch = 1\n")
    (root / "slurm.py").write_text("cluster = 1\n")
    code = {"torchrun-2": _code(root, "launch.py"), "slurm-job": _code(root, "slurm.py")}
    skipped = {"skipped": "Slurm is not installed (make slurm)"}
    return {"runs": [
        _stress_run(root, {
            "alone": {"torchrun-2": {"launches": 5, "failures": 0, "causes": {}, "s_per_launch": 5.2},
                      "slurm-job": skipped},
            "load-2": {"torchrun-2": {"launches": 5, "failures": 1, "s_per_launch": 8.4,
                                      "causes": {"connection refused": 1}},
                       "slurm-job": skipped}}, code),
        _stress_run(root, {"alone": {"torchrun-2": {"launches": 10, "failures": 0, "causes": {},
                                                    "s_per_launch": 4.0}}},
                    {"torchrun-2": code["torchrun-2"]}, date="2026-11-29T01:00:00+00:00")]}


def test_the_stress_table_sums_each_cases_runs_of_its_current_code(tmp_path):
    results = stress_results(tmp_path)
    lines = loop_results.stress_table(results, tmp_path)
    assert lines[0] == ("| Case | Machine | Alone: failed / launches | Beside busy processes: "
                        "failed / launches | Causes | One launch |")
    assert lines[2] == ("| `torchrun-2` | 2 CPUs, Python 3.11.7 | 0 / 15 | 1 / 5 (2 busy) "
                        "| connection refused (1) | 4.0 – 8.4 s |")
    assert lines[3] == "| `slurm-job` | 2 CPUs, Python 3.11.7 | skipped | skipped | none | — |"
    assert lines[5] == ("- 2026-11-28 16:00 UTC, `cccccccccc`: 2 CPUs, Python 3.11.7, load "
                        "average (1 min) 1.0 → 3.0, 10.0 min in all. Busy.")
    # a run on another machine is a row of its own, named by its CPUs and Python
    results["runs"].append(_stress_run(tmp_path, {"alone": {"torchrun-2": {
        "launches": 240, "failures": 0, "causes": {}, "s_per_launch": 0.06}}},
        {"torchrun-2": results["runs"][0]["code"]["torchrun-2"]}, cpus=32, python="3.12.3",
        torch="2.11.0"))
    table = loop_results.stress_table(results, tmp_path)
    assert "| `torchrun-2` | 32 CPUs, Python 3.12.3 | 0 / 240 | 0 / 0 | none | 0.06 – 0.06 s |" in table
    assert any(line.startswith("- ") and "32 CPUs, Python 3.12.3, torch 2.11.0, load" in line
               for line in table)
    # the launch code changes: its runs count no more, and the table says the case has none
    (tmp_path / "launch.py").write_text("launch = 2\n")
    lines = loop_results.stress_table(results, tmp_path)
    assert lines[2] == ("| `torchrun-2` | 2 CPUs, Python 3.11.7 | no run of this code "
                        "| no run of this code | none | — |")
    assert lines[-1] == "- Not counted: 2 earlier runs in the file, of code changed since."


def test_the_guide_shows_the_stress_table_and_a_bad_file_is_a_page_problem(tmp_path):
    results, stress = tmp_path / "results.json", tmp_path / "stress.json"
    results.write_text(json.dumps(RESULTS))
    committed = json.loads((ROOT / loop_results.STRESS_RESULTS).read_text(encoding="utf-8"))
    stress.write_text(json.dumps(committed))
    md = markdown.Markdown(extensions=["tables"])
    md.preprocessors.register(loop_results._LoopResults(md, results, stress), "loop", 33)
    html = md.convert(f"{loop_results.MARKER}\n\n{loop_results.STRESS_MARKER}\n")
    assert html.count("<table>") == 2 and "<code>exercises-fork</code>" in html
    stress.write_text("{not json")
    md.convert(f"{loop_results.STRESS_MARKER}\n")
    assert any("cannot show the stress check's result" in p for p in md.fieldguide_problems)


def test_the_guide_shows_the_committed_stress_check():
    assert loop_results.STRESS_MARKER in (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    committed = json.loads((ROOT / loop_results.STRESS_RESULTS).read_text(encoding="utf-8"))
    table = "\n".join(loop_results.stress_table(committed))
    from tests import stress

    for case in stress.CASES:  # every case has its row, with runs of its code or saying it has none
        assert f"| `{case}` |" in table, case
