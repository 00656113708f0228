"""The notebook generator and the site's links to it, on a tiny project (fieldguide/notebooks/generate.py,
fieldguide/rendering/render.py, fieldguide/notebooks/outputs.py).

A page becomes a notebook of its own sections and prose; numbers stay on the page; write and
check modes agree; and `mkdocs build --strict` serves the notebook, links it, and fails when it
is stale, missing or has no page.
"""

import json
import os
import subprocess
import sys

import pytest

from fieldguide import ROOT
from fieldguide.notebooks import generate as notebooks
from fieldguide.notebooks import outputs

SNIPPET = '''\
"""A demo snippet."""

GPUS_NEEDED = 0

# --8<-- [start:setup]
import math


def area(r):
    return math.pi * r * r
# --8<-- [end:setup]


if __name__ == "__main__":
    # --8<-- [start:main]
    print("area", area(2.0))
    # --8<-- [end:main]
'''
PAGE = '''\
# Circles

An intro that links to [the home page](../index.md#start) and [below](#the-area).

```python
--8<-- "snippets/demo/circles.py:setup"
```

## The area

!!! tip "Keep it simple"
    One formula, tested.

The area took <!-- timing-value: circles.area median --> on the GPU.

| Run | Time |
|:--|--:|
| area | <!-- timing-value: circles.area median --> |

<!-- timing-chart: circles.area[*] x=r y=median -->

Run it from a shell:

```bash
python -m snippets.demo.circles
```

```python
--8<-- "snippets/demo/circles.py:main"
```
'''
MKDOCS = """
site_name: notebook links test
repo_url: https://github.com/acme/guide
edit_uri: edit/trunk/docs/
markdown_extensions:
  - fieldguide.rendering.render
  - admonition
  - attr_list
  - tables
  - pymdownx.snippets:
      base_path: [.]
      check_paths: true
      dedent_subsections: true
"""
REPO = notebooks.Repo("acme", "guide", "trunk")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "snippets" / "demo").mkdir(parents=True)
    (tmp_path / "snippets" / "demo" / "__init__.py").write_text("")
    (tmp_path / "snippets" / "demo" / "circles.py").write_text(SNIPPET)
    (tmp_path / "docs" / "demo").mkdir(parents=True)
    (tmp_path / "docs" / "demo" / "circles.md").write_text(PAGE)
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n## Start\n\nNo code here.\n")
    (tmp_path / "mkdocs.yml").write_text(MKDOCS)
    return tmp_path


def cells(notebook):
    return [(c["cell_type"], "".join(c["source"])) for c in notebook["cells"]]


def test_repo_comes_from_the_config(project):
    assert notebooks.Repo.from_mkdocs_yml(project) == REPO
    assert notebooks.Repo.from_mkdocs_yml(ROOT).colab("notebooks/x.ipynb").startswith(
        "https://colab.research.google.com/github/")
    assert notebooks.Repo.from_config("https://github.com/a/b.git/").name == "b"
    with pytest.raises(ValueError, match="GitHub"):
        notebooks.Repo.from_config("https://example.com/a/b")


def test_the_notebook_is_the_page_in_order(project):
    found = cells(notebooks.build(project, "demo/circles.md", REPO))
    kinds = [kind for kind, _ in found]
    assert kinds == ["markdown", "code", "markdown", "code", "markdown", "code"]
    title, check, intro, setup, prose, main = (text for _, text in found)
    assert title.startswith("# Circles\n") and "https://acme.github.io/guide/demo/circles/" in title
    assert "torch.cuda.is_available()" in check and "Runtime > Change runtime type" in check
    assert "raise" not in check, "a page that runs on the CPU must not stop there"
    assert "[the home page](https://acme.github.io/guide/#start)" in intro
    assert "[below](https://acme.github.io/guide/demo/circles/#the-area)" in intro
    assert setup == "import math\n\n\ndef area(r):\n    return math.pi * r * r"
    assert main == 'print("area", area(2.0))'
    assert prose.startswith("## The area\n\n> **Keep it simple**\n>\n> One formula, tested.")
    assert "```bash\npython -m snippets.demo.circles\n```" in prose
    # the paragraph, the table and the chart with numbers: one pointer to the page, no number
    assert prose.count("measured numbers") == 1 and "<!--" not in prose and "| Run |" not in prose



def test_a_whole_file_beside_its_sections_is_shown_not_run_again(project):
    """A fence of the whole file (a script to download) becomes a fence in the markdown,
    without its section markers: the notebook runs the sections once, where the page shows
    them."""
    page = project / "docs" / "demo" / "circles.md"
    page.write_text(PAGE + '\n??? example "circles.py, the whole file"\n\n    ```python\n'
                    '    --8<-- "snippets/demo/circles.py"\n    ```\n')
    found = cells(notebooks.build(project, "demo/circles.md", REPO))
    assert [kind for kind, _ in found].count("code") == 3  # the check, setup and main
    whole = found[-1][1]
    assert found[-1][0] == "markdown" and "circles.py, the whole file" in whole
    assert '>     print("area", area(2.0))' in whole and "GPUS_NEEDED = 0" in whole
    assert "--8<--" not in whole

EXERCISES = '''\
# Exercises: circles

```python
--8<-- "snippets/demo/circles.py:setup"
```

## Exercise 1: the area

What is the area of a circle of radius 2?

```python
--8<-- "snippets/demo/circles.py:setup"
```

??? success "Solution"
    Use `area`:

    ```python
    --8<-- "snippets/demo/circles.py:main"
    ```

    It took <!-- timing-value: circles.area median -->.

## Exercise 2: twice

Double it.

??? success "Solution"
    Call it twice.

## Summary

- Circles.
'''


@pytest.mark.parametrize("name", ["demo/exercises.md", "demo/demo-exercises.md"])
def test_an_exercise_page_becomes_a_workbook(project, name):
    (project / "docs" / name).write_text(EXERCISES)
    found = cells(notebooks.build(project, name, REPO))
    texts = [text for _, text in found]
    code = [text for kind, text in found if kind == "code"]
    assert [n for n, (kind, text) in enumerate(found) if kind == "code" and text == ""] == \
        [texts.index("## Exercise 1: the area\n\nWhat is the area of a circle of radius 2?") + 3,
         texts.index("## Exercise 2: twice\n\nDouble it.") + 2], "an empty cell after each task"
    assert all("Your attempt" in texts[n - 1] for n, text in enumerate(texts) if text == "")
    solutions = texts.index(notebooks.SOLUTIONS_INTRO)
    assert solutions < texts.index("## Summary\n\n- Circles."), "the rest of the page after them"
    assert texts[solutions + 1:solutions + 6] == [
        "### Exercise 1: the area — Solution", "Use `area`:", 'print("area", area(2.0))',
        "*The measured numbers for this part are on the page: [Exercises: circles]"
        f"(https://acme.github.io/guide/{name[:-3]}/).*",
        "### Exercise 2: twice — Solution"]
    assert texts[solutions + 6] == "Call it twice."
    assert code[-1] == 'print("area", area(2.0))', "the solution's code runs after every task"


def test_a_solution_on_another_page_stays_where_it_is(project):
    (project / "docs" / "demo" / "circles.md").write_text(EXERCISES.replace("# Exercises", "# Notes"))
    found = cells(notebooks.build(project, "demo/circles.md", REPO))
    assert not [text for kind, text in found if kind == "code" and text == ""]
    assert notebooks.SOLUTIONS_INTRO not in [text for _, text in found]


def test_a_gpu_page_stops_at_the_check_when_there_is_no_gpu(project):
    source = project / "snippets" / "demo" / "circles.py"
    source.write_text(source.read_text().replace("GPUS_NEEDED = 0", "GPUS_NEEDED = 1"))
    check = cells(notebooks.build(project, "demo/circles.md", REPO))[1][1]
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        exec(compile(check, "check", "exec"), {})
    else:
        with pytest.raises(RuntimeError, match="Change runtime type"):
            exec(compile(check, "check", "exec"), {})
    assert "device_count() < 2" in notebooks.gpu_check(2)


def test_pages_without_code_have_no_notebook(project):
    assert notebooks.build(project, "index.md", REPO) is None
    assert notebooks.add_links("# Home\n", "index.md", REPO) == "# Home\n"


def test_write_then_check(project):
    assert notebooks.problems(project) == ["notebooks/demo/circles.ipynb is missing: run `make notebooks` "
                                           "and commit it"]
    assert notebooks.write(project) == ["wrote notebooks/demo/circles.ipynb"]
    assert notebooks.problems(project) == [] and notebooks.write(project) == []
    text = (project / "notebooks" / "demo" / "circles.ipynb").read_text()
    assert json.loads(text)["metadata"]["accelerator"] == "GPU"
    source = project / "snippets" / "demo" / "circles.py"
    source.write_text(source.read_text().replace("math.pi * r * r", "math.pi * r**2"))
    (project / "notebooks" / "demo" / "orphan.ipynb").write_text(text)
    assert notebooks.problems(project) == [
        "notebooks/demo/circles.ipynb is stale (its page, its snippets or its recorded outputs changed): "
        "run `make notebooks`",
        "notebooks/demo/orphan.ipynb has no page with code: run `make notebooks` to remove it"]
    check = subprocess.run([sys.executable, "-m", "fieldguide.notebooks", "--check", "--root", str(project)],
                           cwd=ROOT, capture_output=True, text=True)
    assert check.returncode == 1 and "circles.ipynb is stale" in check.stderr
    assert notebooks.write(project) == ["wrote notebooks/demo/circles.ipynb",
                                        "removed notebooks/demo/orphan.ipynb"]
    assert "math.pi * r**2" in (project / "notebooks" / "demo" / "circles.ipynb").read_text()


def test_a_cell_shows_the_outputs_recorded_for_its_code_as_it_is_now(project):
    """outputs/<gpu>/<page>.json keys each cell's outputs by its code: a changed cell shows none."""
    (project / "mkdocs.yml").write_text(MKDOCS.replace(
        "  - fieldguide.rendering.render\n",
        "  - fieldguide.rendering.render:\n      timings: fake-gpu\n"))
    notebook = notebooks.build(project, "demo/circles.md", REPO)
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    printed = [{"name": "stdout", "output_type": "stream", "text": "area 3.14\nok\n"}]
    record = {"page": "demo/circles.md", "gpu": "Fake GPU", "gpu_count": 1, "driver": "1",
              "cuda_runtime": "13.0", "torch": "2.13.0", "date": "2026-11-26T00:00:00Z", "alone": True,
              "cells": [{"code_sha256": outputs.code_key("".join(c["source"])),
                         "outputs": outputs.on_disk(printed)} for c in code]}
    path = project / "outputs" / "fake-gpu" / "demo" / "circles.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    shown = notebooks.build(project, "demo/circles.md", REPO)
    assert [c["outputs"] for c in shown["cells"] if c["cell_type"] == "code"] == \
        [[{"name": "stdout", "output_type": "stream", "text": ["area 3.14\n", "ok\n"]}]] * len(code)
    assert shown["metadata"]["fieldguide"]["ran_on"] == "Fake GPU"
    source = project / "snippets" / "demo" / "circles.py"
    source.write_text(source.read_text().replace("math.pi * r * r", "math.pi * r**2"))
    changed = notebooks.build(project, "demo/circles.md", REPO)
    after = [c["outputs"] for c in changed["cells"] if c["cell_type"] == "code"]
    assert [] in after and after != [c["outputs"] for c in shown["cells"] if c["cell_type"] == "code"]


def test_the_cell_below_a_prompt_shows_no_recorded_output():
    """The learner predicts, then runs the cell below a prompt: its recorded output, shown
    before it runs, would give the answer away. Other cells keep theirs."""
    printed = [{"name": "stdout", "output_type": "stream", "text": ["42\n"]}]

    def cell(kind, source):
        return {"cell_type": kind, "source": [source],
                **({"outputs": list(printed)} if kind == "code" else {})}
    notebook = {"cells": [cell("code", "check()"), cell("markdown", "Intro."),
                          cell("code", "print(1)"),
                          cell("markdown", f"Prose.\n\n{notebooks.PREDICT} How many?\n>\n> *A.*"),
                          cell("code", "print(42)"), cell("code", "print(2)")]}
    shown = notebooks.unanswered(notebook)
    assert [c.get("outputs") for c in shown["cells"]] == \
        [printed, None, printed, None, [], printed]


def build(project):
    """The site, its page without its numbers (this project has no timing runs)."""
    pytest.importorskip("mkdocs", reason="the site build is not installed here (the docs extra)")
    page = project / "docs" / "demo" / "circles.md"
    page.write_text("".join(line for line in page.read_text().splitlines(keepends=True)
                            if "timing-" not in line))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=project,
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_site_serves_and_links_the_notebook(project):
    result = build(project)
    assert result.returncode != 0 and "circles.ipynb is missing" in result.stderr
    notebooks.write(project)
    result = build(project)
    assert result.returncode == 0, result.stderr
    served = project / "site" / "notebooks" / "demo" / "circles.ipynb"
    assert served.read_text() == (project / "notebooks" / "demo" / "circles.ipynb").read_text()
    html = (project / "site" / "demo" / "circles" / "index.html").read_text()
    assert 'href="../../notebooks/demo/circles.ipynb" download="circles.ipynb"' in html
    colab = "https://colab.research.google.com/github/acme/guide/blob/trunk/notebooks/demo/circles.ipynb"
    assert f'href="{colab}"' in html
    assert "Download notebook" not in (project / "site" / "index.html").read_text()


@pytest.mark.parametrize("fault", ["stale", "missing", "orphan"])
def test_the_strict_build_fails_on_a_notebook_out_of_step(project, fault):
    build(project)
    notebooks.write(project)
    target = project / "notebooks" / "demo" / "circles.ipynb"
    if fault == "stale":
        page = project / "docs" / "demo" / "circles.md"
        page.write_text(page.read_text().replace("Run it from a shell:", "Run it from a terminal:"))
    elif fault == "missing":
        target.unlink()
    else:
        (project / "notebooks" / "demo" / "old.ipynb").write_text(target.read_text())
    result = build(project)
    assert result.returncode != 0
    assert "notebooks/demo/" in result.stderr and "make notebooks" in result.stderr

