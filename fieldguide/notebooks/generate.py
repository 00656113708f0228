"""Every page with code as a Jupyter notebook, generated from the page itself.

`docs/<chapter>/<page>.md` becomes `notebooks/<chapter>/<page>.ipynb`: a title cell, a cell that
checks for a GPU, then the page in order. Each code fence of `--8<--` includes becomes a code
cell holding exactly the sections the page shows (read with fieldguide.content.snippets, as the site
reads them), and the headings and prose between them become markdown cells. A fence of a
whole file (a script to download, whose sections the page shows) stays a fence in the
markdown: shown, not run a second time. Nothing is copied
by hand, so a notebook cannot drift from its tested code without the checks noticing:

    python -m fieldguide.notebooks           # write: (re)generate, delete orphans (make notebooks)
    python -m fieldguide.notebooks --check   # list stale, missing or orphaned notebooks; exit 1

The notebooks are committed because Colab opens a notebook from its path on GitHub. Where the
page's notebook ran on the site's GPU (outputs/, fieldguide/notebooks/outputs.py), each code cell carries
the outputs recorded for its code as it is now; a cell whose code changed since has none. The
tests run the check, and the site's Markdown extension (fieldguide/rendering/render.py) fails the build on
a stale notebook as it does on a stale timing.

The site shows each notebook twice over: docs/notebooks is a link to notebooks/, so mkdocs-jupyter
renders each as a page of its own (with its outputs), and fieldguide/rendering/render.py gives the lesson
its links: the notebook page, the .ipynb to download, and Colab.

A "predict, then run" prompt (fieldguide/content/prompts.py) keeps its question, moved down to
right above the code that prints its answer, which carries no recorded output (the learner
runs it to check; a prompt whose answer no cell prints, prompts.NOT_PRINTED, points at the
page); where a long cell prints several answers, the
prompts name where their parts begin and the cell is cut there (`split_for_prompts`), each part
marked with the key of the whole block, whose recorded output the page keeps showing.

Measured numbers stay on the page: a paragraph, table or admonition holding a timing shortcode
becomes one line pointing at the page, never a number. Links to other pages point at the
published site. Standard library only: the scaffold and the site build run it without Jupyter.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from fieldguide import ROOT
from fieldguide.content import prompts
from fieldguide.content.pages import INCLUDE, gpus_needed_by, included_code, includes, pages, title
from fieldguide.notebooks import outputs

NOTEBOOKS = "notebooks"  # top-level folder, next to docs/
COLAB = "https://colab.research.google.com/github"


# --- Where things live ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Repo:
    """The GitHub repository the site is published from (mkdocs.yml's repo_url and edit_uri)."""

    owner: str
    name: str
    branch: str = "main"

    @classmethod
    def from_config(cls, repo_url: str | None, edit_uri: str | None = None) -> Repo:
        url = (repo_url or "").strip()
        match = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", url)
        if not match:
            raise ValueError(f"repo_url must be a GitHub repository URL, got {repo_url!r}")
        branch = re.match(r"/?(?:edit|blob|tree)/([^/]+)/", edit_uri or "")
        return cls(match[1], match[2], branch[1] if branch else "main")

    @classmethod
    def from_mkdocs_yml(cls, root: Path = ROOT) -> Repo:
        """Read repo_url and edit_uri from mkdocs.yml's text (no YAML loader, no MkDocs needed)."""
        text = (Path(root) / "mkdocs.yml").read_text(encoding="utf-8")

        def value(key):
            match = re.search(rf"^{key}:\s*['\"]?([^'\"\s#]+)", text, re.M)
            return match[1] if match else None

        return cls.from_config(value("repo_url"), value("edit_uri"))

    @property
    def site_url(self) -> str:
        """The published site: GitHub Pages of this repository (the Pages workflow's SITE_URL)."""
        return f"https://{self.owner}.github.io/{self.name}/"

    def colab(self, path: str) -> str:
        """Colab opens `path` (relative to the repository root) from GitHub."""
        return f"{COLAB}/{self.owner}/{self.name}/blob/{self.branch}/{path}"


def notebook_path(page: str) -> str:
    """'execution/events.md' (relative to docs/) -> 'notebooks/execution/events.ipynb'."""
    return posixpath.join(NOTEBOOKS, posixpath.splitext(page)[0] + ".ipynb")


def page_url(repo: Repo, page: str) -> str:
    """The published URL of a page relative to docs/ (directory URLs, MkDocs' default)."""
    stem = posixpath.splitext(page)[0]
    if stem == "index" or stem.endswith("/index"):
        stem = stem[: -len("index")]
    else:
        stem += "/"
    return repo.site_url + stem


# --- The links on a page -------------------------------------------------------------------------

def links(page: str, repo: Repo, page_url: str | None = None) -> dict[str, str]:
    """For a page relative to docs/: "download", the .ipynb as the site serves it (written there
    by fieldguide/rendering/render.py), relative to the page's URL (to its source file where no URL is
    given); "rendered", the notebook's own page (docs/notebooks links to notebooks/), relative
    to the page's source, as Markdown links are; "colab", the URL Colab opens it from."""
    target = notebook_path(page)
    if page_url is None:
        here = posixpath.dirname(page)
    else:
        here = page_url.rstrip("/") if page_url.endswith("/") else posixpath.dirname(page_url)
    return {"download": posixpath.relpath(target, here or "."),
            "rendered": posixpath.relpath(target, posixpath.dirname(page) or "."),
            "colab": repo.colab(target)}


def ran_on(root: Path, page: str) -> outputs.Recorded | None:
    """What the page's notebook printed on the site's GPU, or else on another GPU (by folder
    name), if it ran on one."""
    return outputs.load_any(page, root)


def links_markdown(page: str, repo: Repo, page_url: str | None = None, root: Path = ROOT) -> str:
    found = links(page, repo, page_url)
    name = posixpath.basename(notebook_path(page))
    recorded = ran_on(root, page)
    shown = (f"This page's notebook as it ran on {recorded.gpu}" if recorded
             else "This page's notebook (not yet run on a GPU)")
    # The download is raw HTML: the .ipynb is written into the site as the page is rendered, so
    # no engine knows it as a file to check a Markdown link against.
    # The notebook's own page, where docs/notebooks links to notebooks/ (mkdocs-jupyter renders it)
    rendered = (f'[:material-notebook-outline: {shown}]({found["rendered"]}){{ .md-button }}\n'
                if (Path(root) / "docs" / notebook_path(page)).is_file() else "")
    return (f'{rendered}<a class="md-button" href="{found["download"]}" download="{name}">'
            f':material-download: Download notebook</a>\n'
            f'[:simple-googlecolab: Open in Colab]({found["colab"]}){{ .md-button }}')


def add_links(markdown: str, page: str, repo: Repo, page_url: str | None = None, root: Path = ROOT) -> str:
    """The page with its notebook links under the H1 (pages without code are returned as they are)."""
    if not has_notebook(markdown):
        return markdown
    block = links_markdown(page, repo, page_url, root)
    match = re.search(r"^#\s+.*$", markdown, re.M)
    if not match:
        return f"{block}\n\n{markdown}"
    return f"{markdown[:match.end()]}\n\n{block}\n{markdown[match.end():]}"


def has_notebook(markdown: str) -> bool:
    """Whether a page gets a notebook: it shows code."""
    return bool(includes(markdown))


# --- Page -> notebook ----------------------------------------------------------------------------

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})")
HEADING = re.compile(r"^(?P<level>#{1,6})\s+\S")
ADMONITION = re.compile(r'^(?P<indent>\s*)(?:!!!|\?\?\?\+?)\s+(?P<kind>[\w-]+)(?:\s+"(?P<title>[^"]*)")?\s*$')
# A collapsed solution on an exercise page: `??? success "Solution"` (pymdownx.details)
SOLUTION = re.compile(r'^(?P<indent>\s*)\?\?\?\+?\s+[\w-]+\s+"(?P<title>Solution[^"]*)"\s*$')
TABBED = re.compile(r'^(?P<indent>\s*)===\+?\s+"(?P<title>[^"]*)"\s*$')
COMMENT = re.compile(r"<!--.*?-->", re.S)
TIMING = re.compile(r"<!--\s*timing-")
DIAGRAM = re.compile(r"<!--\s*timing-diagram:[^>]*-->")
LINK = re.compile(r"(?P<text>!?\[[^\]]*\])\((?P<target>[^)\s]+)\)")
HTML_BLOCK = re.compile(r"^\s*</?(div|span|p|section|figure)\b[^>]*>\s*$")


def gpu_check(need: int) -> str:
    """The first code cell: is there a GPU, and what to do when there is none."""
    if need == 0:
        return textwrap.dedent("""\
            # This notebook runs on the CPU too; with a CUDA GPU it uses the GPU.
            import torch

            if torch.cuda.is_available():
                print("CUDA GPU:", torch.cuda.get_device_name())
            else:
                print("No CUDA GPU: the code below runs on the CPU. To use a GPU in Colab:")
                print("Runtime > Change runtime type > a GPU (T4 is free), then run all cells.")
            """)
    if need == 1:
        return textwrap.dedent("""\
            # This notebook needs a CUDA GPU.
            import torch

            if not torch.cuda.is_available():
                raise RuntimeError(
                    "No CUDA GPU found. In Colab: Runtime > Change runtime type > a GPU "
                    "(T4 is free), then run all cells again. Elsewhere: a machine with an "
                    "NVIDIA GPU and a CUDA build of PyTorch."
                )
            print("CUDA GPU:", torch.cuda.get_device_name())
            """)
    return textwrap.dedent(f"""\
        # This notebook needs {need} CUDA GPUs in one machine.
        import torch

        if torch.cuda.device_count() < {need}:
            raise RuntimeError(
                f"Found {{torch.cuda.device_count()}} CUDA GPU(s); this notebook needs {need}. "
                "Run it on a machine with {need} NVIDIA GPUs and a CUDA build of PyTorch."
            )
        print("CUDA GPUs:", [torch.cuda.get_device_name(i) for i in range({need})])
        """)


def _admonitions(lines: list[str], answer: str = "") -> list[str]:
    """`!!! kind "Title"` and `=== "Tab"` blocks (Material syntax) as Jupyter can show them. A
    "predict, then run" prompt (fieldguide/content/prompts.py) keeps its question, followed by `answer`,
    the line that points at the page for its measured answer, instead of its body."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = ADMONITION.match(lines[i]) or TABBED.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent = match["indent"]
        body: list[str] = []
        i += 1
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(indent + "    ")):
            body.append(lines[i][len(indent) + 4:])
            i += 1
        while body and not body[-1].strip():
            body.pop()
        body = _admonitions(body, answer)
        heading = match["title"]
        if match.groupdict().get("kind") == prompts.KIND:
            out += [f"{indent}{PREDICT} {heading}", f"{indent}>", f"{indent}> {answer}", ""]
            continue
        if "kind" in match.groupdict():  # an admonition: a blockquote with a bold title
            heading = match["kind"].capitalize() if heading is None else heading
            quoted = ([f"**{heading}**", ""] if heading else []) + body
            out += [f"{indent}> {line}".rstrip() for line in quoted]
        else:  # a content tab: its label, then its content
            out += [f"{indent}**{heading}**", ""] + [indent + line for line in body]
        out.append("")
    return out


def _blocks(lines: list[str]) -> list[list[str]]:
    """Blank-line separated blocks; a fenced code block (with its blank lines) stays in one."""
    blocks: list[list[str]] = [[]]
    fence = None
    for line in lines:
        match = FENCE.match(line)
        if fence is None and match:
            fence = match["fence"]
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        if fence is None and not line.strip():
            blocks.append([])
        else:
            blocks[-1].append(line)
    return [b for b in blocks if b]


class _Converter:
    def __init__(self, root: Path, page: str, repo: Repo, page_title: str):
        self.root, self.page, self.repo = Path(root), page, repo
        self.url = page_url(repo, page)
        self.note = f"*The measured numbers for this part are on the page: [{page_title}]({self.url}).*"
        # A diagram stays on the page too: Jupyter and Colab draw Mermaid unevenly, and the
        # notebook's page on the site (mkdocs-jupyter) would fetch Mermaid from a CDN to draw it.
        self.diagram = f"*A diagram for this part is on the page: [{page_title}]({self.url}).*"
        # A prompt's answer is the page's measured number: asked here, answered there
        # (`checked` where the cell below prints it too).
        self.answer = f"*{ON_THE_PAGE} [{page_title}]({self.url}).*"

    def link(self, match: re.Match) -> str:
        target = match["target"]
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("/"):
            return match[0]  # absolute already
        path, _, anchor = target.partition("#")
        anchor = f"#{anchor}" if anchor else ""
        if not path:
            return f"{match['text']}({self.url}{anchor})"
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(self.page), path))
        if resolved.endswith(".md"):
            return f"{match['text']}({page_url(self.repo, resolved)}{anchor})"
        return f"{match['text']}({self.repo.site_url}{resolved}{anchor})"

    def markdown(self, lines: list[str]) -> str:
        """Prose for a markdown cell: numbers point at the page, comments go, links go absolute."""
        out: list[str] = []
        for block in _blocks(_admonitions(lines, self.answer)):
            text = "\n".join(line for line in block if not HTML_BLOCK.match(line))
            if DIAGRAM.fullmatch(text.strip()):   # a schematic, no number: a figure, as for Mermaid
                out.append(self.diagram)
                continue
            if TIMING.search(text):
                if not out or out[-1] != self.note:
                    out.append(self.note)
                continue
            if re.match(r"\s*(`{3,}|~{3,})\s*mermaid\b", block[0]):
                out.append(self.diagram)
                continue
            if FENCE.match(block[0]):
                out.append(text)
                continue
            text = COMMENT.sub("", text).strip()
            if text:
                out.append(LINK.sub(self.link, text))
        return "\n\n".join(out)


PREDICT = "> **Predict:**"
# A prompt's line pointing at its answer: on the page, or also printed by the cell below it
ON_THE_PAGE = "The answer is on the page:"
CHECK = "Run the next cell to check; the page has the measured answer on its GPU:"


def checked(paragraph: str) -> str:
    """A prompt's paragraph whose answer the cell right below it prints: run it to check."""
    return paragraph.replace(f"> *{ON_THE_PAGE} ", f"> *{CHECK} ", 1)
# What a cell can call to show a result (besides a last bare expression, which Jupyter displays).
SHOWS = {"print", "display", "pprint"}


def _calls(nodes) -> set[str]:
    """The names that `nodes` call (`f(...)`, `obj.f(...)`), function and class bodies left out."""
    import ast
    called: set[str] = set()
    todo = list(nodes)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                called.add(func.id)
            elif isinstance(func, ast.Attribute):
                called.add(func.attr)
        todo.extend(ast.iter_child_nodes(node))
    return called


def printers(sources: list[str]) -> set[str]:
    """The functions the code cells `sources` define that print when called: those that call
    print, or another function of the notebook that prints (a fixed point over their calls)."""
    import ast
    calls: dict[str, set[str]] = {}
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                calls.setdefault(node.name, set()).update(_calls(node.body))
    found = {name for name, called in calls.items() if called & SHOWS}
    while True:
        more = {name for name, called in calls.items() if called & found} - found
        if not more:
            return found
        found |= more


def shows_a_result(source: str, printing: set[str]) -> bool:
    """Whether running a code cell shows something: its own code (not the bodies of the functions
    it defines) calls print or a function of the notebook that prints, or it ends with a bare
    expression that is not a call, which Jupyter displays. A cell that only defines functions,
    classes and constants shows nothing: a prompt above it asks the reader to predict, then run
    nothing."""
    import ast
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    if _calls(tree.body) & (SHOWS | printing):
        return True
    last = tree.body[-1] if tree.body else None
    return isinstance(last, ast.Expr) and not isinstance(last.value, (ast.Call, ast.Constant))


def _is_prompt(paragraph: str) -> bool:
    return paragraph.startswith(PREDICT)


def _question(paragraph: str) -> str:
    """The question of a prompt's paragraph in a markdown cell."""
    return paragraph.split("\n", 1)[0].removeprefix(PREDICT).strip()


class PartError(ValueError):
    """A prompt names a notebook part (`<!-- notebook-part: LINE -->`) the notebook cannot cut."""


# Cell metadata of a part of a page's code block that the notebook cut for its prompts:
# {"fieldguide": {"part_of": <sha256 of the whole block's code>}} (outputs.PART_OF)
# and, on every part but the first, {BLANK_LINES: the blank lines between it and the part before}
PART_OF, BLANK_LINES = outputs.PART_OF, outputs.BLANK_LINES


def _part_start(source: str, line: int) -> int:
    """The line (0-based) where the part of `source` holding `line` begins: the top-level
    statement that holds it, or follows it (a comment line), with the comment lines right above
    that statement, which belong to it."""
    import ast
    lines = source.split("\n")
    for node in ast.parse(source).body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
        if node.end_lineno - 1 >= line:
            while first > 0 and lines[first - 1].startswith("#"):
                first -= 1
            return first
    return len(lines)


def _parts(source: str, starts: set[int]) -> list[tuple[str, int]]:
    """`source` cut at the lines `starts` (each a top-level statement's first line, or its
    comment's): each part and the blank lines between it and the part before, so that
    outputs.joined gives `source` again; each part is valid Python."""
    import ast
    lines = source.split("\n")
    bounds = sorted(starts - {0})
    blanks = []
    for start in bounds:
        blank = 0
        while start - blank - 1 >= 0 and lines[start - blank - 1] == "":
            blank += 1
        blanks.append(blank)
    ends = [start - blank for start, blank in zip(bounds, blanks, strict=True)] + [len(lines)]
    parts = list(zip(["\n".join(lines[a:b]) for a, b in zip([0, *bounds], ends, strict=True)],
                     [0, *blanks], strict=True))
    assert outputs.joined(parts) == source
    for part, _ in parts:
        ast.parse(part)
    return parts


def split_for_prompts(cells: list[tuple], parts: dict[str, str],
                      page: str = "") -> tuple[list[tuple], dict[str, int]]:
    """The cells with each code cell cut where a prompt's notebook part begins, and, for each
    such prompt's question, the index of the (new) cell its part begins. `parts` maps a
    question to the start of a line (`prompts.Prompt.part`) of the one line, among the code
    cells after the prompt, where its part begins or that lies in it. A part begins at the
    top-level statement holding that line, so each part is valid Python and the parts,
    joined with the blank lines between them (outputs.joined), are the cell: the page's code
    block, whose recorded output stays keyed by its code. PartError (a ValueError), naming the
    page and the prompt, for a line that is not there or that starts more than one line."""
    where = f"docs/{page}" if page else "the page"
    asked: dict[str, int] = {}
    for index, cell in enumerate(cells):
        if cell[0] == "markdown" and index > 1:
            for paragraph in cell[1].split("\n\n"):
                if _is_prompt(paragraph):
                    asked.setdefault(_question(paragraph), index)
    cuts: dict[int, set[int]] = {}
    begins: dict[str, tuple[int, int]] = {}
    for question, wanted in parts.items():
        if question not in asked:
            raise PartError(f"{where}: the prompt {question!r} names a notebook part, and the "
                            "notebook does not ask it")
        text = wanted.strip()
        found = [(index, n) for index, cell in enumerate(cells) if index > asked[question]
                 and cell[0] == "code" for n, line in enumerate(cell[1].split("\n"))
                 if text and line.strip().startswith(text)]
        if len(found) != 1:
            how = "no line of the code after it starts" if not found else \
                f"{len(found)} lines of the code after it start"
            raise PartError(f"{where}: the prompt {question!r} names the notebook part "
                            f"{wanted!r}, and {how} so: name the start of one line "
                            "(`<!-- notebook-part: LINE -->`)")
        index, line = found[0]
        start = _part_start(cells[index][1], line)
        cuts.setdefault(index, set()).add(start)
        begins[question] = (index, start)
    out: list[tuple] = []
    new_index: dict[tuple[int, int], int] = {}
    for index, cell in enumerate(cells):
        if index not in cuts or cuts[index] == {0}:
            new_index[(index, 0)] = len(out)
            out.append(cell)
            continue
        source = cell[1]
        starts = sorted(cuts[index] | {0})
        whole = outputs.code_key(source)
        for start, (piece, blank) in zip(starts, _parts(source, set(starts)), strict=True):
            new_index[(index, start)] = len(out)
            out.append(("code", piece, {PART_OF: whole, **({BLANK_LINES: blank} if start else {})}))
    return out, {question: new_index[begin] for question, begin in begins.items()}


def _predict_first(cells: list[tuple], parts: dict[str, str] | None = None,
                   page: str = "") -> list[tuple]:
    """Predict, then run: each prompt moves down to right above the code that prints its answer.
    On a page a prompt sits above the code block that produces its number
    (tests/site/test_prompts.py); in the notebook that block is often a definition, and the
    number is printed by a later cell, often the page's whole script. A prompt that names its
    part of that code (`parts`, question -> line: `<!-- notebook-part: LINE -->` in its body,
    fieldguide/content/prompts.py) goes right above that part, which `split_for_prompts` cuts
    out of its cell; any other prompt goes right above the first code cell after it that runs
    and shows a result (`shows_a_result`), not above one that only defines a function; the
    cell right below a prompt carries no recorded output (`unanswered`), which would give its
    answer away. The GPU check, the
    second cell, keeps its place. A prompt that no such cell follows stays where the page puts
    it. A cut part is ("code", source, {PART_OF: sha256 of its whole block}); other cells keep
    their (kind, source)."""
    cells, targets = split_for_prompts(cells, parts or {}, page)
    printing = printers([cell[1] for cell in cells if cell[0] == "code"])
    out: list[tuple] = []
    waiting: list[tuple[str, int | None]] = []   # (prompt, the index of its part's cell)
    for index, cell in enumerate(cells):
        kind, source = cell[0], cell[1]
        if kind == "markdown" and index > 1:
            paragraphs = source.split("\n\n")
            asked = [p for p in paragraphs if _is_prompt(p)]
            rest = [p for p in paragraphs if not _is_prompt(p)]
            later = any(c[0] == "code" and shows_a_result(c[1], printing) for c in cells[index + 1:])
            if asked and (later or any(_question(p) in targets for p in asked)):
                placed = [p for p in asked if _question(p) in targets or later]
                waiting += [(p, targets.get(_question(p))) for p in placed]
                rest = [p for p in paragraphs if p not in placed]
                if rest:
                    out.append((kind, "\n\n".join(rest)))
                continue
        if kind == "code" and waiting:
            shows = shows_a_result(source, printing)
            here = [p for p, target in waiting if target == index or (target is None and shows)]
            if here:
                out.append(("markdown", "\n\n".join(
                    checked(p) if shows and not prompts.not_printed(page, _question(p)) else p
                    for p in here)))
                waiting = [(p, target) for p, target in waiting if p not in here]
        out.append(cell)
    return out


def _cell(kind: str, source: str, index: int, metadata: dict | None = None) -> dict:
    cell = {"cell_type": kind, "id": f"cell-{index:03d}",
            "metadata": {"fieldguide": metadata} if metadata else {},
            "source": source.strip("\n").splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def is_workbook(page: str) -> bool:
    """Whether a page (relative to docs/) is an exercise page, whose notebook is a workbook: its
    name is `exercises.md` or ends in `-exercises.md`. One rule, by name, as the test files'."""
    stem = posixpath.splitext(posixpath.basename(page))[0]
    return stem == "exercises" or stem.endswith("-exercises")


ATTEMPT = ("**Your attempt.** Write it in the empty cell below; the solution is in the last part "
           "of this notebook, \"Solutions\", after all the exercises.")
SOLUTIONS_INTRO = ("## Solutions\n\nEach solution as the page shows it, collapsed, under its "
                   "exercise. Their code runs after all the exercises' code, so run the notebook "
                   "from the top.")


def _block_end(lines: list[str], start: int, indent: str) -> int:
    """The line after an admonition that starts at `start`: its body is indented past `indent`."""
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith(indent + "    ")):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return end


def _solutions_at(lines: list[str]) -> int | None:
    """Where a workbook's solutions go: before the first `## ` heading after the last solution
    (the page's whole script, summary and references stay after them); None without solutions."""
    last = None
    fence = None
    for i, line in enumerate(lines):
        match = FENCE.match(line)
        if fence is None and match:
            fence = match["fence"]
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None and (solution := SOLUTION.match(line)):
            last = _block_end(lines, i, solution["indent"])
    if last is None:
        return None
    for i in range(last, len(lines)):
        if lines[i].startswith("## "):
            return i
    return len(lines)


def _page_cells(root: Path, lines: list[str], convert: _Converter,
                workbook: bool = False) -> list[tuple[str, str]]:
    """The cells of a page's lines (its H1 left out): code fences of includes as code cells,
    the prose between them as markdown cells. In a workbook each collapsed solution becomes an
    empty cell to attempt the exercise in, and the solutions come together after the last one."""
    cells: list[tuple[str, str]] = []
    prose: list[str] = []
    solutions: list[tuple[str, str]] = []
    solutions_at = _solutions_at(lines) if workbook else None
    exercise = ""

    def flush():
        text = convert.markdown(prose)
        if text:
            cells.append(("markdown", text))
        prose.clear()

    i = 0
    while i < len(lines):
        if i == solutions_at:
            flush()
            cells.append(("markdown", SOLUTIONS_INTRO))
            cells.extend(solutions)
            solutions.clear()
        line = lines[i]
        fence = FENCE.match(line)
        solution = SOLUTION.match(line) if solutions_at is not None else None
        if solution:
            flush()
            end = _block_end(lines, i, solution["indent"])
            body = [b[len(solution["indent"]) + 4:] for b in lines[i + 1:end]]
            cells += [("markdown", ATTEMPT), ("code", "")]
            solutions.append(("markdown", f"### {exercise} — {solution['title']}"))
            solutions.extend(_page_cells(root, body, convert))
            i = end
            continue
        if fence:
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence["fence"]):
                end += 1
            body = lines[i + 1:end]
            found = [m for m in map(INCLUDE.match, body) if m]
            if found and all(m["section"] is None for m in found):
                # a whole file (a script to download, whose sections the page shows and
                # the notebook runs): shown, not run a second time
                indent = fence["indent"]
                prose.append(line)
                for m in found:
                    prose.extend(f"{indent}{code}" if code else "" for code in
                                 included_code(root, m["path"], None).split("\n"))
                prose.append(lines[end] if end < len(lines) else line)
            elif found:
                flush()
                cells.append(("code", "\n\n".join(
                    included_code(root, m["path"], m["section"])
                    for m in (INCLUDE.match(b) for b in body) if m)))
            else:
                prose.extend(lines[i:end + 1])
            i = end + 1
            continue
        heading = HEADING.match(line)
        if heading:
            flush()
            if heading["level"] == "##":
                exercise = line[3:].strip()
        prose.append(line)
        i += 1
    flush()
    if solutions:  # the page ends with its last solution
        cells.append(("markdown", SOLUTIONS_INTRO))
        cells.extend(solutions)
    return cells


def build(root: Path, page: str, repo: Repo) -> dict | None:
    """The notebook for docs/<page> (relative to docs/), or None for a page without code.

    An exercise page (`is_workbook`) becomes a workbook: an empty code cell after each
    exercise's task, and the solutions, collapsed on the page, after all the exercises."""
    markdown = (Path(root) / "docs" / page).read_text(encoding="utf-8")
    if not includes(markdown):
        return None
    page_title = title(markdown, fallback=posixpath.basename(page))
    convert = _Converter(root, page, repo, page_title)
    files = ", ".join(f"`{p}`" for p in dict.fromkeys(p for p, _ in includes(markdown)))
    order = ("in page order" if not is_workbook(page) else
             "in page order, except that each exercise has an empty cell to attempt it in and "
             "the solutions come after all the exercises")
    cells: list[tuple[str, str]] = [
        ("markdown", f"# {page_title}\n\n"
                     f"The page [{page_title}]({convert.url}) of the GPU Field Guide as a notebook: its "
                     f"headings, prose and code {order}. The code cells are the sections of "
                     f"{files} that the page shows and the site's tests run. Measured numbers are "
                     f"on the page."),
        ("code", gpu_check(gpus_needed_by(root, markdown))),
    ]
    lines = markdown.splitlines()
    h1 = next((n for n, line in enumerate(lines)
               if (m := HEADING.match(line)) and m["level"] == "#"), None)
    if h1 is not None:  # the title cell stands for it
        lines = lines[:h1] + lines[h1 + 1:]
    cells += _page_cells(root, lines, convert, workbook=is_workbook(page))
    try:
        parts = {p.question: p.part for p in prompts.prompts(markdown) if p.part is not None}
    except ValueError as exc:
        raise PartError(f"docs/{page}: {exc}") from None
    notebook = {
        "cells": [_cell(cell[0], _once(cell[1], convert.note) if cell[0] == "markdown" else cell[1],
                        n, cell[2] if len(cell) > 2 else None)
                  for n, cell in enumerate(_predict_first(cells, parts, page))],
        "metadata": {
            "accelerator": "GPU",            # Colab opens it on a GPU runtime
            "colab": {"gpuType": "T4", "provenance": []},
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return unanswered(outputs.executed(notebook, ran_on(root, page))[0])


def unanswered(notebook: dict) -> dict:
    """`notebook` with no recorded output in a code cell right below a prompt: the learner
    predicts, then runs that cell, and its recorded output would show the answer first."""
    cells = notebook["cells"]
    for above, cell in zip(cells, cells[1:], strict=False):
        if (above["cell_type"] == "markdown" and cell["cell_type"] == "code"
                and any(_is_prompt(p) for p in "".join(above["source"]).split("\n\n"))):
            cell["outputs"] = []
    return notebook


def _once(source: str, note: str) -> str:
    """A markdown cell's text with `note` (the pointer to the page's measured numbers) said once,
    where it last stood: two parts of one cell, or prose joined when a prompt moved out of it,
    each had it."""
    paragraphs = source.split("\n\n")
    if paragraphs.count(note) < 2:
        return source
    last = len(paragraphs) - 1 - paragraphs[::-1].index(note)
    return "\n\n".join(p for n, p in enumerate(paragraphs) if p != note or n == last)


def dumps(notebook: dict) -> str:
    """The text nbformat itself writes (indent 1, sorted keys), so a save in Jupyter diffs cleanly."""
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


# --- Write and check -----------------------------------------------------------------------------

def expected(root: Path = ROOT, repo: Repo | None = None) -> dict[str, str]:
    """{notebook path relative to root: its text} for every page with code."""
    root = Path(root)
    repo = repo or Repo.from_mkdocs_yml(root)
    found = {}
    for path in pages(root / "docs"):
        page = path.relative_to(root / "docs").as_posix()
        notebook = build(root, page, repo)
        if notebook is not None:
            found[notebook_path(page)] = dumps(notebook)
    return found


def committed(root: Path = ROOT) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in (Path(root) / NOTEBOOKS).rglob("*.ipynb"))


def problems(root: Path = ROOT, repo: Repo | None = None) -> list[str]:
    """One line per notebook that is stale, missing or has no page; empty when all are current."""
    return [problem for _, problem in problems_by_page(root, repo)]


def problems_by_page(root: Path = ROOT, repo: Repo | None = None) -> list[tuple[str, str]]:
    """(page relative to docs/, problem) per notebook that is stale or missing, and ("", problem)
    per notebook without a page."""
    root = Path(root)
    want = expected(root, repo)
    found = []
    for path, text in want.items():
        file = root / path
        page = posixpath.relpath(posixpath.splitext(path)[0] + ".md", NOTEBOOKS)
        if not file.is_file():
            found.append((page, f"{path} is missing: run `make notebooks` and commit it"))
        elif file.read_text(encoding="utf-8") != text:
            found.append((page, f"{path} is stale (its page, its snippets or its recorded outputs "
                                "changed): run `make notebooks`"))
    for path in committed(root):
        if path not in want:
            found.append(("", f"{path} has no page with code: run `make notebooks` to remove it"))
    return found


def write(root: Path = ROOT, repo: Repo | None = None) -> list[str]:
    """Write every notebook that changed, remove orphans; return what changed."""
    root = Path(root)
    want = expected(root, repo)
    changed = []
    for path, text in want.items():
        file = root / path
        if not file.is_file() or file.read_text(encoding="utf-8") != text:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text, encoding="utf-8")
            changed.append(f"wrote {path}")
    for path in committed(root):
        if path not in want:
            (root / path).unlink()
            changed.append(f"removed {path}")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fieldguide.notebooks",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="report stale, missing or orphaned notebooks and exit 1; write nothing")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.check:
        found = problems(args.root)
        for line in found:
            print(line, file=sys.stderr)
        return 1 if found else 0
    for line in write(args.root) or ["notebooks are up to date"]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
