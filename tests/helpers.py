"""Small helpers shared by the tests (test scaffolding, never shown on a page)."""

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fieldguide import ROOT
from fieldguide.content import pages as pages_module
from fieldguide.content.pages import pages  # noqa: F401 (the tests import it from here)

DOCS = ROOT / "docs"
# Nav sections a reader may start from, whatever they read before: none needs an earlier page,
# and the first chapter after them needs none either.
# (Here, not in tests/site/test_reader_kit.py, which needs the docs toolchain to import.)
ENTRY_POINTS = {"Start here"}

# The site teaches current APIs: a deprecated call in a snippet fails its run. The one
# exception is TorchScript warning about itself when torch.compile's backend imports it
# (see filterwarnings in pyproject.toml); later -W options take precedence.
STRICT_WARNINGS = ["-W", "error::DeprecationWarning", "-W", "error::FutureWarning",
                   "-W", "ignore:`torch.jit.:DeprecationWarning"]


def includes(page: Path) -> list[tuple[str, str | None]]:
    """(snippet path, section) for every `--8<--` include on a page file, in page order."""
    return pages_module.includes(page.read_text(encoding="utf-8"))


def rel(path: Path) -> str:
    return Path(path).resolve().relative_to(ROOT).as_posix()


def run_python(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    """A fresh interpreter in the repository root, as a reader would start one."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *STRICT_WARNINGS, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def mkdocs_build(project: Path, strict: bool = True) -> subprocess.CompletedProcess:
    """`mkdocs build [--strict]` of a small project, in this process: what a separate
    `python -m mkdocs` would report (exit status 1 and the log when a warning stops a strict
    build), without a new interpreter importing MkDocs for every test (a few CPU seconds each)."""
    import contextlib
    import logging

    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(f"{record.levelname:<8}-  {record.getMessage()}")

    handler, logger = Collect(logging.INFO), logging.getLogger("mkdocs")
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.INFO
    code = 0
    try:
        with contextlib.chdir(project):
            build(load_config(str(Path(project) / "mkdocs.yml"), strict=strict))
    except MkDocsException as exc:
        code = 1
        lines.append(f"Aborted: {exc}")
    finally:
        logger.removeHandler(handler)
        logger.level = level
    return subprocess.CompletedProcess(["mkdocs", "build"], code, "", "\n".join(lines))


# --- Fake timing runs (pytest-benchmark's JSON, as the timing run writes it) ---------------------

FAKE_GPU = {
    "gpu_name": "Fake GPU 9000", "compute_capability": "9.0", "sm_count": 132,
    "memory_bytes": 80 * 2**30, "gpu_count": 1, "driver": "580.1", "cuda_runtime": "13.0",
    "torch": "2.11.0", "cupy": "14.2.0", "numpy": "2.3.0", "boot_id": "boot-1", "complete": True,
}


def fake_stats(median: float, iqr: float | None = None) -> dict:
    iqr = median * 0.2 if iqr is None else iqr
    return {"median": median, "q1": median - iqr / 2, "q3": median + iqr / 2, "iqr": iqr,
            "mean": median, "stddev": 0.0, "min": median * 0.8, "max": median * 1.2, "rounds": 10,
            "iterations": 1, "ops": 1 / median, "total": median * 10, "outliers": "0;0",
            "ld15iqr": median * 0.8, "hd15iqr": median * 1.2}


def fake_benchmark(fullname: str, median: float, code: dict | None = None, iqr: float | None = None,
                   **extra) -> dict:
    """One benchmark entry; `fullname` is 'benchmarks/bench_x.py::bench_y[param]'."""
    func = fullname.split("::")[1]
    return {"group": None, "name": func, "fullname": fullname, "params": None, "param": None,
            "options": {}, "stats": fake_stats(median, iqr), "extra_info": {**extra, "code": code or {}}}


def fake_run(benchmarks: list[dict], date: str = "2026-11-21T00:00:00+00:00",
             commit: str = "abcdef1234" + "0" * 30, **gpu) -> dict:
    return {"machine_info": {"python_version": "3.12.3", "fieldguide": {**FAKE_GPU, **gpu},
                             "cpu": {"brand_raw": "Fake CPU", "count": 16}},
            "commit_info": {"id": commit, "dirty": False}, "datetime": date,
            "version": "5.1.0", "benchmarks": benchmarks}


def write_run(directory: Path, run: dict) -> Path:
    """timings/<slug>/<stamp>_<commit>.json, as the timing run names it."""
    from fieldguide.measuring.timings import machine_slug

    folder = Path(directory) / machine_slug(run["machine_info"]["fieldguide"])
    folder.mkdir(parents=True, exist_ok=True)
    stamp = run["datetime"].replace("-", "").replace(":", "")[:15]
    path = folder / f"{stamp}Z_{run['commit_info']['id'][:10]}.json"
    path.write_text(json.dumps(run))
    return path


def fake_timings(benchmarks: list[dict], directory: Path) -> "Timings":  # noqa: F821
    """Timings of one fake run holding `benchmarks` (fake_benchmark entries)."""
    from fieldguide.measuring.timings import Timings

    path = write_run(directory, fake_run(benchmarks))
    return Timings.load(path.parent)


def fake_bench(name: str, median: float, directory: Path, **extra):
    """One Benchmark named `module.func[param]` (as pages name them), from a one-run fake."""
    module, _, rest = name.partition(".")
    fullname = f"benchmarks/bench_{module}.py::bench_{rest}"
    return fake_timings([fake_benchmark(fullname, median, iqr=0.0, **extra)], directory).benchmark(name)


def median_time_order(snippet, monkeypatch) -> list[str]:
    """What `snippet.median_time` does, in order, over one warm-up and two timed calls: its
    `sync`, the clock and the timed function are fakes that record themselves."""
    order = []
    monkeypatch.setattr(snippet, "sync", lambda: order.append("sync"))
    monkeypatch.setattr(snippet.time, "perf_counter", lambda: order.append("clock") or 0.0)
    snippet.median_time(lambda: order.append("call"), repeats=2, warmup=1)
    return order


# A round drains the GPU outside the clock and stops the clock as soon as the call returns.
MEDIAN_TIME_ORDER = ["call"] + ["sync", "clock", "call", "clock"] * 2


def assert_each_waits_for_its_gpu_work(cases: dict) -> None:
    """Each `name: (fn, *args)` returns only once its GPU work is done, as median_time needs:
    products queued ahead keep the GPU busy long after a call that only queued its own work."""
    import torch

    busy = torch.randn(8192, 8192, device="cuda")
    for name, (fn, *args) in cases.items():
        # Warm-up first: a kernel's first launch loads its module, which waits for the GPU and
        # would let a call that only queues its work pass.
        busy @ busy
        fn(*args)
        torch.cuda.synchronize()
        for _ in range(4):  # about 80 ms of float32 products on an H100
            busy @ busy
        fn(*args)
        assert torch.cuda.current_stream().query(), f"{name} returned before its GPU work ended"


# The per-rank checks of the several-GPU pages: gloo on 2 and 4 CPU processes (CI), and NCCL on
# as many GPUs where the machine has them (skipped, and listed by make test-gpu, where not).
RANK_PROCESSES = [("gloo", 2), ("gloo", 4),
                  pytest.param(("nccl", 2), marks=pytest.mark.gpus(2)),
                  pytest.param(("nccl", 4), marks=pytest.mark.gpus(4))]


def process_id(param):
    backend, n = param
    return f"{backend}-{n}"


def torchrun_env(**extra: str) -> dict[str, str]:
    """The environment for a torchrun the tests start: the project on the path, and no
    OMP_NUM_THREADS, so that torchrun gives each process one thread as it does for a reader who
    set none (make test sets it for its workers, whose children would otherwise inherit it)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def run_on_ranks(worker, backend: str, n: int, out, timeout: float, *args: str) -> list[dict]:
    """Run a test file as the worker of n ranks under torchrun (`python worker OUT_DIR [ARGS]`,
    each rank writing OUT_DIR/rank<N>.json) and return what each rank saw. gloo hides the GPUs, so the
    script takes the CPU path even on a GPU machine; the ranks must report the backend asked
    for (NCCL ran on GPUs, not on a fallback)."""
    env = torchrun_env(**({"CUDA_VISIBLE_DEVICES": ""} if backend == "gloo" else {}))
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         str(n), Path(worker).resolve(), out, *args],
        cwd=out, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = [json.loads((Path(out) / f"rank{r}.json").read_text()) for r in range(n)]
    assert {s["backend"] for s in seen} == {backend}
    return seen


def four_ranks_and_pairs(worker, out, timeout: float) -> dict:
    """One launch of 4 gloo processes that checks 4 ranks and 2: `python worker OUT_DIR pairs`,
    each rank running the checks once on the group of 4, then again in a pair (ranks 0 and 1,
    ranks 2 and 3: the last dimension of a 2 x 2 mesh), writing the pair's under "pair". A
    second launch for 2 ranks would cost a torchrun and 2 more Pythons importing torch (10-13
    CPU-seconds in each several-GPUs file). Returns {4: the 4 ranks' view, 2: the first pair's,
    "second pair": the other pair's, which ran the same checks beside it}."""
    seen = run_on_ranks(worker, "gloo", 4, out, timeout, "pairs")
    return {4: seen, 2: [r["pair"] for r in seen[:2]],
            "second pair": [r["pair"] for r in seen[2:]]}


def within(seconds: float, call):
    """call()'s result or the error it raised, run in a thread; fails the test if it is still
    waiting after `seconds` (a parent that waits forever for a child that died)."""
    ended = []

    def run():
        try:
            ended.append(call())
        except Exception as exc:  # the error raised in the parent, returned to be checked
            ended.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(timeout=seconds)
    assert not runner.is_alive(), f"still waiting after {seconds} s for a child that died"
    return ended[0]


@contextlib.contextmanager
def reserved_port(host: str = "127.0.0.1"):
    """A port for a program started next to listen on, held for it: bound here (SO_REUSEADDR,
    never listening) until the block ends. Picking a free port and closing it, then starting the
    program, leaves a gap in which another program asking the OS for a port can be given the
    same one (make test runs many: every gloo process and TCPStore binds one), and then the
    program cannot listen, or a client of it meets the other program. While this socket holds
    the port the OS gives it to no one else, and the program, which binds with SO_REUSEADDR as
    TCPStore (torchrun's rendezvous) and Slurm's daemons do, can still bind it and listen."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind((host, 0))
        yield holder.getsockname()[1]


# --- What a page printed on the reference GPU (outputs/, recorded alone) --------------------------

def printed_on_reference_gpu(page: str) -> tuple[str, str]:
    """(what `page`'s code blocks printed, in order, as one text; the GPU) as recorded alone on
    the site's GPU for the page's current code. Fails when no such record covers every block:
    `make outputs` on that GPU records it."""
    from fieldguide.notebooks import outputs, record_outputs

    slug = outputs.site_gpu(ROOT)
    recorded = outputs.load(page, slug, ROOT)
    cells = record_outputs.blocks(ROOT, page)   # a block the notebook cut for its prompts: whole
    found = [recorded.outputs_of(code) if recorded else None for code in cells]
    missing = sum(f is None for f in found)
    assert recorded is not None and not missing, (
        f"{page}: {missing} of {len(cells)} code blocks have no output recorded alone on {slug} "
        "for their current code; run `make outputs` there (docs/contributing.md)")
    return "\n".join(outputs.as_text(f) for f in found if f), recorded.gpu


def within_runs(value: float, per_run: list[float], slack: float) -> bool:
    """Whether one measurement lies inside the runs' range widened by `slack` (a fraction)."""
    return min(per_run) * (1 - slack) <= value <= max(per_run) * (1 + slack)
