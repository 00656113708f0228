"""`make check PAGE=docs/<chapter>/<page>.md`: one page's loop (its target: 90 s).

What `make test` runs about one page, and nothing else:

1. its notebook is current (else: `make notebooks`), and ruff passes on its snippets, its test
   file and its benchmark file;
2. a strict build of the whole site starts in the background, into site/ (the build is of the
   whole site: links, nav and the cheat sheet are checked across pages);
3. meanwhile pytest runs the page's own tests (tests/pages/test_<page>.py), its snippets as
   `python -m` (or its notebook, where that runs every line of them: tests/site/test_snippets.py),
   its notebook in a fresh kernel, its benchmark's labels, and the checks of the whole tree that
   take a second (notebooks current, Colab links tracked, no placeholder left);
4. once the build has passed, the checks of the built site that concern the page, with
   FIELDGUIDE_BUILT_SITE=site (tests/conftest.py), so the tests read that build.

    python -m fieldguide.authoring.check docs/execution/streams.md [docs/other/page.md ...]

Several pages share one build. Exit status 0 when everything passed. A page under draft_docs is
checked too; the build leaves it out, and the checks of the built site skip it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fieldguide import ROOT
from fieldguide.content.pages import includes
from fieldguide.notebooks import generate as notebooks

# Checks of the whole tree that name no page, cheap enough to run for any page (by test name).
WHOLE_TREE = ("test_notebooks_match_their_pages", "test_links_resolve_to_tracked_files",
              "test_no_published_page_holds_a_placeholder")
WHOLE_SITE = ("test_the_site_builds_with_strict", "test_every_rule_links_a_section",
              "test_the_cheat_sheet_links_every_chapter_page", "test_every_link_lands_on_an_existing_section",
              "test_every_headline_is_measured", "test_every_page_with_measurements_has_a_headline")
BEFORE_BUILD = ["tests/site/test_snippets.py", "tests/site/test_notebooks.py", "tests/site/test_pages.py",
                "tests/tooling/test_labels.py", "tests/tooling/test_placeholders.py"]
AFTER_BUILD = ["tests/site/test_built_site.py", "tests/site/test_reader_kit.py"]


class CheckError(ValueError):
    """The pages cannot be checked as named; the message says why."""


@dataclass(frozen=True)
class Page:
    doc: str                 # relative to docs/: execution/streams.md
    snippets: list[str]      # the snippet files it includes
    test: str | None         # tests/pages/test_<page>.py, where there is one
    bench: str | None        # benchmarks/bench_<page>.py, where there is one

    @classmethod
    def find(cls, root: Path, name: str) -> Page:
        doc = name.removeprefix("./").removeprefix("docs/")
        if not doc.endswith(".md") or not (root / "docs" / doc).is_file():
            raise CheckError(f"PAGE={name}: no such page; name it as docs/<chapter>/<page>.md")
        stem = Path(doc).stem.replace("-", "_")
        test, bench = f"tests/pages/test_{stem}.py", f"benchmarks/bench_{stem}.py"
        shown = includes((root / "docs" / doc).read_text(encoding="utf-8"))
        return cls(doc, list(dict.fromkeys(path for path, _ in shown)),
                   test if (root / test).is_file() else None,
                   bench if (root / bench).is_file() else None)

    @property
    def python_files(self) -> list[str]:
        return [*self.snippets, *filter(None, (self.test, self.bench))]

    @property
    def selectors(self) -> list[str]:
        """pytest -k words that pick this page's tests: their ids name the page or its files."""
        words = [self.doc, *self.snippets]
        words += [Path(p).name for p in (self.test, self.bench) if p]
        return words


def keyword_expression(pages: list[Page], names: tuple[str, ...]) -> str:
    words = [word for page in pages for word in page.selectors] + list(names)
    for word in words:
        if not re.fullmatch(r"[\w./+-]+", word):
            raise CheckError(f"{word!r}: a name pytest -k cannot select (letters, digits, _ . / - +)")
    return " or ".join(dict.fromkeys(words))


# The browser check reads the whole site (make test runs it). Tests that time something live
# (`timed`, `whole_gpu`) wait until the build beside the others has ended, as in make test.
BESIDE_THE_BUILD = "not browser and not timed and not whole_gpu"
ALONE = "(timed or whole_gpu) and not browser"


# The build takes a core: the tests beside it, and what they start, get the others' OpenMP threads
# (torch starts one per core, and on busy cores its threads spin waiting for each other; the
# Makefile's parallel_env says what that cost). An OMP_NUM_THREADS already set is kept.
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
BESIDE_THE_BUILD_THREADS = {"OMP_NUM_THREADS": str(max(1, CORES - 1))}


def _pytest(args: list[str], env: dict[str, str], marks: str = BESIDE_THE_BUILD) -> int:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                           "-m", marks, *args], cwd=ROOT, env=env).returncode


def run(names: list[str], site: Path) -> int:
    started = time.perf_counter()
    pages = [Page.find(ROOT, name) for name in names]
    timeline: list[str] = []

    def step(what: str, since: float) -> None:
        timeline.append(f"  {time.perf_counter() - since:6.1f} s  {what}")

    stale = [p for p in notebooks.problems(ROOT)
             if any(notebooks.notebook_path(page.doc) in p or page.doc in p for page in pages)]
    if stale:
        print("make check: the page's notebook is not current; run `make notebooks` first:\n  "
              + "\n  ".join(stale), file=sys.stderr)
        return 1

    since = time.perf_counter()
    files = list(dict.fromkeys(f for page in pages for f in page.python_files))
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", *files], cwd=ROOT).returncode
    step(f"ruff on {len(files)} file(s)", since)

    env = {k: v for k, v in os.environ.items() if k != "SITE_URL"}  # a local build, as CI's
    env["NO_MKDOCS_2_WARNING"] = "1"
    with tempfile.TemporaryFile("w+", encoding="utf-8") as build_log:
        build_started = time.perf_counter()
        build = subprocess.Popen([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
                                 cwd=ROOT, env=env, stdout=build_log, stderr=subprocess.STDOUT, text=True)
        try:
            since = time.perf_counter()
            page_tests = ["-k", keyword_expression(pages, WHOLE_TREE), *_existing(pages), *BEFORE_BUILD]
            before = _pytest(page_tests, {**BESIDE_THE_BUILD_THREADS, **env})
            step("the page's tests, snippets, notebook and labels", since)
            built = build.wait()
        finally:
            if build.poll() is None:
                build.kill()
        step(f"strict build into {_shown(site)} (beside the tests)", build_started)
        build_log.seek(0)
        log = build_log.read()
    since = time.perf_counter()
    timed = _pytest(page_tests, env, marks=ALONE)
    step("the page's timed tests, alone", since)
    if built != 0:
        print(f"make check: `mkdocs build --strict` failed:\n{_warnings(log)}", file=sys.stderr)
        after = 1
    else:
        since = time.perf_counter()
        after = _pytest(["-k", keyword_expression(pages, WHOLE_SITE), *AFTER_BUILD],
                        {**env, "FIELDGUIDE_BUILT_SITE": str(site)})
        step("checks of the built site", since)

    failed = [what for what, code in (("ruff", lint), ("tests", before), ("timed tests", timed),
                                      ("build", built), ("built-site checks", after))
              if code not in (0, 5)]
    print("\nmake check " + " ".join(p.doc for p in pages) + ":")
    print("\n".join(timeline))
    total = time.perf_counter() - started
    print(f"  {total:6.1f} s  in all: " + (f"FAILED ({', '.join(failed)})" if failed else "passed"))
    return 1 if failed else 0


def _existing(pages: list[Page]) -> list[str]:
    return list(dict.fromkeys(page.test for page in pages if page.test))


def _warnings(log: str) -> str:
    lines = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    return "\n".join(lines or log.splitlines()[-30:])


def _shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: make check PAGE=docs/<chapter>/<page>.md", file=sys.stderr)
        return 2
    try:
        return run(args, ROOT / "site")
    except CheckError as error:
        print(f"make check: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
