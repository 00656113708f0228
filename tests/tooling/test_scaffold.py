"""`make new-page` in a temporary copy of the repository: the new page passes the site's checks.

The copy holds what a fresh clone holds (tracked files, plus files not yet committed but not
ignored, so the test sees the working tree), as a git repository of its own. `make new-page`
runs there; then the new snippet runs, its page's tests and the site checks for it pass, and the
strict build of the copy passes, serving every page's notebook.
"""

import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

from fieldguide import ROOT, scaffold
from fieldguide.timing_run import PYTEST_ARGS
from tests.helpers import STRICT_WARNINGS

CHAPTER, TOPIC = "memory_tricks", "tiny-kernels"   # a new chapter; kebab-case topic on purpose
NAMES = scaffold.Names.parse(CHAPTER, TOPIC)

pytest.importorskip("mkdocs")


def run(args, cwd, timeout=600, **kwargs):
    # Nor PYTEST_XDIST_WORKER: pytest-benchmark in a child would take itself for an xdist worker.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_XDIST_WORKER")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # python3: this one
    env["NO_MKDOCS_2_WARNING"] = "1"
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, **kwargs)


def git(cwd, *args):
    return run(["git", "-c", "user.name=scaffold test", "-c", "user.email=test@example.com", *args],
               cwd, check=True).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    if not shutil.which("make") or not shutil.which("git"):
        pytest.skip("needs make and git")
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], ROOT)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    copy = tmp_path_factory.mktemp("clone")
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    git(copy, "init", "-q", "-b", "main")
    git(copy, "add", "-A")
    git(copy, "commit", "-q", "-m", "the repository before the new page")
    made = run(["make", "-s", "new-page", f"CHAPTER={CHAPTER}", f"TOPIC={TOPIC}"], copy)
    assert made.returncode == 0, made.stderr
    git(copy, "add", "-A")   # what a contributor does next; Colab links need tracked files
    return copy, made.stdout


def test_it_creates_each_file_with_the_conventions(repo):
    copy, out = repo
    for path in (NAMES.snippet, NAMES.test, NAMES.bench, f"docs/{NAMES.page}",
                 "snippets/memory_tricks/__init__.py", "notebooks/memory-tricks/tiny-kernels.ipynb"):
        assert (copy / path).is_file() and f"created {path}" in out, path
    assert NAMES.snippet == "snippets/memory_tricks/tiny_kernels.py"
    assert NAMES.page == "memory-tricks/tiny-kernels.md"
    snippet = (copy / NAMES.snippet).read_text()
    assert re.search(r"^GPUS_NEEDED = 0\b", snippet, re.M) and 'if __name__ == "__main__":' in snippet
    assert f'pytest.mark.snippet("{NAMES.snippet}")' in (copy / NAMES.test).read_text()
    assert f'pytest.mark.snippet("{NAMES.snippet}")' in (copy / NAMES.bench).read_text()
    assert f'--8<-- "{NAMES.snippet}:example"' in (copy / "docs" / NAMES.page).read_text()
    nav = (copy / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    assert "  - Memory tricks:\n      - memory-tricks/tiny-kernels.md\n" in nav
    assert nav.index("Memory tricks") < nav.index("Reference"), "a new chapter goes after the last one"
    cheat_sheet = (copy / "docs" / "cheat-sheet.md").read_text()
    assert cheat_sheet.endswith("## Memory tricks\n\n- Replace with the one-line rule this page teaches.\n"
                                "  [Tiny kernels](memory-tricks/tiny-kernels.md#summary)\n")


def test_the_new_snippet_runs(repo):
    copy, _ = repo
    result = run([sys.executable, *STRICT_WARNINGS, "-m", "snippets.memory_tricks.tiny_kernels"], copy)
    assert result.returncode == 0, result.stderr
    assert "scaled_sum(1000) on" in result.stdout and "999000.0" in result.stdout


def test_the_new_files_pass_lint_and_the_page_and_site_tests(repo):
    copy, _ = repo
    new = [NAMES.snippet, NAMES.test, NAMES.bench, "snippets/memory_tricks/__init__.py"]
    lint = run([sys.executable, "-m", "ruff", "check", *new], copy)
    assert lint.returncode == 0, lint.stdout
    # the page's own test, and every site check that names the new page, snippet or benchmark
    tests = run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "-m", "not browser",
                 "-k", "(tiny_kernels or tiny-kernels or match_their_pages or links_resolve "
                       "or every_rule_links or cheat_sheet_links_every) and not last_update",
                 NAMES.test, "tests/site", "tests/tooling/test_labels.py"], copy)
    assert tests.returncode == 0, tests.stdout[-6000:]
    passed = re.findall(r"^PASSED \S+::(\w+)", tests.stdout, re.M)
    for check in ("test_scaled_sum_is_exact_for_small_integers", "test_conventions",
                  "test_runs_as_module", "test_every_section_is_on_a_page", "test_sections_fit_the_page",
                  "test_notebook_runs", "test_notebooks_match_their_pages",
                  "test_links_resolve_to_tracked_files",
                  "test_every_chapter_page_opens_with_what_you_will_learn",
                  "test_every_chapter_page_has_a_summary", "test_the_cheat_sheet_links_every_chapter_page",
                  "test_labels_are_literals_naming_existing_benchmarks"):
        assert check in passed, f"{check} did not run for the new page"


def test_the_benchmark_is_collected_under_its_timings_name(repo):
    copy, _ = repo
    collect = run([sys.executable, "-m", "pytest", *PYTEST_ARGS, "--collect-only", NAMES.bench], copy)
    assert collect.returncode == 0, collect.stdout
    assert "benchmarks/bench_tiny_kernels.py::bench_scaled_sum[1024]" in collect.stdout


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.downloads, self.colab = [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and "download" in attrs:
            self.downloads.append(attrs["href"])
        if tag == "a" and (attrs.get("href") or "").startswith("https://colab.research.google.com/"):
            self.colab.append(attrs["href"])


def test_the_strict_build_passes_and_every_download_link_resolves(repo):
    copy, _ = repo
    build = run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", "site"], copy)
    assert build.returncode == 0, build.stderr[-4000:]
    site = copy / "site"
    tracked = set(git(copy, "ls-files").splitlines())
    pages_with_links = 0
    for html in sorted(site.rglob("index.html")):
        links = _Links()
        links.feed(html.read_text(encoding="utf-8"))
        assert len(links.downloads) == len(links.colab), html
        pages_with_links += bool(links.downloads)
        page_url = "http://site/" + html.parent.relative_to(site).as_posix() + "/"
        for href in links.downloads:
            served = urlparse(urljoin(page_url, href)).path.lstrip("/")
            assert (site / served).is_file(), f"{html}: download link {href} resolves to nothing"
            assert served in tracked, f"{html}: the site serves {served}, which is not committed"
        for href in links.colab:
            assert href.split("/blob/main/", 1)[1] in tracked, f"{html}: Colab would open a missing file"
    assert pages_with_links >= 15   # the new page and every page before it that has code
    assert (site / "memory-tricks" / "tiny-kernels" / "index.html").is_file()


@pytest.mark.parametrize(("chapter", "topic", "says"), [
    (CHAPTER, TOPIC, "exists already"),              # the page made above
    ("execution", "events", "exists already"),
    ("first_steps", "tiny_kernels", "exists already"),  # topics are unique across chapters
    ("Execution", "x", "is not lowercase words"),
    ("execution", "two__underscores", "is not lowercase words"),
    ("execution", "class", "Python keyword"),
    ("", "", "usage"),
    ("assets", "x", "not a chapter"),
])
def test_it_refuses_in_one_line_and_writes_nothing(repo, chapter, topic, says):
    copy, _ = repo
    before = git(copy, "status", "--porcelain")
    result = run([sys.executable, "-m", "fieldguide.scaffold", chapter, topic], copy)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
    made = run(["make", "-s", "new-page", f"CHAPTER={chapter}", f"TOPIC={topic}"], copy)
    assert made.returncode != 0 and says in made.stderr
    assert git(copy, "status", "--porcelain") == before


def test_an_existing_chapter_gets_the_page_at_the_end_of_its_section():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    names = scaffold.Names.parse("execution", "tiny_streams")
    nav = scaffold.add_to_nav(config, names).split("\nnav:\n", 1)[1]
    section = nav.split("  - Asynchronous execution:\n", 1)[1].split("\n  - ", 1)[0]
    assert section.splitlines()[-1] == "      - execution/tiny-streams.md"
    assert nav.count("tiny-streams") == 1


def test_a_draft_chapter_gets_no_nav_entry():
    config = "nav:\n  - Home: index.md\ndraft_docs: |\n  precision/\n  memory/\n"
    assert scaffold.is_draft(config, "memory") and not scaffold.is_draft(config, "execution")
