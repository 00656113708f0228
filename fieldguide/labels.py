"""How a benchmark reads on a page: labels declared beside the benchmark, read without running it.

A benchmark module may declare, at module level, two plain dicts (literals only):

    LABELS = {"copy": "{direction} copy from {kind} memory, {bytes}",   # per benchmark function
              "return[pinned-non_blocking]": "Pinned, non_blocking=True"}  # or per parameter id
    WORDS = {"h2d": "host→device", "pageable": "pageable"}   # how recorded values read

A table row or a chart series is named by the most specific LABELS entry (`func[param]`, then
`func`), its `{field}`s filled from what the benchmark recorded, each value through WORDS and
the field's unit (bytes read as KiB/MiB/GiB). The site build reads these with `ast`, so it needs
neither torch nor a GPU, and editing a label never makes a timing stale.
"""

from __future__ import annotations

import ast
import string
from functools import cache
from pathlib import Path
from typing import Any

from fieldguide.timings import Benchmark, benchmark_location, format_value


@cache
def declarations(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(LABELS, WORDS) of one benchmark module; empty where it declares none."""
    found: dict[str, dict[str, str]] = {"LABELS": {}, "WORDS": {}}
    if not path.is_file():
        return {}, {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id in found):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["LABELS"], found["WORDS"]


def word(value: Any, words: dict[str, str], field: str = "") -> str:
    if isinstance(value, str | bool | int) and str(value) in words:
        return words[str(value)]
    if field == "bytes" or field.endswith("_bytes"):
        return format_value("bytes", value)
    if isinstance(value, float):
        return format_value(field, value)
    return str(value)


def label(bench: Benchmark, root: Path) -> str | None:
    """The declared label of a benchmark, or None where its module declares none."""
    bench_file, function = benchmark_location(bench.fullname)
    labels, words = declarations(root / bench_file)
    short = bench.name.split(".", 1)[1]
    template = labels.get(short) or labels.get(function.removeprefix("bench_"))
    if template is None:
        return None
    fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
    extra = bench.extra
    missing = fields - extra.keys()
    if missing:
        raise ValueError(f"label of {bench.name!r} names {', '.join(sorted(missing))}, "
                         "which the benchmark did not record")
    return template.format(**{f: word(extra[f], words, f) for f in fields})


def series_label(bench: Benchmark, field: str, root: Path) -> str:
    """How one value of a chart's series field reads: through the module's WORDS."""
    _, words = declarations(root / benchmark_location(bench.fullname)[0])
    return word(bench.value(field), words, field)
