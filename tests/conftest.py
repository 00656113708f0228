"""Fixtures shared across the test folders (test scaffolding, never shown on a page)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from fieldguide import ROOT


@pytest.fixture(autouse=True)
def _give_back_cached_gpu_memory():
    """In a parallel GPU run, a worker's cache would keep what its last test freed, out of
    reach of a neighbour's fresh interpreter. After each test, the worker hands its free cached
    blocks back. (The out-of-memory errors of 2026-11-23 came mostly from notebook kernels left
    running, fixed in tests/site/test_notebooks.py; this keeps the workers' share small too.)"""
    in_worker = bool(os.environ.get("PYTEST_XDIST_WORKER"))
    before = _allocated_on_gpus() if in_worker else 0
    yield
    torch = sys.modules.get("torch")
    if in_worker and torch is not None and torch.cuda.is_initialized():
        # A full collection takes 0.2 s with the whole suite collected (400,000 objects, on
        # the CPU machine): after every test, minutes of the workers' time. So only after a test
        # that left tensors behind, which reference cycles (tracebacks, frames) may be holding.
        if _allocated_on_gpus() > before:
            import gc

            gc.collect()
        torch.cuda.empty_cache()


def _allocated_on_gpus() -> int:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return 0
    return sum(torch.cuda.memory_allocated(d) for d in range(torch.cuda.device_count()))


@dataclass
class Build:
    dir: Path           # the built site
    returncode: int     # of `mkdocs build --strict`: non-zero when it logged a warning
    log: str            # its stderr


# What a build reads: the pages, the code they show, the timings and the benchmarks' LABELS, the
# claims (tests/pages) and the tooling that renders them.
BUILD_INPUTS = ("mkdocs.yml", "docs", "snippets", "benchmarks", "timings", "hooks", "fieldguide",
                "includes", "notebooks", "overrides", "tests/pages")
BUILT_SITE_ENV = "FIELDGUIDE_BUILT_SITE"


@pytest.fixture(scope="session")
def site_build(tmp_path_factory) -> Build:
    """The real site, built once per session with `mkdocs build --strict`, as a local build.

    SITE_URL is removed from the environment: CI and `make serve` build without it, and the
    tests check what such a build writes (no canonical address, for one). A strict build that
    aborts on a warning has still written every page, so the tests that read pages run anyway;
    tests/site/test_built_site.py fails on the warning itself.

    FIELDGUIDE_BUILT_SITE=DIR names a strict build of this tree, without SITE_URL, that passed
    (`make test` and `make check` build first, then run the tests on that build): the session
    reads it instead of building the site a second time. A source changed since it was built
    fails every test that reads it, naming the file.
    """
    pytest.importorskip("mkdocs")
    if prebuilt := os.environ.get(BUILT_SITE_ENV):
        return _prebuilt(Path(prebuilt).resolve())
    out = tmp_path_factory.mktemp("built-site")
    env = {key: value for key, value in os.environ.items() if key != "SITE_URL"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**env, "NO_MKDOCS_2_WARNING": "1"},
    )
    return Build(dir=out, returncode=build.returncode, log=build.stderr)


def _prebuilt(site: Path) -> Build:
    """The build FIELDGUIDE_BUILT_SITE names, checked to be newer than every source it reads."""
    home = site / "index.html"
    if not home.is_file():
        pytest.fail(f"{BUILT_SITE_ENV}={site} holds no built site (no index.html); unset it, "
                    "or build there with `mkdocs build --strict -d DIR`", pytrace=False)
    built_at = home.stat().st_mtime
    for top in BUILD_INPUTS:
        path = ROOT / top
        for source in (path.rglob("*") if path.is_dir() else [path]):
            if source.is_file() and source.stat().st_mtime > built_at and "__pycache__" not in source.parts:
                pytest.fail(f"{BUILT_SITE_ENV}={site} was built before {source.relative_to(ROOT)} "
                            "changed: build again (make test does) or unset it", pytrace=False)
    return Build(dir=site, returncode=0, log=f"(built before the tests: {BUILT_SITE_ENV}={site})")


@pytest.fixture(scope="session")
def built_site(site_build) -> Path:
    """The directory of the built site; fails where the build wrote no home page."""
    if not (site_build.dir / "index.html").is_file():
        pytest.fail(f"mkdocs build wrote no site:\n{site_build.log[-4000:]}", pytrace=False)
    return site_build.dir
