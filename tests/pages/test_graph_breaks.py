"""Claims of docs/compilers/graph-breaks.md.

Finding breaks and counting graphs needs no GPU (Dynamo captures the same graphs on a CPU), so CI
checks them on the code the page shows; what a break costs is measured on GPUs.
"""

import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/compilers/graph_breaks.py")

# The page's bounds, used by its prose (timing-bound), the live GPU tests and the measured data.
CLAIMS = {
    "item_cost": 1.4,        # the .item() version takes at least this times the fixed one
    "recompile_cost": 2.0,   # four static compiles take at least this times one marked dynamic
}

PAIRS = [("scale_by_max_item", "scale_by_max", "item()"),
         ("branch_on_sum", "branch_free", "jump"),
         ("print_in_the_middle", "print_outside", "builtin")]


@pytest.mark.parametrize(("broken", "fixed", "reason"), PAIRS, ids=[p[0] for p in PAIRS])
def test_each_break_is_found_and_its_fix_is_one_graph(snippet, broken, fixed, reason):
    x = torch.randn(64, device=snippet.device)
    graphs, breaks, reasons = snippet.explain(getattr(snippet, broken), x)
    assert (graphs, breaks) == (2, 1), reasons
    assert reason in reasons[0], reasons
    assert snippet.explain(getattr(snippet, fixed), x) == (1, 0, [])


@pytest.mark.parametrize(("broken", "fixed"), [p[:2] for p in PAIRS[:2]])
def test_the_fix_compiles_whole_and_computes_the_same(snippet, broken, fixed):
    # fullgraph=True makes any graph break an error; the backend that runs the captured graph
    # as it is keeps this quick on a CPU (Inductor's own output is checked on the GPU).
    for sign in (1, -1):
        x = sign * torch.rand(256, device=snippet.device) + sign
        compiled = torch.compile(getattr(snippet, fixed), fullgraph=True,
                                 backend=snippet.CountingBackend())
        torch.testing.assert_close(compiled(x), getattr(snippet, broken)(x))


def test_the_broken_version_refuses_fullgraph(snippet):
    compiled = torch.compile(snippet.branch_on_sum, fullgraph=True,
                             backend=snippet.CountingBackend())
    with pytest.raises(torch._dynamo.exc.Unsupported):
        compiled(torch.randn(8, device=snippet.device))


def test_fullgraph_captures_item_instead_of_breaking(snippet):
    # fullgraph=True turns on capture_scalar_outputs (PyTorch PR 163121): one graph, the
    # same result, where fullgraph=False splits the function in two.
    x = torch.randn(64, device=snippet.device)
    assert snippet.count_graphs(snippet.scale_by_max_item, x) == 2
    assert snippet.count_graphs(snippet.scale_by_max_item, x, fullgraph=True) == 1
    compiled = torch.compile(snippet.scale_by_max_item, fullgraph=True,
                             backend=snippet.CountingBackend())
    torch.testing.assert_close(compiled(x), snippet.scale_by_max_item(x))


def test_a_strict_region_raises_on_a_break_inside_it_only(snippet, capfd):
    x = torch.randn(64, device=snippet.device)
    with pytest.raises(torch._dynamo.exc.Unsupported, match=r"Tensor.item\(\)"):
        snippet.count_graphs(snippet.step_with_strict_core, x)   # .item() in the core
    # the print outside the strict region breaks the graph without an error
    assert snippet.count_graphs(snippet.step_with_strict_core, x, snippet.scale_by_max) == 1
    assert "step" in capfd.readouterr().out


def test_disable_leaves_the_logger_to_python_every_call(snippet, capfd):
    x = torch.randn(64, device=snippet.device)
    assert snippet.count_graphs(snippet.print_through_disable, x) == 2
    compiled = torch.compile(snippet.print_through_disable, backend=snippet.CountingBackend())
    for _ in range(2):
        torch.testing.assert_close(compiled(x), snippet.print_outside(x))
    assert capfd.readouterr().out.count("halfway") == 3   # count_graphs' call, then two


def test_nonstrict_trace_puts_an_untraceable_helper_into_the_graph(snippet):
    x = torch.randn(64, device=snippet.device)
    assert snippet.count_graphs(snippet.centred, x) == 3
    assert snippet.count_graphs(snippet.centred, x, snippet.traced_shift_of) == 1
    compiled = torch.compile(snippet.centred, fullgraph=True, backend="inductor")
    torch.testing.assert_close(compiled(x, snippet.traced_shift_of), snippet.centred(x))


def test_fail_on_recompile_serves_warm_shapes_and_refuses_new_ones(snippet):
    backend = snippet.CountingBackend()
    torch.compiler.reset()
    compiled = torch.compile(snippet.scale_by_max, backend=backend, dynamic=False)
    warm = [torch.randn(n, device=snippet.device) for n in (100, 200)]
    for x in warm:
        compiled(x)
    outputs = snippet.serve(compiled, warm)
    assert backend.graphs == 2                     # served without compiling
    torch.testing.assert_close(outputs[1], snippet.scale_by_max(warm[1]))
    with pytest.raises(RuntimeError, match="fail_on_recompile"):
        snippet.serve(compiled, [torch.randn(300, device=snippet.device)])
    compiled(torch.randn(300, device=snippet.device))  # outside serve: compiles again
    assert backend.graphs == 3


def test_only_mark_unbacked_keeps_length_one_in_the_same_graph(snippet):
    sizes = [1, 2, 3, 4]
    graphs = {name: snippet.graphs_for_sizes(sizes, mark)
              for name, mark in snippet.MARKS.items()}
    assert graphs == {"mark_dynamic": 2, "maybe_mark_dynamic": 2, "mark_unbacked": 1}


def test_mark_dynamic_is_a_rule_and_maybe_mark_dynamic_a_hint(snippet):
    def specializes(x):
        if x.shape[0] == 10:      # Python reads the length: it becomes a constant
            return torch.relu(x)
        return torch.relu(-x)

    for mark, raises in ((torch._dynamo.mark_dynamic, True),
                         (torch._dynamo.maybe_mark_dynamic, False)):
        torch.compiler.reset()
        compiled = torch.compile(specializes, backend=snippet.CountingBackend())
        x = torch.randn(10, device=snippet.device)
        mark(x, 0)
        if raises:
            with pytest.raises(Exception, match="marked .* as dynamic"):
                compiled(x)
        else:
            torch.testing.assert_close(compiled(x), specializes(x))


def test_each_new_length_recompiles_unless_the_dimension_is_dynamic(snippet):
    lengths = [100, 200, 300, 400]
    assert snippet.graphs_for_lengths(lengths, dynamic=False) == 4
    assert snippet.graphs_for_lengths(lengths) == 2            # static, then dynamic
    assert snippet.graphs_for_lengths(lengths, dynamic=True) == 1
    assert snippet.graphs_for_lengths(lengths, mark_dynamic=True) == 1


def test_past_the_recompile_limit_the_function_runs_eagerly(snippet):
    limit = torch._dynamo.config.recompile_limit
    assert limit == 8  # the default the page states
    lengths = [100 * (i + 1) for i in range(limit + 3)]
    assert snippet.graphs_for_lengths(lengths, dynamic=False) == limit  # then no more graphs
    # ...and the calls past the limit still compute the right thing, in Python
    compiled = torch.compile(snippet.scale_by_max, backend=snippet.CountingBackend(),
                             dynamic=False)
    for n in lengths:
        x = torch.randn(n, device=snippet.device)
        torch.testing.assert_close(compiled(x), snippet.scale_by_max(x))


def test_explain_runs_the_function_and_resets_dynamo(snippet, capfd):
    torch.compiler.reset()
    backend = snippet.CountingBackend()
    compiled = torch.compile(snippet.scale_by_max, backend=backend)
    x = torch.randn(16, device=snippet.device)
    compiled(x)
    compiled(x)
    assert backend.graphs == 1                    # compiled once, then reused
    snippet.explain(snippet.print_in_the_middle, x)
    assert "halfway" in capfd.readouterr().out    # the function ran
    compiled(x)
    assert backend.graphs == 2                    # the compiled code was thrown away


def test_logs_name_the_break_and_the_recompile(snippet, capfd):
    snippet.show_breaks_and_recompiles(torch.randn(64, device=snippet.device))
    logged = capfd.readouterr().err
    assert "Graph break" in logged, logged[-2000:]
    assert "Recompiling function branch_on_sum" in logged, logged[-2000:]


@pytest.mark.gpus(1)
@pytest.mark.parametrize(("broken", "fixed"), [p[:2] for p in PAIRS[:2]])
def test_inductor_compiles_the_fixed_version_to_the_same_result(snippet, broken, fixed):
    x = torch.randn(2**16, device="cuda")
    compiled = torch.compile(getattr(snippet, fixed), fullgraph=True)
    torch.testing.assert_close(compiled(x), getattr(snippet, broken)(x))


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) --------

def test_the_item_break_costs_in_every_run(measured):
    broken, fixed = "graph_breaks.call[item-broken]", "graph_breaks.call[item-fixed]"
    for run in measured(broken, fixed):
        assert run.value(broken) >= CLAIMS["item_cost"] * run.value(fixed), run
        assert run.value(broken, "graphs") == 2 and run.value(fixed, "graphs") == 1, run


def test_recompiling_per_length_costs_in_every_run(measured):
    static, marked = "graph_breaks.recompiles[static]", "graph_breaks.recompiles[marked]"
    for run in measured(static, marked):
        assert run.value(static) >= CLAIMS["recompile_cost"] * run.value(marked), run
        assert run.value(static, "graphs") == 4 and run.value(marked, "graphs") == 1, run
