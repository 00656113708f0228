"""How `make test-gpu` runs: `--outcomes-log` (a JSON line as each test starts and as it ends, so
a GPU run cut off by its time limit still says what ran, how long each test took, why the failures
failed and which tests hung), `--require-gpus`, the order of the parallel queue, `--after`, and a
suite that collects without the docs toolchain (the GPU machines have none of it)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from fieldguide import ROOT

TESTS = '''
import time

import pytest


@pytest.fixture
def slow_to_set_up():
    time.sleep(1.0)


def test_set_up_slowly(slow_to_set_up):
    pass


def test_quick():
    pass


def test_slow():
    time.sleep(0.2)


def test_wrong():
    assert 1 + 1 == 3, "arithmetic"


@pytest.fixture
def broken():
    raise RuntimeError("the fixture broke")


def test_set_up_badly(broken):
    pass


def test_wrong_at_length():
    assert 1 + 1 == 3, "x" * 5000 + " the end of a long message"
'''
NAMES = ["test_set_up_slowly", "test_quick", "test_slow", "test_wrong", "test_set_up_badly",
         "test_wrong_at_length"]


def test_each_test_is_logged_as_it_starts_and_as_it_ends(tmp_path):
    (tmp_path / "test_sample.py").write_text(TESTS)
    log = tmp_path / "outcomes.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "fieldguide.measuring.pytest_plugin", f"--outcomes-log={log}", "test_sample.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1, result.stdout + result.stderr  # test_wrong fails
    from fieldguide.measuring.pytest_plugin import FAILURE_CHARS

    entries = [json.loads(line) for line in log.read_text().splitlines()]
    starts = {e["test"].split("::")[-1]: e["started"] for e in entries if e["when"] == "start"}
    assert list(starts) == NAMES, "a line as each test starts, in the order they ran"
    lines = {entry["test"].split("::")[-1]: entry for entry in entries if entry["when"] == "call"}
    assert set(lines) == set(NAMES) - {"test_set_up_badly"}  # no call after a failed setup
    assert all(starts[name] <= line["ended"] for name, line in lines.items())
    # a passed setup or teardown is logged only when it took a second or more; a failed one always
    setups = {e["test"].split("::")[-1]: e for e in entries if e["when"] not in ("start", "call")}
    assert [(name, e["when"]) for name, e in setups.items()] == [
        ("test_set_up_slowly", "setup"), ("test_set_up_badly", "setup")]
    assert lines["test_slow"]["seconds"] >= 0.2
    # a failure says why: the end of its text, where pytest writes the assertion or exception
    assert lines["test_wrong"]["outcome"] == "failed"
    assert "arithmetic" in lines["test_wrong"]["failure"]
    assert setups["test_set_up_badly"]["outcome"] == "failed"
    assert "RuntimeError: the fixture broke" in setups["test_set_up_badly"]["failure"]
    long = lines["test_wrong_at_length"]["failure"]
    assert len(long) == FAILURE_CHARS and "the end of a long message" in long
    assert long.rstrip().endswith("AssertionError")
    # a pass, or a slow setup that passed, has no failure text
    assert not [e for e in [lines["test_quick"], lines["test_slow"], setups["test_set_up_slowly"]]
                if "failure" in e]


HANGS = '''
import time


def test_quick():
    pass


def test_hangs():
    time.sleep(600)
'''


@pytest.mark.parametrize("workers", [None, "1"], ids=["serial", "xdist"])
def test_a_killed_run_shows_which_test_started_and_never_ended(tmp_path, workers):
    """As a time limit kills a hung make test-gpu: every process of the run, at once."""
    parallel = ["-n", workers] if workers else ["-p", "no:xdist"]
    if workers:
        pytest.importorskip("xdist")
    (tmp_path / "test_sample.py").write_text(HANGS)
    log = tmp_path / "outcomes.jsonl"
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "fieldguide.measuring.pytest_plugin", *parallel, f"--outcomes-log={log}", "test_sample.py"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    try:
        deadline = time.monotonic() + 120
        while not (log.exists() and "test_hangs" in log.read_text()):
            assert run.poll() is None, "the run ended"
            assert time.monotonic() < deadline, "test_hangs never started"
            time.sleep(0.2)
        time.sleep(0.5)  # well into its sleep
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # pytest and its workers
        run.wait()
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    ended = {e["test"] for e in entries if e["when"] != "start"}
    never_ended = [e["test"].split("::")[-1] for e in entries
                   if e["when"] == "start" and e["test"] not in ended]
    assert never_ended == ["test_hangs"], entries


def test_require_gpus_fails_a_gpu_skip_but_lists_tests_for_a_bigger_machine(tmp_path):
    from fieldguide.measuring.pytest_plugin import fails_require_gpus

    assert fails_require_gpus("needs 1 CUDA device(s); this machine has 0")  # no GPU at all
    assert fails_require_gpus("needs 2 CUDA device(s); this machine has 0")
    assert not fails_require_gpus("needs 2 CUDA device(s); this machine has 1")  # for the x2 one
    assert fails_require_gpus("needs a CUDA device")  # any other GPU skip

    (tmp_path / "test_sample.py").write_text(
        "import pytest\n\n\n@pytest.mark.gpus(1)\ndef test_on_a_gpu():\n    pass\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "fieldguide.measuring.pytest_plugin", "--require-gpus", "test_sample.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""},
    )
    assert result.returncode == 1, result.stdout + result.stderr  # this machine has no GPU
    assert "GPU tests skipped under --require-gpus" in result.stdout


def test_long_tests_start_first_in_every_workers_share():
    from types import SimpleNamespace

    from fieldguide.measuring.pytest_plugin import long_tests_first

    def item(name, long=False):
        marker = "fresh_interpreter" if long else None
        return SimpleNamespace(name=name, get_closest_marker=lambda m: marker if m == marker else None)

    items = [item(f"t{i}") for i in range(8)] + [item(f"L{i}", long=True) for i in range(4)]
    names = [i.name for i in long_tests_first(items, 1)]
    assert names == ["L0", "L1", "L2", "L3"] + [f"t{i}" for i in range(8)]
    names = [i.name for i in long_tests_first(items, 2)]  # worksteal: two runs of 6
    assert names == ["L0", "L2", "t0", "t1", "t2", "t3", "L1", "L3", "t4", "t5", "t6", "t7"]
    assert sorted(names) == sorted(i.name for i in items)
    for workers in (3, 5, 12):  # uneven shares, more long tests than a share: none lost
        assert sorted(i.name for i in long_tests_first(items, workers)) == sorted(names)


def test_tests_sharing_a_module_fixture_come_before_those_sharing_nothing(tmp_path):
    """Steals take the end of a worker's queue: there, tests that share no fixture."""
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n\n\n@pytest.fixture(scope='module')\ndef trained():\n    return 1\n\n\n"
        "def test_a():\n    pass\n\n\ndef test_b(trained):\n    pass\n\n\n"
        "def test_c(tmp_path):\n    pass\n\n\ndef test_d(trained):\n    pass\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "fieldguide.measuring.pytest_plugin", "test_sample.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    order = [line.split("::")[-1] for line in result.stdout.splitlines() if "::" in line]
    assert order == ["test_b", "test_d", "test_a", "test_c"], result.stdout + result.stderr


def test_after_collects_then_waits_for_its_file(tmp_path):
    """make test-gpu's second half collects while the first runs, and runs once it has ended."""
    (tmp_path / "test_sample.py").write_text("def test_quick():\n    pass\n")
    ended, log = tmp_path / "first-half-ended", tmp_path / "outcomes.jsonl"
    second = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "fieldguide.measuring.pytest_plugin",
         f"--after={ended}", f"--outcomes-log={log}", "test_sample.py"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            second.wait(timeout=5)  # collected, and waiting for as long as the file is missing
        assert not log.exists()
        ended.touch()
        output, _ = second.communicate(timeout=120)
    finally:
        second.kill()
    assert second.returncode == 0, output
    assert "the tests start once" in output and "1 passed" in output
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["when"] for e in entries] == ["start", "call"] and entries[-1]["outcome"] == "passed"


def test_browser_tests_count_as_long():
    """A browser test loads every page at one width: it starts first, with the long ones."""
    from types import SimpleNamespace

    from fieldguide.measuring.pytest_plugin import long_tests_first

    def item(name, marker=None):
        return SimpleNamespace(name=name, get_closest_marker=lambda m: marker if m == marker else None)

    items = [item("t0"), item("t1"), item("page_in_chromium", "browser")]
    assert [i.name for i in long_tests_first(items, 1)] == ["page_in_chromium", "t0", "t1"]


# What the GPU machines lack: MkDocs, Markdown and their plugins, and Playwright. Not all of
# requirements/docs.txt: they have matplotlib and PyYAML (the H100's image, 2026-11-26), which
# some test modules import at their top.
DOCS_TOOLCHAIN = ("mkdocs", "material", "pymdownx", "markdown", "zensical", "playwright",
                  "mkdocs_jupyter", "mkdocstrings", "mkdocs_git_revision_date_localized_plugin")
WITHOUT_THEM = f"""
import importlib.abc
import sys

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {DOCS_TOOLCHAIN!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Missing())
"""


@pytest.mark.fresh_interpreter
def test_the_suite_collects_without_the_docs_toolchain(tmp_path):
    """A module that imports the docs toolchain (or fieldguide's Markdown extensions) at its top
    must skip there: one collection error stops the whole GPU run before its first test. A
    skip's reason must not read as a GPU skip (`needs `), which --require-gpus fails."""
    from fieldguide.measuring.pytest_plugin import GPU_SKIP_PREFIX

    (tmp_path / "sitecustomize.py").write_text(WITHOUT_THEM)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-rs", "-p", "no:cacheprovider",
         "-p", "no:xdist", "tests"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])},
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    skipped = re.findall(r"^SKIPPED \[\d+\] ([^:]+):\d+: (.*)$", result.stdout, re.M)
    assert ("tests/site/test_reader_kit.py", "could not import 'markdown': No module named "
            "'markdown'") in skipped, "the blocker did not block"
    assert not [s for s in skipped if s[1].startswith(GPU_SKIP_PREFIX)], skipped
