"""Every page test that times something live carries `@pytest.mark.timed`.

`make test-gpu` runs the tests marked `timed` alone, after all the others have run in parallel:
a speed-up or a time bound measured beside other work says nothing about the claim. The marker
is easy to forget, so this reads each tests/pages/test_*.py with `ast` and finds the tests that
time something: a test times if its body calls a timing primitive (TIMING_NAMES and the rest of
`timing_call` below), a function of the same module that does, a fixture of the same module
that does, or a function of a snippet the module names (`pytest.mark.snippet`) that does.

The rule only looks one way: a test that times through something it cannot see (a subprocess
printing a ratio, a profiler's timeline) is marked by hand, and nothing here objects.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

from fieldguide import ROOT

PAGE_TESTS = sorted((ROOT / "tests" / "pages").glob("test_*.py"))

# Calls whose final name is one of these, ends in or contains one, time something.
TIMING_NAMES = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time",
                "elapsed_time", "median_time", "bandwidth_gbs", "timed"}
TIMING_SUFFIXES = ("seconds", "elapsed_time", "bandwidth_gbs", "_times", "tflops")
TIMING_PARTS = ("seconds_per", "per_second")
TIMING_PREFIXES = ("time_", "timed_")

# Tests that call something timing-like but assert on no live duration, and why.
NOT_TIMED = {
    "test_fsdp2.py::test_the_rank_with_the_longer_nccl_kernels_has_the_shorter_gaps":
        "idle_seconds reads the kernel timelines recorded in timings/: nothing runs, nothing is timed",
    "test_will_it_fit.py::test_ring_traffic_and_bubble_and_waves":
        "collective_seconds is a formula (bytes over bandwidth): nothing runs, nothing is timed",
    "test_execution_exercises.py::test_every_clock_read_of_the_fix_follows_a_synchronization":
        "records the order of clock reads and synchronizations; asserts on no duration",
    "test_execution_exercises.py::test_the_original_stops_its_clock_without_waiting":
        "records the order of clock reads and synchronizations; asserts on no duration",
    "test_ddp_with_torchrun.py::test_overlap_counts_only_time_when_both_lanes_run":
        "overlap_seconds adds up made-up events: nothing runs",
    "test_mixed_precision_training.py::test_time_shares_split_the_whole_step":
        "asserts that the profiler's shares add up to one and are positive, not a duration",
    "test_model_parallelism.py::test_sixteen_idles_less_but_computes_longer_and_is_no_faster":
        "busy_seconds multiplies recorded medians and idle shares of the timing runs: nothing runs",
    "test_pinned_memory.py::test_a_freed_pinned_block_waits_for_the_copies_that_read_it":
        "reads only which block pinning_seconds was given, not how long it took",
    "test_profiling.py::test_cumulative_seconds_adds_up_the_unrounded_times":
        "cumulative_seconds adds up a made-up profile table: nothing runs",
    "test_torch_compile.py::test_compile_times_name_the_steps_of_a_compile":
        "reads the step names in torch._dynamo.utils.compile_times' table, not a duration",
    "test_when_to_use_a_gpu.py::test_compare_times_the_gpu_first_after_a_pause":
        "median_time and time.sleep are replaced by fakes that record the order of the calls",
    "test_when_to_use_a_gpu.py::test_crossover_needs_the_gpu_to_keep_winning":
        "compare is replaced by a fake table of times",
}


def final_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def timing_call(call: ast.Call) -> str | None:
    """What makes this call a timing primitive, or None."""
    name = final_name(call.func)
    if name is None:
        return None
    if name == "Event":
        for keyword in call.keywords:
            value = keyword.value
            if keyword.arg == "enable_timing" and not (isinstance(value, ast.Constant) and not value.value):
                return "Event(enable_timing=True)"
        return None
    if (name in TIMING_NAMES or name.endswith(TIMING_SUFFIXES) or name.startswith(TIMING_PREFIXES)
            or any(part in name for part in TIMING_PARTS)):
        return name
    return None


def calls(node: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)]


def is_fixture(node: ast.FunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if final_name(target) == "fixture":
            return True
    return False


def module_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


@cache
def timing_functions(path: Path) -> dict[str, str]:
    """{function: why} for the top-level functions of a file that time something, through a
    primitive or another function of the same file."""
    functions = module_functions(ast.parse(path.read_text(encoding="utf-8")))
    found: dict[str, str] = {}
    for name, node in functions.items():
        for call in calls(node):
            if why := timing_call(call):
                found[name] = why
                break
    changed = True
    while changed:  # callers of timing functions time too
        changed = False
        for name, node in functions.items():
            if name in found:
                continue
            for call in calls(node):
                callee = final_name(call.func)
                if isinstance(call.func, ast.Name) and callee in found:
                    found[name] = f"{callee}, which calls {found[callee]}"
                    changed = True
                    break
    return found


def snippet_paths(tree: ast.Module) -> list[Path]:
    """The files of every `pytest.mark.snippet(...)` in a test module."""
    paths = []
    for call in calls(tree):
        if final_name(call.func) == "snippet" and isinstance(call.func, ast.Attribute):
            paths += [ROOT / arg.value for arg in call.args
                      if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    return [p for p in paths if p.is_file()]


def marker_names(node: ast.expr) -> set[str]:
    """Names of the `pytest.mark.X` markers in an expression (a marker, a call, a list)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return set().union(*(marker_names(e) for e in node.elts))
    if isinstance(node, ast.Call):
        node = node.func
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "mark"):
        return {node.attr}
    return set()


class PageTests:
    """One tests/pages module: its tests, what each times, and which are marked timed."""

    def __init__(self, path: Path):
        self.path = path
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.functions = module_functions(self.tree)
        self.aliases: dict[str, set[str]] = {}  # e.g. TIMELINE = pytest.mark.snippet(...)
        self.module_marks: set[str] = set()
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    self.aliases[target.id] = marker_names(node.value)
                    if target.id == "pytestmark":
                        self.module_marks = marker_names(node.value)
        self.snippet_timing: dict[str, str] = {}
        for snippet in snippet_paths(self.tree):
            shown = snippet.relative_to(ROOT) if snippet.is_relative_to(ROOT) else snippet.name
            self.snippet_timing.update(
                {name: f"{shown}: {why}" for name, why in timing_functions(snippet).items()})

    def tests(self) -> list[ast.FunctionDef]:
        return [node for name, node in self.functions.items() if name.startswith("test")]

    def marked_timed(self, test: ast.FunctionDef) -> bool:
        marks = set(self.module_marks)
        for decorator in test.decorator_list:
            marks |= marker_names(decorator)
            if isinstance(decorator, ast.Name):
                marks |= self.aliases.get(decorator.id, set())
        return "timed" in marks

    def times(self, function: ast.FunctionDef, seen: frozenset[str] = frozenset()) -> str | None:
        """Why `function` times something, or None: its own calls, the functions of this module
        it calls, the fixtures of this module it requests."""
        seen = seen | {function.name}
        for call in calls(function):
            if why := timing_call(call):
                return why
            name = final_name(call.func)
            if name in self.snippet_timing:
                return f"{name} ({self.snippet_timing[name]})"
            if isinstance(call.func, ast.Name) and name in self.functions and name not in seen:
                if why := self.times(self.functions[name], seen):
                    return f"{name}, which calls {why}"
        for arg in function.args.args:
            fixture = self.functions.get(arg.arg)
            if fixture is not None and is_fixture(fixture) and arg.arg not in seen:
                if why := self.times(fixture, seen):
                    return f"fixture {arg.arg}, which calls {why}"
        return None


def unmarked_timing_tests(path: Path) -> list[str]:
    module = PageTests(path)
    problems = []
    for test in module.tests():
        key = f"{path.name}::{test.name}"
        why = module.times(test)
        if why and key not in NOT_TIMED and not module.marked_timed(test):
            problems.append(
                f"{key} times something live ({why}) but is not marked timed: add "
                "@pytest.mark.timed above it, so that `make test-gpu` runs it alone, after the "
                "parallel half (or, if it asserts on no live duration, list it in NOT_TIMED in "
                "tests/tooling/test_timed_marker.py with the reason)")
    return problems


@pytest.mark.parametrize("path", PAGE_TESTS, ids=lambda p: p.name)
def test_tests_that_time_something_are_marked_timed(path):
    problems = unmarked_timing_tests(path)
    assert not problems, "\n".join(problems)


def test_every_exception_names_a_test_the_rule_still_flags():
    for key, reason in NOT_TIMED.items():
        file, name = key.split("::")
        module = PageTests(ROOT / "tests" / "pages" / file)
        test = module.functions.get(name)
        assert test is not None, f"NOT_TIMED names {key}, which no longer exists: remove it"
        assert module.times(test), f"NOT_TIMED names {key}, which times nothing now: remove it"
        assert not module.marked_timed(test), f"{key} is marked timed and listed in NOT_TIMED ({reason})"


def test_the_rule_finds_timing_in_the_body_a_helper_a_fixture_and_a_snippet(tmp_path):
    snippet = tmp_path / "snip.py"
    snippet.write_text("import time\n\ndef clock():\n    return time.perf_counter()\n\n"
                       "def run(fn):\n    start = clock()\n    fn()\n    return clock() - start\n")
    page = tmp_path / "test_page.py"
    page.write_text(f"""
import time
import pytest

pytestmark = pytest.mark.snippet({str(snippet)!r})


def helper():
    return time.monotonic()


@pytest.fixture(scope="module")
def measured_seconds():
    return helper()


def test_body():
    start = time.perf_counter()
    assert time.perf_counter() - start < 1


def test_helper():
    assert helper() > 0


def test_fixture(measured_seconds):
    assert measured_seconds > 0


def test_snippet(snippet):
    assert snippet.run(print) < 1


def test_events():
    import torch
    assert torch.cuda.Event(enable_timing=True)


def test_events_without_timing():
    import torch
    assert torch.cuda.Event(enable_timing=False)


@pytest.mark.timed
def test_marked():
    assert time.perf_counter() > 0


def test_nothing():
    assert 1 + 1 == 2
""")
    problems = unmarked_timing_tests(page)
    flagged = [p.split("::")[1].split()[0] for p in problems]
    assert flagged == ["test_body", "test_helper", "test_fixture", "test_snippet", "test_events"], problems
    assert "add @pytest.mark.timed" in problems[0]
