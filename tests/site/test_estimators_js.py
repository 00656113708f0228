"""The calculators' JavaScript is the estimators' Python, translated (fieldguide/rendering/pyjs.py): node
runs the translation on a grid of inputs and must give what Python gives, and each
calculator's whole script (formulas and driver) must parse. One source of truth per formula.
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
import subprocess

import pytest

pytest.importorskip("markdown")  # fieldguide.rendering.calculators is a Markdown extension: docs toolchain

from fieldguide.rendering import calculators, pyjs
from snippets.start_here import will_it_fit as est

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed: "
                                "the calculators' JavaScript cannot be run here")

GRID = {
    "training_memory": [
        (parameters, layers, tokens, width, saved, optimizer, precision, checkpoint, micro,
         gpus, parallel, whole, bucket_view)
        for parameters, layers, tokens, width, saved in [(33_611_776, 16, 16384, 512, 10),
                                                         (134_254_593, 9, 4096, 4096, 1),
                                                         (7e9, 32, 8192, 4096, 17),
                                                         (2e8, 1, 8192, 4096, 17)]
        for optimizer in ("adam", "sgd_momentum", "sgd")
        for precision in ("fp32", "autocast", "bf16")
        for checkpoint in (False, True)
        for micro in (1, 4)
        for gpus, parallel in [(1, "ddp"), (2, "ddp"), (4, "fsdp2"), (8, "tp")]
        for whole in (0, 4)
        for bucket_view in (False, True)],
    "state_bytes_per_parameter": list(itertools.product(
        ("adam", "adamw", "sgd", "sgd_momentum"), ("fp32", "autocast", "bf16"))),
    "step_lower_bound": [(f, b, p, w) for f in (1e9, 4.4e11, 1.1e13) for b in (1e6, 8e8, 4e10)
                         for p in (6.7e13, 7.5e14) for w in (2.7e12, 4e12)],
    "copy_seconds": [(n, link, pinned, host, lat) for n in (1024, 2**26, 2**30)
                     for link in (25e9, 63e9) for pinned in (True, False)
                     for host in (0, 8e9) for lat in (0, 1e-5)],
    "collective_seconds": [(n, g, bus, op, lat) for n in (1024, 2**24, 2**30)
                           for g in (1, 2, 4, 8) for bus in (3.3e11,)
                           for op in ("all_reduce", "all_gather", "reduce_scatter")
                           for lat in (0, 3.8e-5)],
    "bubble_fraction": list(itertools.product((1, 2, 4, 8), (1, 4, 16, 64))),
    "pipeline_seconds": [(w, s, m) for w in (0.1, 2.5) for s in (1, 2, 4) for m in (1, 4, 16)],
    "matmul_waves": [(m, n, tm, tn, sms) for m in (1, 256, 1056, 8191) for n in (8192, 8200)
                     for tm, tn in [(128, 256), (64, 128)] for sms in (108, 132)],
    "matmul_seconds": [(m, n, k, 7.5e14) for m in (256, 1056, 8192) for n in (8192, 8200)
                       for k in (64, 8192)],
}


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)


def test_the_grid_covers_every_function_the_calculators_run():
    assert {c.function for c in calculators.CALCULATORS.values()} <= set(GRID)


@needs_node
def test_javascript_gives_what_python_gives_on_the_grid(tmp_path):
    source = pyjs.translate(est, list(GRID))
    cases = [(name, list(args)) for name, grid in GRID.items() for args in grid]
    harness = tmp_path / "grid.js"
    harness.write_text(source + f"\nconst cases = {json.dumps(cases)};\n"
                       "const fns = {" + ", ".join(f"{n}: {n}" for n in GRID) + "};\n"
                       "console.log(JSON.stringify(cases.map(([n, a]) => fns[n](...a))));\n",
                       encoding="utf-8")
    done = subprocess.run([NODE, str(harness)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    wrong = [(name, args, getattr(est, name)(*args), js)
             for (name, args), js in zip(cases, results, strict=True)
             if not _same(getattr(est, name)(*args), js)]
    assert not wrong, f"{len(wrong)} of {len(cases)} differ, e.g. {wrong[:3]}"


@needs_node
def test_keyword_arguments_reach_the_same_parameters(tmp_path):
    """matmul_seconds calls matmul_waves by position; training_memory is called with its
    defaults left out: both must bind as in Python."""
    source = pyjs.translate(est, ["training_memory", "matmul_seconds"])
    harness = tmp_path / "defaults.js"
    harness.write_text(source + "console.log(JSON.stringify([training_memory(1e9, 10, 4096, "
                       "1024), matmul_seconds(1056, 8192, 8192, 7.5e14)]));\n", encoding="utf-8")
    done = subprocess.run([NODE, str(harness)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    memory, seconds = json.loads(done.stdout)
    assert _same(est.training_memory(1e9, 10, 4096, 1024), memory)
    assert _same(est.matmul_seconds(1056, 8192, 8192, 7.5e14), seconds)


@needs_node
@pytest.mark.parametrize("name", list(calculators.CALCULATORS))
def test_each_calculators_script_parses(tmp_path, name):
    block = calculators.calculator_html(name, {"busbw": 330, "latency": 38, "peak": 750,
                                               "bandwidth": 4000, "sms": 132}, True)
    script = block.split("<script>", 1)[1].rsplit("</script>", 1)[0]
    path = tmp_path / f"{name}.js"
    path.write_text(script, encoding="utf-8")
    done = subprocess.run([NODE, "--check", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", list(calculators.CALCULATORS))
def test_every_input_has_a_label_and_every_output_a_place(name):
    block = calculators.calculator_html(name, {}, False)
    calc = calculators.CALCULATORS[name]
    for item in calc.inputs:
        assert f'<label for="calc-{name}-{item.param}">' in block
        assert f'id="calc-{name}-{item.param}"' in block
    for output in calc.outputs:
        assert f'data-output="{output.key or "result"}"' in block


def test_the_translation_refuses_what_it_cannot_express():
    import types

    module = types.ModuleType("loops")
    source = "def f(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total\n"
    module.__dict__["__file__"] = "loops.py"
    import linecache

    linecache.cache["loops.py"] = (len(source), None, source.splitlines(True), "loops.py")
    exec(compile(source, "loops.py", "exec"), module.__dict__)
    with pytest.raises(pyjs.TranslationError, match="For"):
        pyjs.translate(module, ["f"])


def test_the_runs_rule_admits_three_runs_from_two_leases_of_current_code():
    """fieldguide.rendering.render's require_runs, as the estimates follow it on every machine: three
    runs of the current code from two leases (a run without a lease counts as a run, never
    as a lease); thin() names what a page showed that the rule does not admit, on the
    reference GPU or a machine of several of it."""
    from types import SimpleNamespace as NS

    from fieldguide.measuring import estimates

    def bench(*leases, stale=False):
        return NS(stale=stale, records=[NS(run=NS(lease=lease, id=f"run{i}"))
                                        for i, lease in enumerate(leases)])

    benches = {("nvidia-h200", "a"): bench("x", "x", "y"), ("nvidia-h200", "b"): bench("x", "y"),
               ("nvidia-h200", "e"): bench("x", "x", None),
               ("nvidia-h200", "f"): bench("x", "y", "y", stale=True),
               ("2x-nvidia-h200", "c"): bench("x", "x", "x"),
               ("nvidia-h100-80gb-hbm3", "d"): bench("x")}
    data = estimates.Data.__new__(estimates.Data)
    data.machines = {slug: NS(names={n for s, n in benches if s == slug},
                              benchmark=lambda name, slug=slug: benches[(slug, name)])
                     for slug, _ in benches}
    data.keys = NS(stale_files=lambda b: ["changed.py"] if b.stale else [])
    data._short = {}
    assert data.short("nvidia-h200", "a") is None
    assert data.short("nvidia-h200", "b") == "2 runs from 2 leases"
    assert data.short("nvidia-h200", "e") == "3 runs from 1 lease"
    assert data.short("nvidia-h200", "f") == "its code changed since it was measured"
    assert data.short("nvidia-h100-80gb-hbm3", "d") == "1 run from 1 lease"
    assert data.short("nvidia-h200", "zzz") == "not measured"
    data.used = set(benches)
    named = [line.split(" ", 1)[0] for line in data.thin("nvidia-h200")]
    assert named == ["c", "b", "e", "f"]
