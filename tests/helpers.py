"""Small helpers shared by the tests (test scaffolding, never shown on a page)."""

import os
import re
import subprocess
import sys
from pathlib import Path

from fieldguide import ROOT

DOCS = ROOT / "docs"
INCLUDE = re.compile(r'^(?P<indent>\s*)--8<--\s+"(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$', re.M)

# The site teaches current APIs: a deprecated call in a snippet fails its run. The one
# exception is TorchScript warning about itself when torch.compile's backend imports it
# (see filterwarnings in pyproject.toml); later -W options take precedence.
STRICT_WARNINGS = ["-W", "error::DeprecationWarning", "-W", "error::FutureWarning",
                   "-W", "ignore:`torch.jit.:DeprecationWarning"]


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def includes(page: Path) -> list[tuple[str, str | None]]:
    """(snippet path, section) for every `--8<--` include on a page, in page order."""
    return [(m["path"], m["section"]) for m in INCLUDE.finditer(page.read_text(encoding="utf-8"))]


def rel(path: Path) -> str:
    return Path(path).resolve().relative_to(ROOT).as_posix()


def run_python(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    """A fresh interpreter in the repository root, as a reader would start one."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *STRICT_WARNINGS, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
