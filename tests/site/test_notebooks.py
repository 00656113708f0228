"""Every page with code as a notebook: current, valid, linked from the page, and it runs.

The notebooks under notebooks/ are generated from the pages (fieldguide/notebooks/generate.py,
`make notebooks`). A notebook runs in a fresh kernel of this interpreter, in an empty folder,
with deprecations as errors (the kernel gets the suite's -W flags), as a reader runs it after
downloading it. Notebooks whose page includes a GPU snippet run on a GPU (`make test-gpu`).

A notebook's code cells are the page's blocks in order, so its run is also the check that the
page's code, copied in order into a fresh interpreter, runs: one run, not two of the same code.
"""

import json
import os
import posixpath
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fieldguide import ROOT
from fieldguide.content.pages import includes, pages
from fieldguide.notebooks import generate as notebooks
from fieldguide.notebooks import outputs as recorded
from fieldguide.rendering.shortcodes import KINDS
from tests.helpers import ENTRY_POINTS, STRICT_WARNINGS, rel, run_python

REPO = notebooks.Repo.from_mkdocs_yml(ROOT)
DOCS = ROOT / "docs"
CODE_PAGES = [p for p in pages(DOCS) if includes(p.read_text(encoding="utf-8"))]
CELL_TIMEOUT = 600  # seconds; the slowest CPU notebook takes about 15 s on a 2-core CI machine


def docs_path(page) -> str:
    return page.relative_to(DOCS).as_posix()


def test_there_are_notebooks():
    assert CODE_PAGES and len(notebooks.committed(ROOT)) == len(CODE_PAGES)


def test_notebooks_match_their_pages():
    problems = notebooks.problems(ROOT, REPO)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", CODE_PAGES, ids=rel)
def test_notebook_is_valid_and_laid_out_as_nbformat_writes_it(page):
    nbformat = pytest.importorskip("nbformat")
    text = (ROOT / notebooks.notebook_path(docs_path(page))).read_text(encoding="utf-8")
    notebook = nbformat.reads(text, as_version=4)
    nbformat.validate(notebook)
    assert nbformat.writes(notebook) + "\n" == text, "a save in Jupyter would rewrite the file"


@pytest.mark.parametrize("page", CODE_PAGES, ids=rel)
def test_code_cells_are_the_pages_sections_in_order(page):
    from fieldguide.content.pages import included_code

    notebook = json.loads((ROOT / notebooks.notebook_path(docs_path(page))).read_text(encoding="utf-8"))
    # a block the notebook cut into parts for its prompts counts as the block: its parts joined
    code = recorded.blocks([c for c in notebook["cells"] if c["cell_type"] == "code"])
    assert "torch.cuda.is_available()" in code[0] or "torch.cuda.device_count()" in code[0]
    shown = "\n\n".join(code[1:])
    position = 0
    for path, section in notebook_order(page):
        found = shown.find(included_code(ROOT, path, section), position)
        assert found >= 0, f"{path}:{section} is not in the notebook after the sections before it"
        position = found
    text = "".join("".join(c["source"]) for c in notebook["cells"])
    assert not re.search(rf"<!--|timing-({'|'.join(KINDS)})\b", text), \
        "a shortcode or comment leaked into the notebook"
    assert not re.search(r"^\s*(```|~~~)\s*mermaid", text, re.M), \
        "a diagram in the notebook: its page on the site would fetch Mermaid from a CDN"


@pytest.mark.parametrize("page", CODE_PAGES, ids=rel)
def test_a_block_cut_for_the_prompts_is_whole_again_when_its_parts_are_joined(page):
    """Where the notebook cuts a code block into parts, so that each "predict, then run" prompt
    sits above the part printing its answer, the parts are consecutive code cells, each valid
    Python on its own, and joined again they are the page's block, whose code keys its recorded
    output (fieldguide/notebooks/outputs.py: `make outputs` records the whole block's from them)."""
    import ast

    from fieldguide.content.pages import included_code

    cells = json.loads((ROOT / notebooks.notebook_path(docs_path(page))).read_text(encoding="utf-8"))["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    joined = {recorded.code_key(block) for block in recorded.blocks(code)}
    on_the_page = {recorded.code_key("\n\n".join(included_code(ROOT, *i) for i in fence))
                   for fence in fenced_includes(page)}
    wholes = [recorded.part_of(c) for c in code if recorded.part_of(c)]
    for whole in dict.fromkeys(wholes):
        runs = [n for n, c in enumerate(code) if recorded.part_of(c) == whole]
        assert runs == list(range(runs[0], runs[-1] + 1)) and len(runs) > 1, \
            f"the parts of one block are consecutive code cells, two at least: cells {runs}"
        for n in runs:
            ast.parse("".join(code[n]["source"]))
        assert whole in joined, "the parts, joined again, are not the block they were cut from"
        assert whole in on_the_page, "the block the parts were cut from is no block of the page"


def fenced_includes(page) -> list[list]:
    """The includes of each code fence of the page, as (path, section) lists."""
    found, fence = [], None
    for line in page.read_text(encoding="utf-8").splitlines():
        if re.match(r"\s*(```|~~~)", line):
            fence = [] if fence is None else (found.append(fence) or None)
        elif fence is not None and (include := notebooks.INCLUDE.match(line)):
            fence.append((include["path"], include["section"]))
    return [f for f in found if f]


# --- Exercise pages: their notebooks are workbooks ---------------------------------------------------

SOLUTION = re.compile(r'^(?P<indent>\s*)\?\?\?\+?\s+[\w-]+\s+"Solution[^"]*"\s*$')
WORKBOOKS = [p for p in CODE_PAGES if notebooks.is_workbook(docs_path(p))]


def tasks_and_solutions(page) -> tuple[list, list, list]:
    """A page's includes as (before its last solution and in none, in a collapsed solution,
    after its last solution), each in page order."""
    tasks, solutions, rest = [], [], []
    indent = None
    for line in page.read_text(encoding="utf-8").splitlines():
        if indent is not None and line.strip() and not line.startswith(indent + "    "):
            indent = None
        if match := SOLUTION.match(line):
            indent = match["indent"]
            rest, tasks = [], tasks + rest  # what came since the last solution was a task
            continue
        if include := notebooks.INCLUDE.match(line):
            (solutions if indent is not None else rest).append((include["path"], include["section"]))
    if not solutions:
        return rest, [], []
    return tasks, solutions, rest


def notebook_order(page) -> list:
    """The includes in the order the notebook holds them: the page's order, but on an exercise
    page the solutions after all the exercises (before the whole script, summary, references)."""
    if not notebooks.is_workbook(docs_path(page)):  # a whole file is shown, not run
        return [i for i in includes(page.read_text(encoding="utf-8")) if i[1] is not None]
    tasks, solutions, rest = tasks_and_solutions(page)
    return tasks + solutions + rest


def test_every_chapter_has_an_exercise_page_with_a_notebook():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    chapters = re.findall(r"^  - (?P<chapter>[^:\n]+):\n(?P<pages>(?:      - .*\n)+)", nav, re.M)
    reference = {"Home", "Case studies", "Reference", "Contributing"} | ENTRY_POINTS
    taught = [(name, entries) for name, entries in chapters if name not in reference]
    assert len(taught) >= 7, "the nav's chapters were not found"
    for name, entries in taught:
        listed = re.findall(r"- (\S+\.md)", entries)
        exercises = [p for p in listed if notebooks.is_workbook(p)]
        assert exercises == listed[-1:], f"{name}: its exercise page is the last in its chapter"
        assert DOCS / exercises[0] in WORKBOOKS, f"{exercises[0]} shows no code"


@pytest.mark.parametrize("page", WORKBOOKS, ids=rel)
def test_an_exercise_notebook_has_an_empty_cell_per_task_and_the_solutions_after_all_tasks(page):
    from fieldguide.content.pages import included_code

    cells = json.loads((ROOT / notebooks.notebook_path(docs_path(page))).read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]) if c["cell_type"] == "code" else None for c in cells]
    tasks, solutions, _ = tasks_and_solutions(page)
    markdown = page.read_text(encoding="utf-8")
    assert 2 <= len(re.findall(SOLUTION.pattern, markdown, re.M)) <= 4, "two to four exercises"
    empty = [n for n, source in enumerate(code) if source == ""]
    assert len(empty) == len(re.findall(SOLUTION.pattern, markdown, re.M)), \
        "one empty cell to attempt each exercise in"
    for n in empty:  # right after the task's own code and a line that says what the cell is for
        assert "Your attempt" in "".join(cells[n - 1]["source"])
        assert code[n - 2], "an attempt cell follows the exercise's starter code"
    first_solution = min(next(n for n, source in enumerate(code)
                              if source and included_code(ROOT, *found) in source)
                         for found in solutions)
    assert first_solution > empty[-1], "a solution's code comes before the last exercise's attempt"
    headings = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    assert "## Solutions" in "\n".join(h.split("\n", 1)[0] for h in headings)
    assert tasks and solutions


def test_links_resolve_to_tracked_files():
    """Colab opens the notebook from GitHub and the site serves it: both must be committed."""
    tracked = set(subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.split("\0"))
    if not tracked - {""}:
        pytest.skip("not a git checkout")
    prefix = f"https://colab.research.google.com/github/{REPO.owner}/{REPO.name}/blob/{REPO.branch}/"
    repo_url = f"https://github.com/{REPO.owner}/{REPO.name}"
    assert repo_url in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in CODE_PAGES:
        page_rel = docs_path(page)
        found = notebooks.links(page_rel, REPO)
        assert found["colab"].startswith(prefix)
        notebook = found["colab"].removeprefix(prefix)
        assert notebook in tracked, (
            f"{rel(page)}: its Colab link opens {notebook}, which git does not track: "
            f"git add {notebook} (Colab opens the committed file; `make notebooks` writes it)")
        served = posixpath.normpath(posixpath.join(posixpath.dirname(page_rel), found["download"]))
        assert served in tracked, (f"{rel(page)}: download link to {served}, not a tracked file: "
                                   f"git add {served}")
        assert served == notebooks.notebook_path(page_rel)
        markdown = notebooks.add_links(page.read_text(encoding="utf-8"), page_rel, REPO)
        assert found["download"] in markdown and found["colab"] in markdown


# --- Running them ----------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def kernel(tmp_path_factory):
    """A kernelspec for this interpreter, with the suite's warning filters on its command line."""
    kernels = tmp_path_factory.mktemp("kernels")
    spec = kernels / "fieldguide" / "kernel.json"
    spec.parent.mkdir()
    # Tornado, under the kernel itself, asks Python 3.12+ for an event loop in a deprecated way
    # as the kernel starts: that one is the kernel's, not the notebook's, so it stays a warning.
    kernel_own = ["-W", "ignore:There is no current event loop:DeprecationWarning"]
    argv = [sys.executable, *STRICT_WARNINGS, *kernel_own,
            "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.write_text(json.dumps({"argv": argv, "display_name": "field guide tests", "language": "python"}))
    return kernels


def _run(notebook_file, kernels, cwd):
    try:
        import nbformat
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager
        from nbclient import NotebookClient
    except ImportError as exc:  # the reason starts like a GPU skip, so `make test-gpu` fails on it
        pytest.skip(f"needs nbclient, nbformat and ipykernel to run notebooks ({exc})")
    notebook = nbformat.read(notebook_file, as_version=4)
    manager = KernelManager(kernel_name="fieldguide",
                            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    # The project stays off the kernel's path (the notebook must stand alone); other entries,
    # such as the GPU machine's carried ipykernel, stay on it.
    env = dict(os.environ)
    kept = [entry for entry in env.pop("PYTHONPATH", "").split(os.pathsep)
            if entry and Path(entry).resolve() != ROOT.resolve()]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    client = NotebookClient(notebook, km=manager, timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": str(cwd)}})
    # cleanup_kc: shut the kernel down when done. Given a manager, nbclient leaves its kernel
    # running until the interpreter exits, so a parallel GPU run piled up kernels holding GPU
    # memory (80.8 of 81.6 GB in use by the end, then an out-of-memory error; 2026-11-23).
    client.execute(env=env, cleanup_kc=True)
    return notebook


# Pages whose code cannot run in Jupyter yet, each with the reason. Their code runs as a script
# instead, and their notebook must still fail (so a fix shows).
NOT_IN_JUPYTER: dict[str, str] = {}  # page -> why its notebook cannot run in Jupyter

# Opt-in, on a GPU: FIELDGUIDE_SAVE_OUTPUTS=DIR keeps what each notebook's cells printed, keyed by
# each cell's code, under DIR/<gpu>/<chapter>/<page>.json (fieldguide/notebooks/outputs.py; commit them
# under outputs/). Off by default: a test run writes nothing. Only `make outputs` records: one
# notebook at a time, with the GPU to itself (fieldguide.notebooks.outputs.gpu_alone refuses otherwise).
SAVE_OUTPUTS = "FIELDGUIDE_SAVE_OUTPUTS"


def _marks(page):
    shown = dict.fromkeys(path for path, _ in includes(page.read_text(encoding="utf-8")))
    return [pytest.mark.snippet(*shown)]


def copied_code(page) -> str:
    """The page's code blocks, concatenated the way a reader pastes them into a script."""
    from fieldguide.content.pages import included_code

    return "\n\n".join(included_code(ROOT, path, section)
                       for path, section in includes(page.read_text(encoding="utf-8"))) + "\n"


@pytest.mark.fresh_interpreter
@pytest.mark.parametrize("page", [pytest.param(p, marks=_marks(p)) for p in CODE_PAGES], ids=rel)
def test_notebook_runs(page, kernel, tmp_path):
    notebook_file = ROOT / notebooks.notebook_path(docs_path(page))
    if docs_path(page) in NOT_IN_JUPYTER:
        result = run_python(["-c", copied_code(page)])
        assert result.returncode == 0, f"code copied from {rel(page)} fails:\n{result.stderr}"
        nbclient_exceptions = pytest.importorskip("nbclient.exceptions")
        with pytest.raises(nbclient_exceptions.CellExecutionError):  # runs now? take it off NOT_IN_JUPYTER
            _run(notebook_file, kernel, tmp_path)
        return
    saving = os.environ.get(SAVE_OUTPUTS)
    if saving:  # refused beside other work (pytest-xdist, another process on the GPU): `make outputs`
        from fieldguide.notebooks import outputs as recorded
        from fieldguide.notebooks.record_outputs import DEADLINE

        if time.time() > float(os.environ.get(DEADLINE, "inf")):
            pytest.skip("make outputs: its deadline passed before this notebook started")
        recorded.gpu_alone()
    notebook = _run(notebook_file, kernel, tmp_path)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    printed = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    assert "CUDA GPU" in printed, "the first cell says which GPU the notebook found"
    if saving:
        recorded.save(notebook, docs_path(page), Path(saving))


@pytest.mark.fresh_interpreter
def test_a_deprecation_fails_a_notebook(kernel, tmp_path):
    """IPython shows DeprecationWarnings from notebook code instead of raising them; the kernel's
    -W flags make them errors, as in the rest of the suite."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import warnings\n\n\ndef old():\n"
        "    warnings.warn('old API', DeprecationWarning, stacklevel=2)\n\n\nold()\n")])
    path = tmp_path / "deprecated.ipynb"
    nbformat.write(notebook, path)
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="DeprecationWarning"):
        _run(path, kernel, tmp_path)
