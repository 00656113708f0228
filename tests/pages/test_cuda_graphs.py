"""Claims of docs/execution/cuda-graphs.md (all need a CUDA device: the module is GPUS_NEEDED = 1)."""

import pytest

pytestmark = pytest.mark.snippet("snippets/execution/cuda_graphs.py")


def test_replay_computes_what_eager_computes(snippet):
    import torch

    for _ in range(3):
        new_x = torch.randn(1024, device=snippet.device)
        torch.testing.assert_close(snippet.run_graph(new_x), snippet.chain(new_x, snippet.STEPS))


def test_replay_overwrites_the_static_output(snippet):
    import torch

    kept = snippet.static_y                      # a reference, not a copy
    first = snippet.run_graph(torch.randn(1024, device=snippet.device))
    second = snippet.run_graph(torch.randn(1024, device=snippet.device))
    assert not torch.equal(first, second)
    assert torch.equal(kept, second), "the graph writes every replay into the same tensor"


def test_python_values_are_frozen_at_capture(snippet):
    from_graph, eager = snippet.frozen_python_value()
    assert from_graph == [2.0] * 4
    assert eager == [3.0] * 4


@pytest.mark.timed
def test_graph_cuts_time_per_operation(snippet):
    eager, replay = snippet.per_op_times(repeats=30)
    assert eager / replay >= 3, (eager, replay)


def test_sync_inside_capture_is_an_error():
    from tests.helpers import run_python

    code = (
        "import torch\n"
        "x = torch.ones(4, device='cuda')\n"
        "g = torch.cuda.CUDAGraph()\n"
        "try:\n"
        "    with torch.cuda.graph(g):\n"
        "        (x * 2).sum().item()\n"
        "except RuntimeError as exc:\n"
        "    print('raised:', exc, exc.__context__)\n"
    )
    result = run_python(["-c", code])
    assert "raised:" in result.stdout, result.stdout + result.stderr
    assert "operation not permitted when stream is capturing" in result.stdout, result.stdout


def test_graphed_callables_match_eager_outputs_and_gradients(snippet):
    import torch

    for _ in range(2):                           # the second call replays the captured graphs
        out_graphed, grads_graphed = snippet.train_step(snippet.model, snippet.batch)
        out_eager, grads_eager = snippet.train_step(snippet.reference, snippet.batch)
        torch.testing.assert_close(out_graphed, out_eager, rtol=1e-4, atol=1e-6)
        for g, e in zip(grads_graphed, grads_eager, strict=True):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-6)


SWITCH = "torch.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch(False)\n"


def graphed_callables_code(warning_off):
    """The page's sections for make_graphed_callables, pasted in order, then two training steps.
    The section sets the warning switch before make_graphed_callables; without warning_off, the
    switch is left out."""
    from fieldguide import ROOT
    from fieldguide.content.snippets import sections

    graphs = sections(ROOT / "snippets/execution/cuda_graphs.py")
    graphed = graphs["graphed_callables"]
    assert graphed.count(SWITCH) == 1
    assert graphed.index(SWITCH) < graphed.index("torch.cuda.make_graphed_callables(")
    return "\n\n".join([graphs["setup"], graphed if warning_off else graphed.replace(SWITCH, ""),
                         "train_step(model, batch)\ntrain_step(model, batch)\n"])


def test_graphed_callables_section_runs_with_warnings_as_errors():
    from tests.helpers import run_python

    # Only autograd's stream warning is an error: cuBLAS may warn once, harmlessly, that it set
    # up a CUDA context on the backward thread (seen on the H100, torch 2.11).
    strict = "import warnings\nwarnings.filterwarnings('error', message='.*AccumulateGrad')\n"
    result = run_python(["-c", strict + graphed_callables_code(True)])
    assert result.returncode == 0, result.stderr


def test_without_the_switch_autograd_warns_about_the_gradient_stream():
    from tests.helpers import run_python

    result = run_python(["-c", graphed_callables_code(False)])
    assert result.returncode == 0, result.stderr
    assert "AccumulateGrad node's stream does not match" in result.stderr, result.stderr


@pytest.mark.fresh_interpreter
@pytest.mark.parametrize(("setting", "hinted"), [(None, True), ("tf32", False)])
def test_inductor_tf32_hint_reads_the_current_setting(setting, hinted, tmp_path, monkeypatch):
    """The hint comes with a first compilation: each run gets an empty compile cache. (On a
    machine that had compiled the same product before, the run printed nothing; 2026-11-24.)"""
    from tests.helpers import run_python

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    code = ("import torch\n"
            + (f"torch.backends.cuda.matmul.fp32_precision = {setting!r}\n" if setting else "")
            + "a = torch.randn(64, 64, device='cuda')\n"
              "torch.compile(lambda x: x @ x)(a)\n")
    result = run_python(["-c", code])
    assert result.returncode == 0, result.stderr
    assert ("TensorFloat32 tensor cores" in result.stderr) is hinted, result.stderr
    if hinted:  # the page: a run that finds the compiled code in the cache prints no hint
        again = run_python(["-c", code])
        assert again.returncode == 0 and "TensorFloat32 tensor cores" not in again.stderr, again.stderr


def test_graphed_callables_accept_new_inputs(snippet):
    import torch

    other = torch.randn(32, 64, device=snippet.device)
    out_graphed, _ = snippet.train_step(snippet.model, other)
    out_eager, _ = snippet.train_step(snippet.reference, other)
    torch.testing.assert_close(out_graphed, out_eager, rtol=1e-4, atol=1e-6)


def test_reduce_overhead_compile_matches_eager(snippet):
    import torch

    with torch.no_grad():
        expected = snippet.reference(snippet.batch)
    for output in snippet.compiled_outputs():
        torch.testing.assert_close(output, expected, rtol=1e-4, atol=1e-5)


def test_random_numbers_change_between_replays(snippet):
    import torch

    g, out = snippet.capture(torch.rand_like, torch.empty(1000, device=snippet.device))
    g.replay()
    first = out.clone()
    g.replay()
    assert not torch.equal(first, out)


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) ---

CLAIMS = {"graph_speedup_per_op": 5}


def test_graph_cuts_time_per_operation_in_every_run(measured):
    for run in measured("cuda_graphs.chain[eager-200ops]", "cuda_graphs.chain[graph-200ops]"):
        eager = run.value("cuda_graphs.chain[eager-200ops]", "per_op")
        graph = run.value("cuda_graphs.chain[graph-200ops]", "per_op")
        assert eager >= CLAIMS["graph_speedup_per_op"] * graph, (run, eager, graph)
