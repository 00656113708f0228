"""What each code block printed when its page's notebook ran on a GPU, keyed by the block's code.

The notebook test (tests/site/test_notebooks.py) runs every page's notebook; on a GPU, under
`make outputs` (fieldguide/notebooks/record_outputs.py), it saves each code cell's outputs to

    outputs/<gpu>/<chapter>/<page>.json      (commit them)

one record per code cell: the sha256 of the cell's code and the outputs nbformat recorded, with
the GPU, its software, the date and the conditions it ran in. A block's output is looked up by the
hash of the block's current code, so a block whose code changed shows no output until it runs
again: an old output can never stand under new code. Standard library only (the site build reads
these files).

A printed time or rate is a measurement like any other, so it is recorded the way a timing run
measures: one notebook at a time, with the GPU to itself, in a plain pytest. `save`
refuses under pytest-xdist (workers share the GPU and the cores) and when another process holds
the GPU, before the notebook ran or after (`gpu_alone`); `make outputs` records that way. A record
without `alone` (one made beside other work) is never shown.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fieldguide import ROOT

OUTPUTS = "outputs"  # top-level folder: outputs/<gpu>/<chapter>/<page>.json
# A code cell that is one part of a page's code block, which the notebook cut so that each
# "predict, then run" prompt sits above the part printing its answer (fieldguide/notebooks/
# generate.py) carries {"fieldguide": {PART_OF: <code_key of the whole block>}} in its metadata.
# Every part but the first also carries {BLANK_LINES: the blank lines between it and the part
# before}, so that the parts, joined again (`joined`), are the block's code exactly.
PART_OF, BLANK_LINES = "part_of", "blank_lines_before"


def code_key(source: str) -> str:
    """The key of a code cell: its code, trailing whitespace aside."""
    return hashlib.sha256(source.strip().encode()).hexdigest()


def record_path(page: str) -> str:
    """'execution/events.md' (relative to docs/) -> 'execution/events.json'."""
    return posixpath.splitext(page)[0] + ".json"


def _source(cell: Any) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


class NotAlone(RuntimeError):
    """Outputs would be recorded beside other work on the GPU or the cores: refused."""


# More memory than this in use on a GPU, with no notebook of ours running, is someone else's.
# A CUDA context takes about 0.5 GiB; an idle GPU reports a few MiB.
FOREIGN_MEMORY_BYTES = 1 << 30


def _nvidia_smi(*query: str) -> list[str]:
    import subprocess

    try:
        found = subprocess.run(["nvidia-smi", *query, "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise NotAlone(f"cannot tell whether the GPU is free (nvidia-smi: {exc}); outputs are "
                       "recorded only where nvidia-smi shows the GPU to itself") from None
    return [line.strip() for line in found.stdout.splitlines() if line.strip()]


def gpu_alone() -> None:
    """Raise NotAlone unless this process could record with the GPU to itself: not a pytest-xdist
    worker (whose siblings share the GPU and the cores), no compute process on any GPU (the
    recorder holds no CUDA context of its own, and in a container nvidia-smi may list another
    namespace's processes under host pids, or none: hence also), no GPU memory in use beyond
    what an idle GPU holds. The check is made before and after a notebook, not during it."""
    import os

    if os.environ.get("PYTEST_XDIST_WORKER"):
        raise NotAlone("outputs are recorded one notebook at a time, never under pytest-xdist "
                       "(its workers share the GPU and the cores): run `make outputs`")
    others = _nvidia_smi("--query-compute-apps=pid")
    if others:
        raise NotAlone(f"other processes hold the GPU (pids {', '.join(others)}): record outputs "
                       "with the GPU to itself (`make outputs`, nothing else running)")
    try:
        used = [int(float(mib)) << 20 for mib in _nvidia_smi("--query-gpu=memory.used")]
    except ValueError:  # "[N/A]": nothing to go by
        raise NotAlone("nvidia-smi reports no memory in use to go by: outputs are recorded only "
                       "where it shows the GPU idle") from None
    if any(b > FOREIGN_MEMORY_BYTES for b in used):
        raise NotAlone(f"{max(used) / 2**30:.1f} GiB of GPU memory is in use by something else: "
                       "record outputs with the GPU to itself (`make outputs`)")


def cpu_threads() -> int:
    """The CPU threads the notebook's kernel may use: OMP_NUM_THREADS where set, else the logical
    CPUs this process may run on (PyTorch's own default is the physical cores among them)."""
    import os

    try:
        return int(os.environ["OMP_NUM_THREADS"])
    except (KeyError, ValueError):
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def save(notebook: Any, page: str, out_dir: Path) -> Path:
    """Write the outputs of an executed notebook (run on this machine's GPU) for `page`. The
    caller checked `gpu_alone()` before running it; this checks again, now that it has ended."""
    from fieldguide.measuring.fingerprint import collect
    from fieldguide.measuring.timings import machine_slug

    gpu_alone()
    machine = collect()
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    cells = [{"code_sha256": code_key(_source(cell)), "outputs": on_disk(cell.get("outputs", []))}
             for cell in code]
    cells += [{"code_sha256": whole, "outputs": on_disk(found), "parts": count}
              for whole, found, count in wholes(code)]
    record = {
        "page": page,
        "gpu": machine["gpu_name"], "gpu_count": machine["gpu_count"],
        "driver": machine["driver"], "cuda_runtime": machine["cuda_runtime"],
        "torch": machine["torch"],
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "alone": True,                 # gpu_alone() held before the notebook ran and after
        "cpu_threads": cpu_threads(),
        "boot_id": machine["boot_id"],
        "cells": cells,
    }
    path = Path(out_dir) / machine_slug(machine) / record_path(page)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    return path


def joined(parts: list[tuple[str, int]]) -> str:
    """The code of a block from its parts, each with the blank lines before it (the first's 0)."""
    return "".join(("\n" * (blank + 1) if n else "") + code
                   for n, (code, blank) in enumerate(parts))


def blocks(code_cells: list[Any]) -> list[str]:
    """The code of each page block that the code cells `code_cells` run: a cell's own, or, for
    consecutive parts of one block (PART_OF), the block's code, joined again."""
    found: list[list[tuple[str, int]]] = []
    whole = None
    for cell in code_cells:
        part = part_of(cell)
        blank = (cell.get("metadata") or {}).get("fieldguide", {}).get(BLANK_LINES, 0)
        if part is not None and part == whole:
            found[-1].append((_source(cell), blank))
        else:
            found.append([(_source(cell), 0)])
        whole = part
    return [joined(parts) for parts in found]


def part_of(cell: Any) -> str | None:
    """The code key of the page's block that a code cell is a part of (PART_OF), if it is one."""
    return (cell.get("metadata") or {}).get("fieldguide", {}).get(PART_OF)


def wholes(code_cells: list[Any]) -> list[tuple[str, list[dict[str, Any]], int]]:
    """(code key, outputs, how many parts) of each page block that the notebook cut into parts
    (consecutive code cells of one PART_OF): what the block prints when it runs whole, so the
    page keeps the box under it. The parts' outputs in order, a stream that goes on in the next
    part merged into one (as one cell's would be), and a value a part ends with (Jupyter shows a
    last bare expression) only from the last part, as in the whole block."""
    groups: list[tuple[str, list[Any]]] = []
    for cell in code_cells:
        whole = part_of(cell)
        if whole is None:
            continue
        if groups and groups[-1][0] == whole:
            groups[-1][1].append(cell)
        else:
            groups.append((whole, [cell]))
    return [(whole, merged([cell.get("outputs", []) for cell in parts]), len(parts))
            for whole, parts in groups]


def merged(parts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The outputs of consecutive parts of one block as the block's own (see `wholes`)."""
    found: list[dict[str, Any]] = []
    for n, outputs in enumerate(json.loads(json.dumps(parts))):
        for output in outputs:
            if output.get("output_type") == "execute_result" and n < len(parts) - 1:
                continue
            if output.get("output_type") == "stream":
                output["text"] = _joined(output.get("text", ""))
                if found and found[-1].get("output_type") == "stream" \
                        and found[-1].get("name") == output.get("name"):
                    found[-1]["text"] += output["text"]
                    continue
            found.append(output)
    return found


def on_disk(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Outputs as nbformat writes them to a file: text split into lines (its split_lines), so a
    notebook holding them is laid out as a save in Jupyter would lay it out."""
    def lines(value: Any) -> Any:
        return value.splitlines(keepends=True) if isinstance(value, str) else value

    shown = []
    for output in json.loads(json.dumps(found)):
        if "text" in output:
            output["text"] = lines(output["text"])
        for mime, value in output.get("data", {}).items():
            if mime.startswith("text/") or mime in ("application/javascript", "image/svg+xml"):
                output["data"][mime] = lines(value)
        shown.append(output)
    return shown


@dataclass(frozen=True)
class Recorded:
    """One page's outputs as one GPU ran them."""

    slug: str
    gpu: str
    torch: str
    date: str
    by_code: dict[str, list[dict[str, Any]]]   # code sha256 -> nbformat outputs
    cpu_threads: int | None = None
    gpu_count: int | None = None   # shown where several: a command run on several GPUs

    def outputs_of(self, source: str) -> list[dict[str, Any]] | None:
        """The outputs of the cell whose code is `source` now; None where that code never ran."""
        return self.by_code.get(code_key(source))


def load(page: str, slug: str | None, root: Path = ROOT) -> Recorded | None:
    """The outputs recorded for `page` on the GPU `slug` (a timings/ folder name), if any."""
    if not slug:
        return None
    path = Path(root) / OUTPUTS / slug / record_path(page)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("alone") is not True:  # recorded beside other work: its numbers are not this GPU's
            return None
        return Recorded(slug, data["gpu"], data["torch"], data["date"],
                        {cell["code_sha256"]: cell["outputs"] for cell in data["cells"]},
                        data.get("cpu_threads"))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a recorded-outputs file ({exc}); record it again with "
                         "`make outputs` on a GPU (fieldguide/notebooks/record_outputs.py)") from exc


def executed(notebook: dict[str, Any], recorded: Recorded | None) -> tuple[dict[str, Any], int]:
    """A copy of `notebook` with each code cell's recorded outputs, where its code ran as it is
    now; returns it and how many code cells got outputs."""
    copy = json.loads(json.dumps(notebook))
    filled = 0
    for cell in copy["cells"]:
        if cell["cell_type"] != "code":
            continue
        found = recorded.outputs_of(_source(cell)) if recorded else None
        cell["outputs"] = found or []
        filled += found is not None
    if recorded and filled:
        copy["metadata"]["fieldguide"] = {"ran_on": recorded.gpu, "torch": recorded.torch,
                                          "date": recorded.date}
    return copy, filled


def site_gpu(root: Path = ROOT) -> str | None:
    """The GPU the site shows (`timings:` of fieldguide.rendering.render in mkdocs.yml), read from the
    file's text as fieldguide.notebooks.generate reads the repository (no YAML loader needed)."""
    path = Path(root) / "mkdocs.yml"
    if not path.is_file():
        return None
    match = re.search(r"^\s+timings:\s*['\"]?([\w.-]+)", path.read_text(encoding="utf-8"), re.M)
    return match[1] if match else None


def load_any(page: str, root: Path = ROOT) -> Recorded | None:
    """`page`'s outputs on the site's GPU where it ran there, else on the first other GPU (by
    folder name) that recorded them."""
    first = site_gpu(root)
    others = sorted(p.name for p in (Path(root) / OUTPUTS).iterdir() if p.is_dir()) \
        if (Path(root) / OUTPUTS).is_dir() else []
    for slug in dict.fromkeys([first, *others]):
        found = load(page, slug, root)
        if found is not None:
            return found
    return None


# --- Under each block on the page ------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
SHOWN_OPEN = 12   # lines: a longer output starts collapsed


def as_text(found: list[dict[str, Any]]) -> str:
    """What a reader saw printed: streams, results and errors as text (pictures are left out)."""
    parts = []
    for output in found:
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(_joined(output.get("text", "")))
        elif kind in ("execute_result", "display_data") and "text/plain" in output.get("data", {}):
            parts.append(_joined(output["data"]["text/plain"]) + "\n")
        elif kind == "error":
            parts.append(f"{output.get('ename')}: {output.get('evalue')}\n")
    return ANSI.sub("", "".join(parts)).rstrip("\n")


def _joined(value: Any) -> str:
    return value if isinstance(value, str) else "".join(value)


def under_blocks(markdown: str, root: Path, recorded: Recorded | None) -> str:
    """`markdown` with, under each code block of includes whose code ran as it is now, what it
    printed on the recorded GPU, in a collapsible box (collapsed where long)."""
    if recorded is None:
        return markdown
    from fieldguide.content.pages import INCLUDE, included_code

    fence_re = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})")
    lines = markdown.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        fence = fence_re.match(lines[i])
        if not fence:
            out.append(lines[i])
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence["fence"]):
            end += 1
        out.extend(lines[i:end + 1])
        body = [INCLUDE.match(line) for line in lines[i + 1:end]]
        if any(body):
            code = "\n\n".join(included_code(root, m["path"], m["section"]) for m in body if m)
            found = recorded.outputs_of(code)
            text = as_text(found) if found else ""
            if text:
                out.extend(_box(text, fence["indent"], recorded))
        i = end + 1
    return "\n".join(out)


def title(recorded: Recorded) -> str:
    """The box's title: the GPU, the conditions it ran in, the software and the date."""
    threads = f", {recorded.cpu_threads} CPU threads" if recorded.cpu_threads else ""
    several = (recorded.gpu_count or 1) > 1
    gpu = f"{recorded.gpu_count} × {recorded.gpu}" if several else recorded.gpu
    return (f"What this printed on {gpu} (the GPU{'s' if several else ''} to itself{threads}; "
            f"PyTorch {recorded.torch}, {recorded.date[:10]})")


# A fixed-width table as PyTorch's profiler prints it (`key_averages().table()`): a rule of
# dash runs, the header, the same rule, rows, the rule again. At about 240 columns it is
# unreadable wrapped and too wide for the column, so the box shows it as a table (which scrolls
# inside its own frame) and the lines around it as text.
RULE = re.compile(r"^-{4,}(?:  -{4,})+\s*$")


def pieces(text: str) -> list[tuple[str, list[str]]]:
    """`text` cut into ("text", lines) and ("table", lines of one fixed-width table)."""
    lines = text.split("\n")
    found: list[tuple[str, list[str]]] = []
    i = start = 0
    while i < len(lines):
        if (RULE.match(lines[i]) and i + 2 < len(lines) and lines[i + 2] == lines[i]
                and (end := next((j for j in range(i + 3, len(lines)) if lines[j] == lines[i]),
                                 None)) is not None):
            if start < i:
                found.append(("text", lines[start:i]))
            found.append(("table", lines[i:end + 1]))
            i = start = end + 1
        else:
            i += 1
    if start < len(lines):
        found.append(("text", lines[start:]))
    return [(kind, part) for kind, part in found if any(line.strip() for line in part)]


def as_markdown_table(table: list[str]) -> list[str]:
    """A profiler-style fixed-width table (rule, header, rule, rows, rule) as a Markdown table:
    the columns are where the rule's dash runs are."""
    spans = [m.span() for m in re.finditer(r"-+", table[0])]

    def cells(line: str) -> list[str]:
        row = [line[a:b + 2 if n + 1 < len(spans) else len(line)].strip()
               for n, (a, b) in enumerate(spans)]
        name, *numbers = [cell.replace("|", "\\|") for cell in row]
        # an operator or kernel name holds *, _ and <...>: code font shows it as printed
        return [f"`{name}`" if name else " ", *[n.replace("<", "&lt;") or " " for n in numbers]]

    header = [cell.strip("`") for cell in cells(table[1])]
    rows = [cells(line) for line in table[3:-1]]
    align = ["---"] + ["--:"] * (len(spans) - 1)  # names left, numbers right
    return ["| " + " | ".join(row) + " |" for row in (header, align, *rows)]


def _box(text: str, indent: str, recorded: Recorded) -> list[str]:
    opener = "???" if text.count("\n") + 1 > SHOWN_OPEN else "???+"
    ticks = "`" * max(3, max((len(m) for m in re.findall(r"`{3,}", text)), default=0) + 1)
    inner = indent + "    "
    body: list[str] = []
    for kind, part in pieces(text):
        if kind == "table":
            body += ["", *[f"{inner}{row}" for row in as_markdown_table(part)], ""]
        else:
            body += [f"{inner}{ticks}text", *[f"{inner}{line}" if line else "" for line in part],
                     f"{inner}{ticks}"]
    return ["", f'{indent}{opener} output "{title(recorded)}"', "", *body, ""]


# --- What a shell command printed (fieldguide/notebooks/record_commands.py records it) ----------------------
#
# A bash block that names its files and GPUs right after its closing fence,
#
#     ```bash title="on one machine"
#     torchrun --standalone --nproc-per-node 2 train.py --epochs 3
#     ```
#
#     <!-- command-output: gpus=2 train.py=snippets/several_gpus/ddp_with_torchrun.py -->
#
# is run by `python3 -m fieldguide.notebooks.record_commands` in a folder holding those files under those
# names, on a machine with at least that many GPUs, and its output is kept in
# outputs/<machine>/<chapter>/<page>.commands.json, keyed by the block's text and the files'
# bytes: a changed command or file shows nothing until it is recorded again.

DECLARATION = re.compile(r"^(?P<indent>[ \t]*)<!--\s*command-output:(?P<args>[^>]*?)-->\s*$")


@dataclass(frozen=True)
class Command:
    """One declared block: its text, the GPUs it needs and its files (name -> repository path)."""

    page: str
    block: str
    gpus: int
    files: dict[str, str]
    key: str


def commands_path(page: str) -> str:
    """'several-gpus/ddp.md' (relative to docs/) -> 'several-gpus/ddp.commands.json'."""
    return posixpath.splitext(page)[0] + ".commands.json"


def command_key(block: str, files: dict[str, str], root: Path = ROOT) -> str:
    """The block's text, and each file's name and bytes."""
    digest = hashlib.sha256(block.strip().encode())
    for name, path in sorted(files.items()):
        digest.update(b"\0" + name.encode() + b"\0" + (Path(root) / path).read_bytes())
    return digest.hexdigest()


def commands(markdown: str, page: str, root: Path = ROOT) -> list[tuple[int, Command]]:
    """Each declaration of `page` with the index of its line: the block above it (blank lines
    between them allowed) and what it declares. ValueError, naming the page, for a declaration
    under no block, a bad argument or a file that does not exist."""
    lines = markdown.split("\n")
    fence_re = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})")
    found: list[tuple[int, Command]] = []
    block: str | None = None   # the last block closed, while only blank lines follow it
    i = 0
    while i < len(lines):
        fence = fence_re.match(lines[i])
        if fence:
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence["fence"]):
                end += 1
            indent = len(fence["indent"])
            block = "\n".join(line[indent:] for line in lines[i + 1:end])
            i = end + 1
            continue
        declared = DECLARATION.match(lines[i])
        if declared:
            if block is None:
                raise ValueError(f"docs/{page}, line {i + 1}: a command-output declaration "
                                 "stands under no code block")
            found.append((i, _declared(page, block, declared["args"], root, i + 1)))
        elif lines[i].strip():
            block = None
        i += 1
    return found


def _declared(page: str, block: str, args: str, root: Path, line: int) -> Command:
    where = f"docs/{page}, line {line}"
    gpus, files = 1, {}
    for arg in args.split():
        name, sep, value = arg.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{where}: command-output takes gpus=N and NAME=PATH, not {arg!r}")
        if name == "gpus":
            if not value.isdigit():
                raise ValueError(f"{where}: gpus={value} is not a number of GPUs")
            gpus = int(value)
        elif not (Path(root) / value).is_file():
            raise ValueError(f"{where}: command-output declares {name}={value}, and {value} "
                             "does not exist in the repository")
        else:
            files[name] = value
    return Command(page, block, gpus, files, command_key(block, files, root))


def load_commands(page: str, root: Path = ROOT) -> dict[str, tuple[Recorded, dict[str, Any]]]:
    """The commands of `page` recorded alone on any machine (outputs/<machine>/): key ->
    (the machine's record, the command's entry); the site's GPU first, then by folder name."""
    folder = Path(root) / OUTPUTS
    slugs = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    found: dict[str, tuple[Recorded, dict[str, Any]]] = {}
    for slug in dict.fromkeys([s for s in (site_gpu(root),) if s in slugs] + slugs):
        path = folder / slug / commands_path(page)
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("alone") is not True:
                continue
            for entry in data["commands"]:
                machine = Recorded(slug, data["gpu"], entry.get("torch", data["torch"]),
                                   entry.get("date", data["date"]), {}, data.get("cpu_threads"),
                                   data.get("gpu_count"))
                found.setdefault(entry["key"], (machine, entry))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a recorded-commands file ({exc}); record it again "
                             "with `python3 -m fieldguide.notebooks.record_commands`") from exc
    return found


def command_text(entry: dict[str, Any]) -> str:
    """What a reader sees: stdout; where the command failed, stderr and its exit code too."""
    text = entry.get("stdout", "")
    if entry.get("returncode") != 0:
        text = text.rstrip("\n") + "\n" + entry.get("stderr", "").rstrip("\n")
        text = text.strip("\n") + f"\n(the command failed: exit code {entry.get('returncode')})"
    return ANSI.sub("", text).strip("\n")


def under_commands(markdown: str, page: str, root: Path = ROOT) -> str:
    """`markdown` with each command-output declaration replaced by what its block printed where
    it was recorded as it is now, or by nothing."""
    declared = commands(markdown, page, root)
    if not declared:
        return markdown
    recorded = load_commands(page, root)
    lines = markdown.split("\n")
    for index, command in reversed(declared):
        indent = DECLARATION.match(lines[index])["indent"]  # type: ignore[index]
        found = recorded.get(command.key)
        text = command_text(found[1]) if found else ""
        lines[index:index + 1] = _box(text, indent, found[0])[1:] if text else []
    return "\n".join(lines)
