"""`make new-page CHAPTER=... TOPIC=...`: a new page with its snippet, test, benchmark and nav entry.

    python3 -m fieldguide.authoring.scaffold [--draft] CHAPTER TOPIC

CHAPTER and TOPIC are lowercase words joined by `_` or `-` (`data_movement`, `caching-allocator`).
One naming rule runs from page to JSON key, so the topic must be new across all chapters:

    snippets/<chapter>/<topic>.py          GPUS_NEEDED, one section, a __main__ block that prints
    snippets/<chapter>/__init__.py         for a new chapter
    tests/pages/test_<topic>.py            the snippet marker and a claim of the page
    benchmarks/bench_<topic>.py            a benchmark (and its label) that `make timings` runs
    docs/<chapter-kebab>/<topic-kebab>.md  the page: what you will learn, the section, a summary
    mkdocs.yml nav                         under the chapter's section, or a new section
    docs/cheat-sheet.md                    a placeholder rule linking the page's summary
    notebooks/<chapter-kebab>/<topic-kebab>.ipynb   generated from the page (make notebooks)

Nothing is written unless everything can be: an invalid name or any existing file is refused
with one line on stderr and exit status 2. A chapter listed in `draft_docs` gets no nav entry
and no rule (its pages join the nav when the chapter leaves that list). `--draft` (`make new-page
... DRAFT=1`) lists the page itself under `draft_docs`, for a page that will quote numbers no GPU
has measured yet: like a draft chapter's, it gets no nav entry (MkDocs would keep it in the
published nav, a link to a page it leaves out) and no rule; `make serve` shows it at its
address. Standard library only.
"""

from __future__ import annotations

import keyword
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from fieldguide import ROOT
from fieldguide.content.pages import draft_folders
from fieldguide.notebooks import generate as notebooks

NAME = re.compile(r"[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*")


class Refused(ValueError):
    """The scaffold would break a convention or overwrite a file; the message says which."""


@dataclass(frozen=True)
class Names:
    chapter: str   # snake_case: the snippet package
    topic: str     # snake_case: the module, test, benchmark and JSON key

    @classmethod
    def parse(cls, chapter: str, topic: str) -> Names:
        found = []
        for what, value in (("CHAPTER", chapter), ("TOPIC", topic)):
            if not value:
                raise Refused("usage: make new-page CHAPTER=<chapter> TOPIC=<topic> "
                              "(lowercase words joined by _ or -)")
            if not NAME.fullmatch(value):
                raise Refused(f"{what}={value!r} is not lowercase words joined by _ or - "
                              "(e.g. data_movement, caching-allocator)")
            snake = value.replace("-", "_")
            if keyword.iskeyword(snake):
                raise Refused(f"{what}={value!r} is a Python keyword, which no module can be named")
            found.append(snake)
        return cls(*found)

    @property
    def chapter_kebab(self) -> str:
        return self.chapter.replace("_", "-")

    @property
    def topic_kebab(self) -> str:
        return self.topic.replace("_", "-")

    @property
    def title(self) -> str:
        return self.topic.replace("_", " ").capitalize()

    @property
    def chapter_title(self) -> str:
        return self.chapter.replace("_", " ").capitalize()

    @property
    def snippet(self) -> str:
        return f"snippets/{self.chapter}/{self.topic}.py"

    @property
    def page(self) -> str:
        """Relative to docs/."""
        return f"{self.chapter_kebab}/{self.topic_kebab}.md"

    @property
    def test(self) -> str:
        return f"tests/pages/test_{self.topic}.py"

    @property
    def bench(self) -> str:
        return f"benchmarks/bench_{self.topic}.py"


# --- The templates: every convention of docs/contributing.md, already in place -------------------

SNIPPET = '''\
"""{title}: replace with one line on what the page teaches.

Run it: python -m snippets.{chapter}.{topic}
"""

GPUS_NEEDED = 0  # 0: runs anywhere, uses CUDA when present; 1: needs CUDA; 2: needs two GPUs

# --8<-- [start:example]
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def scaled_sum(n, scale=2.0):
    """Replace with the code the page teaches: here, a sum computed on `device`."""
    x = torch.arange(n, device=device, dtype=torch.float32)
    return (scale * x).sum().item()
# --8<-- [end:example]


if __name__ == "__main__":
    print(f"scaled_sum(1000) on {{device}}: {{scaled_sum(1000)}}")
'''

INIT = '''\
"""Chapter: {chapter_title}."""
'''

TEST = '''\
"""Claims of docs/{page}."""

import pytest

pytestmark = pytest.mark.snippet("{snippet}")


def test_scaled_sum_is_exact_for_small_integers(snippet):
    # float32 holds every integer below 2**24, so this sum has no rounding error
    assert snippet.scaled_sum(1000) == 2 * sum(range(1000))
    assert snippet.scaled_sum(1000, scale=0.5) == sum(range(1000)) / 2
'''

BENCH = '''\
"""Benchmarks behind docs/{page}: `make timings` runs them on a GPU.

Budget on an H100: replace with how long these take (well under a second now).
"""

import pytest

pytestmark = [pytest.mark.snippet("{snippet}"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {{
    "scaled_sum": "Scaled sum of {{n}} numbers",
}}
WORDS = {{}}


@pytest.mark.parametrize("n", [2**10, 2**20, 2**24])
def bench_scaled_sum(gpu_benchmark, snippet, n):
    """scaled_sum(n): launch-bound for small n, memory-bound for large n."""
    gpu_benchmark.extra_info["n"] = n
    gpu_benchmark(snippet.scaled_sum, n, rounds=20, warmup_rounds=2)
'''

PAGE = '''\
# {title}

!!! abstract "What you will learn"
    - Replace with what a reader will be able to do after this page.
    - Replace with the second thing; keep the box to between two and four points.

    **Prerequisites:** replace with links to the pages to read first.

Replace with the page's opening: the question it answers and why it matters on a GPU. The code
on this page runs on a CPU too and uses a CUDA GPU when there is one
(`python -m snippets.{chapter}.{topic}`).

```python
--8<-- "{snippet}:example"
```

Replace with what the code shows. Each claim the page makes has a test in
`{test}`, and each number comes from a timing shortcode once `make timings` has
measured `{bench}` ([How pages are made](../contributing.md)).

## Summary

- Replace with what to take from this page.

## References

- Replace with the primary sources the page relies on, each with what it supports, e.g.
  [CUDA semantics](https://docs.pytorch.org/docs/stable/notes/cuda.html), PyTorch documentation.
- Replace with the next one, e.g. the
  [CUDA Programming Guide](https://docs.nvidia.com/cuda/cuda-programming-guide/index.html).
'''


def _render(template: str, names: Names) -> str:
    return template.format(title=names.title, chapter=names.chapter, topic=names.topic,
                           chapter_title=names.chapter_title, page=names.page,
                           snippet=names.snippet, test=names.test, bench=names.bench)


# --- The nav ----------------------------------------------------------------------------------------

SECTION = re.compile(r"^(?P<indent>\s+)- (?P<title>[^:#]+):\s*$")
CHILD = re.compile(r"^(?P<indent>\s+)- (?:[^:#]+:\s*)?[\"']?(?P<path>[\w./-]+\.md)[\"']?\s*(?:#.*)?$")


def is_draft(config: str, chapter_kebab: str) -> bool:
    return any(folder.rstrip("/") == chapter_kebab for folder in draft_folders(config=config))


def add_to_nav(config: str, names: Names) -> str:
    """mkdocs.yml with the page under its chapter's nav section (a new one after the last chapter)."""
    lines = config.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if re.match(r"^nav:\s*$", line)), None)
    if start is None:
        raise Refused("mkdocs.yml has no nav: section")
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip() and not lines[i][0].isspace()), len(lines))
    sections: list[dict] = []
    for i in range(start + 1, end):
        section, child = SECTION.match(lines[i]), CHILD.match(lines[i])
        if section:
            sections.append({"indent": section["indent"], "last": i, "children": []})
        elif child and sections and len(child["indent"]) > len(sections[-1]["indent"]):
            sections[-1]["children"].append(child["path"])
            sections[-1]["last"] = i
            sections[-1]["child_indent"] = child["indent"]
    entry = f"- {names.page}\n"
    for section in sections:
        if any(path.startswith(f"{names.chapter_kebab}/") for path in section["children"]):
            lines.insert(section["last"] + 1, section["child_indent"] + entry)
            return "".join(lines)
    chapters = [s for s in sections if s["children"] and all("/" in p for p in s["children"])]
    if not chapters:
        raise Refused("mkdocs.yml's nav has no chapter section to put a new chapter after")
    after = chapters[-1]
    lines[after["last"] + 1:after["last"] + 1] = [
        f"{after['indent']}- {names.chapter_title}:\n", after["child_indent"] + entry]
    return "".join(lines)


def add_to_drafts(config: str, names: Names) -> str:
    """mkdocs.yml with the page listed under `draft_docs` (a block of paths under docs/)."""
    entry = f"  {names.page}\n"
    block = re.search(r"^draft_docs:[ \t]*\|[ \t]*\n((?:[ \t]+\S.*(?:\n|$))*)", config, re.M)
    if block:
        body = block[1] if block[1].endswith("\n") or not block[1] else block[1] + "\n"
        return config[:block.start(1)] + body + entry + config[block.end(1):]
    validation = re.search(r"^validation:", config, re.M)
    where = validation.start() if validation else len(config)
    text = f"draft_docs: |\n{entry}\n"
    if where == len(config) and not config.endswith("\n"):
        text = "\n" + text
    return config[:where] + text + config[where:]


def add_to_cheat_sheet(text: str, names: Names) -> str:
    """docs/cheat-sheet.md with a placeholder rule linking the page, in its chapter's section."""
    rule = ["- Replace with the one-line rule this page teaches.\n",
            f"  [{names.title}]({names.page}#summary)\n"]
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    headings = [i for i, line in enumerate(lines) if line.startswith("## ")] + [len(lines)]
    for start, end in zip(headings, headings[1:], strict=False):
        if any(f"]({names.chapter_kebab}/" in line for line in lines[start:end]):
            last = max(i for i in range(start, end) if lines[i].strip())
            lines[last + 1:last + 1] = rule
            return "".join(lines)
    return "".join(lines).rstrip("\n") + f"\n\n## {names.chapter_title}\n\n" + "".join(rule)


# --- Create ----------------------------------------------------------------------------------------

def plan(root: Path, names: Names) -> dict[str, str]:
    """{path relative to root: text} of every new file; refuses when any of them exists."""
    root = Path(root)
    files = {
        names.snippet: _render(SNIPPET, names),
        names.test: _render(TEST, names),
        names.bench: _render(BENCH, names),
        f"docs/{names.page}": _render(PAGE, names),
    }
    package = f"snippets/{names.chapter}/__init__.py"
    if not (root / package).is_file():
        files[package] = _render(INIT, names)
    existing = [path for path in files if (root / path).exists()]
    existing += [p.relative_to(root).as_posix() for p in sorted(root.glob(f"snippets/*/{names.topic}.py"))
                 if p.relative_to(root).as_posix() != names.snippet]
    if existing:
        raise Refused(f"{existing[0]} exists already: pick another TOPIC (topics are unique across "
                      "chapters: they name the test, the benchmark and the timings)")
    docs_dir = root / "docs" / names.chapter_kebab
    if docs_dir.is_dir() and not any(docs_dir.rglob("*.md")):
        raise Refused(f"docs/{names.chapter_kebab}/ holds no pages, so it is not a chapter: "
                      "pick another CHAPTER")
    return files


def create(root: Path, names: Names, draft_page: bool = False) -> list[str]:
    """Write the files and the nav entry; return one line per change. `draft_page`: list the
    page under draft_docs, with no cheat-sheet rule."""
    root = Path(root)
    files = plan(root, names)
    config_file = root / "mkdocs.yml"
    config = config_file.read_text(encoding="utf-8")
    draft = is_draft(config, names.chapter_kebab)
    new_config = config if draft or draft_page else add_to_nav(config, names)
    if draft_page and not draft:
        new_config = add_to_drafts(new_config, names)
    done = []
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
        done.append(f"created {path}")
    cheat_sheet = root / "docs" / "cheat-sheet.md"
    if draft:
        done.append(f"no nav entry: {names.chapter_kebab}/ is in draft_docs until it is measured")
    elif draft_page:
        config_file.write_text(new_config, encoding="utf-8")
        done.append(f"listed {names.page} under draft_docs in mkdocs.yml: `make serve` shows it at "
                    f"/{names.page.removesuffix('.md')}/ (not in the nav); the published build leaves "
                    "it out. Once it is measured: take it off draft_docs, add it to the nav and give "
                    "it a rule in docs/cheat-sheet.md")
    else:
        config_file.write_text(new_config, encoding="utf-8")
        done.append(f"added {names.page} to the nav in mkdocs.yml")
        if cheat_sheet.is_file():
            cheat_sheet.write_text(add_to_cheat_sheet(cheat_sheet.read_text(encoding="utf-8"), names),
                                   encoding="utf-8")
            done.append("added a placeholder rule for it to docs/cheat-sheet.md")
    repo = notebooks.Repo.from_mkdocs_yml(root)
    notebook = notebooks.notebook_path(names.page)
    (root / notebook).parent.mkdir(parents=True, exist_ok=True)
    (root / notebook).write_text(notebooks.dumps(notebooks.build(root, names.page, repo)), encoding="utf-8")
    done.append(f"created {notebook}")
    return done


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = ROOT
    if len(args) >= 2 and args[0] == "--root":
        root, args = Path(args[1]), args[2:]
    draft_page = "--draft" in args
    args = [a for a in args if a != "--draft"]
    try:
        if len(args) != 2:
            raise Refused("usage: make new-page CHAPTER=<chapter> TOPIC=<topic> [DRAFT=1]")
        names = Names.parse(*args)
        done = create(root, names, draft_page)
    except Refused as refused:
        print(f"new-page: {refused}", file=sys.stderr)
        return 2
    print("\n".join(done))
    print(textwrap.dedent(f"""
        Next (docs/contributing.md, "Adding a page"): run it with
        .venv/bin/python -m snippets.{names.chapter}.{names.topic} (`make venv` sets .venv up),
        replace every "Replace with ..." (the build refuses them), `make notebooks`, git add the
        files above (the Colab link needs the notebook tracked), then
        make check PAGE=docs/{names.page} (about 90 s) and make test.
        Without a GPU, a page quoting numbers not measured yet stays under draft_docs (DRAFT=1);
        on a CUDA machine: make test-gpu and make timings STALE=1."""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
