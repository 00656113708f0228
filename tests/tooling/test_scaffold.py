"""`make new-page` in a temporary copy of the repository, then the guide's path to a green check.

The copy holds what a fresh clone holds (tracked files, plus files not yet committed but not
ignored, so the test sees the working tree), as a git repository of its own, and the tree's
build caches (ignored, keyed by content). `make new-page`
runs there twice: a page that will be published as it is, and a draft (`DRAFT=1`) that quotes a
number no GPU has measured yet. Then the test does what docs/contributing.md ("Adding a page")
says, without a GPU: run the snippet, replace every placeholder, `make notebooks`, `git add`,
and `make check` on both pages, which must pass: their tests, snippets and notebooks, a strict
build of the whole copy, and the checks of the built site for them. The draft is left out of
the build and its claim about measurements waits; the published page is served with its
notebook.
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

pytest.importorskip("mkdocs")  # before fieldguide.rendering.placeholders, which needs Markdown

from fieldguide import ROOT
from fieldguide.authoring import scaffold
from fieldguide.measuring.timing_run import PYTEST_ARGS
from fieldguide.rendering import placeholders
from tests.helpers import STRICT_WARNINGS

CHAPTER, TOPIC = "memory_tricks", "tiny-kernels"   # a new chapter; kebab-case topic on purpose
DRAFT_TOPIC = "tiny-sums"                           # a draft in it, quoting a number not measured
NAMES = scaffold.Names.parse(CHAPTER, TOPIC)
DRAFT = scaffold.Names.parse(CHAPTER, DRAFT_TOPIC)


def run(args, cwd, timeout=600, **kwargs):
    # Nor PYTEST_XDIST_WORKER: pytest-benchmark in a child would take itself for an xdist worker;
    # nor FIELDGUIDE_BUILT_SITE: the copy's tests read the copy's build.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTEST_XDIST_WORKER", "FIELDGUIDE_BUILT_SITE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # python3: this one
    env["NO_MKDOCS_2_WARNING"] = "1"
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, **kwargs)


def git(cwd, *args):
    return run(["git", "-c", "user.name=scaffold test", "-c", "user.email=test@example.com", *args],
               cwd, check=True).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """The copy, right after `make new-page` for both pages: (path, what it printed for each,
    the text of every file as the scaffold left it)."""
    if not shutil.which("make") or not shutil.which("git"):
        pytest.skip("make or git is not installed")
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], ROOT)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    copy = tmp_path_factory.mktemp("clone")
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    # The build caches too (ignored, so not in a clone): keyed by content, they never serve a
    # stale figure or notebook, and with them the copy's build draws only what the new pages
    # changed, as a contributor's second build does (cold, it cost 40 CPU-seconds of make test).
    if (ROOT / ".build-cache").is_dir():
        shutil.copytree(ROOT / ".build-cache", copy / ".build-cache")
    git(copy, "init", "-q", "-b", "main")
    git(copy, "add", "-A")
    git(copy, "commit", "-q", "-m", "the repository before the new page")
    made = run(["make", "-s", "new-page", f"CHAPTER={CHAPTER}", f"TOPIC={TOPIC}"], copy)
    assert made.returncode == 0, made.stderr
    drafted = run(["make", "-s", "new-page", f"CHAPTER={CHAPTER}", f"TOPIC={DRAFT_TOPIC}", "DRAFT=1"], copy)
    assert drafted.returncode == 0, drafted.stderr
    changed = git(copy, "status", "--porcelain", "-uall").splitlines()
    scaffolded = {line[3:]: (copy / line[3:]).read_text(encoding="utf-8") for line in changed}
    return copy, made.stdout, drafted.stdout, scaffolded


def test_it_creates_each_file_with_the_conventions(repo):
    copy, out, _, scaffolded = repo
    for path in (NAMES.snippet, NAMES.test, NAMES.bench, f"docs/{NAMES.page}",
                 "snippets/memory_tricks/__init__.py", "notebooks/memory-tricks/tiny-kernels.ipynb"):
        assert path in scaffolded and f"created {path}" in out, path
    assert NAMES.snippet == "snippets/memory_tricks/tiny_kernels.py"
    assert NAMES.page == "memory-tricks/tiny-kernels.md"
    snippet = scaffolded[NAMES.snippet]
    assert re.search(r"^GPUS_NEEDED = 0\b", snippet, re.M) and 'if __name__ == "__main__":' in snippet
    assert f'pytest.mark.snippet("{NAMES.snippet}")' in scaffolded[NAMES.test]
    assert f'pytest.mark.snippet("{NAMES.snippet}")' in scaffolded[NAMES.bench]
    assert f'--8<-- "{NAMES.snippet}:example"' in scaffolded[f"docs/{NAMES.page}"]
    nav = scaffolded["mkdocs.yml"].split("\nnav:\n", 1)[1]
    assert "  - Memory tricks:\n      - memory-tricks/tiny-kernels.md\n" in nav
    assert nav.index("Memory tricks") < nav.index("Reference"), "a new chapter goes after the last one"
    assert scaffolded["docs/cheat-sheet.md"].endswith(
        "## Memory tricks\n\n- Replace with the one-line rule this page teaches.\n"
        "  [Tiny kernels](memory-tricks/tiny-kernels.md#summary)\n"), "and none for the draft"
    assert "make check PAGE=docs/memory-tricks/tiny-kernels.md" in out


def test_a_draft_is_listed_in_draft_docs_with_no_nav_entry_and_no_rule(repo):
    _, _, out, scaffolded = repo
    drafts = re.search(r"^draft_docs:[ \t]*\|[ \t]*\n((?:[ \t]+\S.*\n)*)", scaffolded["mkdocs.yml"], re.M)
    assert drafts and "  memory-tricks/tiny-sums.md" in drafts[1].splitlines(), scaffolded["mkdocs.yml"]
    assert "tiny-sums" not in scaffolded["mkdocs.yml"].split("\nnav:\n", 1)[1]
    assert "listed memory-tricks/tiny-sums.md under draft_docs" in out
    assert "tiny-sums" not in scaffolded["docs/cheat-sheet.md"]


def test_the_new_snippet_runs(repo):
    copy = repo[0]
    result = run([sys.executable, *STRICT_WARNINGS, "-m", "snippets.memory_tricks.tiny_kernels"], copy)
    assert result.returncode == 0, result.stderr
    assert "scaled_sum(1000) on" in result.stdout and "999000.0" in result.stdout


def test_the_benchmark_is_collected_under_its_timings_name(repo):
    copy = repo[0]
    collect = run([sys.executable, "-m", "pytest", *PYTEST_ARGS, "--collect-only", NAMES.bench], copy)
    assert collect.returncode == 0, collect.stdout
    assert "benchmarks/bench_tiny_kernels.py::bench_scaled_sum[1024]" in collect.stdout


# --- The guide's path, without a GPU ----------------------------------------------------------------

# What the author writes in place of each placeholder (docs/contributing.md, "Adding a page").
WRITTEN = {
    "- Replace with what a reader will be able to do after this page.":
        "- Sum a tensor where it lives, on the GPU when there is one.",
    "- Replace with the second thing; keep the box to between two and four points.":
        "- Read back one number, not the whole tensor.",
    "**Prerequisites:** replace with links to the pages to read first.":
        "**Prerequisites:** [PyTorch on a GPU](../first-steps/pytorch-on-a-gpu.md).",
    "Replace with the page's opening: the question it answers and why it matters on a GPU.":
        "A sum reads every element once, so where the tensor lives decides where it runs.",
    "Replace with what the code shows.": "The sum runs on `device` and returns a Python float.",
    "- Replace with what to take from this page.": "- Sum on the device that holds the data.",
    "- Replace with the primary sources the page relies on, each with what it supports, e.g.":
        "- Where tensors live and run:",
    "- Replace with the next one, e.g. the": "- How kernels read memory: the",
    "- Replace with the one-line rule this page teaches.": "- Sum a tensor on the device that holds it.",
    '"""Replace with the code the page teaches: here, a sum computed on `device`."""':
        '"""A sum computed on `device`."""',
}
# The draft quotes a number that only a GPU can measure, and its tests claim something about it.
QUOTED = ("\nOn the GPU, the smallest sum takes\n"
          "<!-- timing-value: tiny_sums.scaled_sum[1024] median -->.\n\n## Summary\n")
CLAIM = """

def test_the_smallest_sum_is_measured_in_every_run(measured):
    for run in measured("tiny_sums.scaled_sum[1024]"):
        assert run.value("tiny_sums.scaled_sum[1024]") > 0, str(run)
"""


def write(path: Path, edit) -> None:
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")


def written(text: str) -> str:
    for placeholder, own in WRITTEN.items():
        text = text.replace(placeholder, own)
    return text


@pytest.fixture(scope="module")
def guided(repo):
    """The guide's steps on both pages; what `make check` printed, and what the notebook test
    said before `git add`."""
    copy = repo[0]
    pages = [copy / "docs" / NAMES.page, copy / "docs" / DRAFT.page]
    assert all(placeholders.found(p.read_text(encoding="utf-8")) for p in pages)  # the build would refuse
    for path in [*pages, copy / "docs" / "cheat-sheet.md", copy / NAMES.snippet, copy / DRAFT.snippet]:
        write(path, written)
    write(pages[1], lambda text: text.replace("\n## Summary\n", QUOTED, 1))
    write(copy / DRAFT.test, lambda text: text + CLAIM)
    notebooks = run(["make", "-s", "notebooks"], copy)
    assert notebooks.returncode == 0, notebooks.stderr
    untracked = run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                     "tests/site/test_notebooks.py", "-k", "links_resolve"], copy)
    git(copy, "add", "-A")   # before the checks: Colab links need tracked notebooks
    check = run(["make", "-s", "check", f"PY={sys.executable}",
                 f"PAGE=docs/{NAMES.page} docs/{DRAFT.page}"], copy, timeout=900)
    return check, untracked


def test_an_untracked_notebook_fails_with_what_to_do(guided):
    _, untracked = guided
    assert untracked.returncode == 1
    assert "git add notebooks/memory-tricks/tiny-kernels.ipynb" in untracked.stdout, untracked.stdout[-3000:]


# Not marked fresh_interpreter, though it runs make check: the long tests go first, and this
# file's module-scoped copy would then be made twice (once for it, once for the tests after).
def test_make_check_passes_for_both_pages_without_a_gpu(guided):
    check, _ = guided
    assert check.returncode == 0, (check.stdout + check.stderr)[-6000:]
    assert "in all: passed" in check.stdout
    passed = set(re.findall(r"^PASSED \S+::(\w+)", check.stdout, re.M))
    for name in ("test_scaled_sum_is_exact_for_small_integers", "test_conventions", "test_runs_as_module",
                 "test_every_section_is_on_a_page", "test_sections_fit_the_page", "test_notebook_runs",
                 "test_notebooks_match_their_pages", "test_links_resolve_to_tracked_files",
                 "test_no_published_page_holds_a_placeholder",
                 "test_labels_are_literals_naming_existing_benchmarks",
                 "test_the_site_builds_with_strict", "test_every_chapter_page_opens_with_what_you_will_learn",
                 "test_every_chapter_page_has_a_summary", "test_every_chapter_page_ends_with_its_references",
                 "test_every_term_in_the_text_is_an_abbr_with_its_meaning",
                 "test_the_cheat_sheet_links_every_chapter_page",
                 "test_every_rule_links_a_section_of_a_chapter_page"):
        assert name in passed, f"{name} did not pass for the new pages"
    for page in (NAMES.page, DRAFT.page):   # both pages' own checks ran
        assert re.search(rf"^PASSED \S+::test_notebook_runs\[docs/{page}\]", check.stdout, re.M), page
    assert re.search(r"^SKIPPED .*tiny-sums is a draft page \(draft_docs in mkdocs.yml\): not measured yet",
                     check.stdout, re.M), "the draft's claim about measurements waits for its timings"


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


def test_the_strict_build_serves_the_page_leaves_the_draft_out_and_every_download_resolves(repo, guided):
    copy, site = repo[0], repo[0] / "site"
    assert guided[0].returncode == 0, "make check failed (see the test above)"
    tracked = set(git(copy, "ls-files").splitlines())
    pages_with_links = 0
    for html in sorted(site.rglob("index.html")):
        text = html.read_text(encoding="utf-8")
        assert "tiny-sums" not in text, f"{html} links the draft, which the site leaves out"
        links = _Links()
        links.feed(text)
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
    assert not (site / "memory-tricks" / "tiny-sums").exists()


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
    copy = repo[0]
    before = git(copy, "status", "--porcelain")
    result = run([sys.executable, "-m", "fieldguide.authoring.scaffold", chapter, topic], copy)
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


def test_a_draft_page_joins_the_draft_docs_block_or_starts_one():
    names = scaffold.Names.parse("execution", "tiny_streams")
    config = "site_name: x\ndraft_docs: |\n  memory/\nvalidation:\n  anchors: warn\n"
    assert scaffold.add_to_drafts(config, names) == config.replace(
        "  memory/\n", "  memory/\n  execution/tiny-streams.md\n")
    started = scaffold.add_to_drafts("site_name: x\n\nvalidation:\n  anchors: warn\n", names)
    assert started == ("site_name: x\n\ndraft_docs: |\n  execution/tiny-streams.md\n\n"
                       "validation:\n  anchors: warn\n")
