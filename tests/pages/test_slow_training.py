"""Claims of docs/start-here/slow-training.md: the profiler's summary has the columns the page
names, the trace reader finds the symptoms the decision tree branches on (in a real CPU trace and
in a synthetic GPU trace whose answer is known), and every branch links a published page."""

import json
import re

import pytest
import torch

from fieldguide import ROOT
from fieldguide.pages import is_draft

pytestmark = pytest.mark.snippet("snippets/start_here/slow_training.py")

PAGE = ROOT / "docs" / "start-here" / "slow-training.md"


# --- A real trace of the page's step, on whatever device runs the tests ----------------------

@pytest.fixture(scope="module")
def real_trace(tmp_path_factory):
    from snippets.start_here import slow_training

    path = tmp_path_factory.mktemp("trace") / "trace.json"
    table = slow_training.take_trace(
        path, lambda: slow_training.train_step(*slow_training.batch()))
    return table, path


def test_the_summary_has_the_columns_the_page_reads(snippet, real_trace):
    table, _ = real_trace
    header = table.splitlines()[1]
    columns = ["Name", "Self CPU", "CPU total", "# of Calls"]
    if snippet.device.type == "cuda":
        columns += ["Self CUDA", "CUDA total"]
    for column in columns:
        assert column in header, f"{column!r} not in {header!r}"
        assert f"`{column}`" in PAGE.read_text(encoding="utf-8"), f"the page never names {column}"


def test_the_page_step_runs_its_products_in_float32(snippet, real_trace):
    _, path = real_trace
    symptoms = snippet.read_trace(path)
    # two Linear layers, forward and backward, three recorded steps
    assert symptoms.products >= 3 * 2 and symptoms.fp32_products == symptoms.products
    assert "float32 products: TF32, bf16 autocast" in snippet.where_to_look(symptoms)
    if snippet.device.type == "cpu":  # a CPU trace holds no GPU work
        assert symptoms.kernels == 0 and symptoms.gpu_busy_us == 0


@pytest.fixture
def precision():
    """Restores the TF32 settings a test changes (the new API only: mixing it with
    set_float32_matmul_precision makes get_float32_matmul_precision raise)."""
    matmul = torch.backends.cuda.matmul.fp32_precision
    conv = torch.backends.cudnn.conv.fp32_precision
    yield torch.backends
    torch.backends.cuda.matmul.fp32_precision = matmul
    torch.backends.cudnn.conv.fp32_precision = conv


def test_with_tf32_on_the_same_trace_has_no_strict_float32_products(snippet, real_trace,
                                                                      precision):
    # The trace's Input type says float with TF32 on or off; only the settings tell.
    _, path = real_trace
    assert snippet.read_trace(path).fp32_products > 0
    precision.cuda.matmul.fp32_precision = "tf32"  # what the page's TF32 fix sets
    symptoms = snippet.read_trace(path)
    assert symptoms.products > 0 and symptoms.fp32_products == 0
    assert not any("float32" in b for b in snippet.where_to_look(symptoms))


def test_convolutions_count_as_float32_only_when_cudnn_tf32_is_off(snippet, tmp_path,
                                                                   precision):
    events = [event("user_annotation", "ProfilerStep#1", 0, 100),
              event("cpu_op", "aten::convolution", 10, 20, **{"Input type": ["float"] * 3})]
    path = write(tmp_path, events)
    assert precision.cudnn.conv.fp32_precision == "tf32"  # cuDNN's default, as the page says
    assert snippet.read_trace(path).fp32_products == 0
    precision.cudnn.conv.fp32_precision = "ieee"
    assert snippet.read_trace(path).fp32_products == 1


def test_autocast_takes_the_products_out_of_float32(snippet, tmp_path):
    path = tmp_path / "autocast.json"
    x, y = snippet.batch()

    def autocast_step():
        with torch.autocast(snippet.device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(snippet.model(x), y)
        loss.backward()

    snippet.take_trace(path, autocast_step)
    symptoms = snippet.read_trace(path)
    assert symptoms.products >= 2 and symptoms.fp32_products == 0
    assert not any("float32" in b for b in snippet.where_to_look(symptoms))


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_on_a_gpu_the_page_step_leaves_the_gpu_waiting(snippet, real_trace):
    # The step is small: each kernel takes microseconds and the host, which makes the batch
    # and reads the loss, keeps the GPU waiting.
    _, path = real_trace
    symptoms = snippet.read_trace(path)
    assert symptoms.kernels > 0 and symptoms.tiny_kernels > 0
    branches = snippet.where_to_look(symptoms)
    assert branches[0] == "the GPU waits: data loading, synchronizations", symptoms


# --- A synthetic trace whose answer is known ---------------------------------------------------

def event(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1,
            "args": args}


def write(tmp_path, events):
    path = tmp_path / "synthetic.json"
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    return path


def test_idle_gaps_and_tiny_kernels_are_measured_from_the_gpu_rows(snippet, tmp_path):
    events = [
        event("user_annotation", "ProfilerStep#1", 0, 500),
        event("user_annotation", "ProfilerStep#2", 500, 500),
        event("kernel", "gemm", 0, 100, **{"External id": 7}),  # launched by the float mm
        event("kernel", "gemm", 50, 100, **{"External id": 8}),  # overlap: 150 busy
        event("kernel", "add", 400, 5), event("kernel", "add", 406, 3),  # two tiny ones
        event("gpu_memcpy", "Memcpy HtoD", 900, 100),  # a copy keeps the GPU busy too
        event("cpu_op", "aten::mm", 10, 20, **{"Input type": ["float", "float"],
                                               "External id": 7}),
        event("cpu_op", "aten::mm", 30, 20, **{"Input type": ["c10::BFloat16"] * 2,
                                               "External id": 8}),
        event("cpu_op", "aten::add", 50, 5, **{"Input type": ["float", "float"]}),
    ]
    s = snippet.read_trace(write(tmp_path, events))
    assert s.span_us == 1000 and s.gpu_busy_us == 150 + 5 + 3 + 100
    assert s.gpu_idle_share == pytest.approx(1 - 258 / 1000)
    assert s.longest_gaps_us == [900 - 409, 400 - 150, 406 - 405]
    assert (s.kernels, s.tiny_kernels) == (4, 2)
    assert (s.kernel_us, s.tiny_kernel_us) == (100 + 100 + 5 + 3, 5 + 3)
    assert s.tiny_kernel_share == pytest.approx(8 / 208)
    assert (s.products, s.fp32_products, s.fp32_product_us) == (2, 1, 100)


def symptoms(snippet, **changes):
    healthy = dict(span_us=1000, gpu_busy_us=990, longest_gaps_us=[], kernels=100,
                   tiny_kernels=1, kernel_us=990, tiny_kernel_us=5, products=10,
                   fp32_products=0, fp32_product_us=0)
    return snippet.Symptoms(**{**healthy, **changes})


BUSY = "the GPU is busy: compare with its peak, then more GPUs"


def test_the_decision_tree_takes_every_branch_that_applies(snippet):
    assert snippet.where_to_look(symptoms(snippet)) == [BUSY]
    # a launch-bound step: tiny kernels and the GPU idle between them take both branches
    assert snippet.where_to_look(symptoms(snippet, gpu_busy_us=100, kernel_us=100,
                                          tiny_kernel_us=90, fp32_products=3,
                                          fp32_product_us=5)) == [
        "the GPU waits: data loading, synchronizations",
        "tiny kernels: CUDA graphs, fusion",
        "float32 products: TF32, bf16 autocast"]
    assert snippet.where_to_look(symptoms(snippet, tiny_kernel_us=900)) == [
        "tiny kernels: CUDA graphs, fusion"]


def test_the_branches_are_ranked_by_their_share_of_the_step(snippet):
    # idle a quarter of the step, strict float32 products half of it: the products come first
    s = symptoms(snippet, gpu_busy_us=750, fp32_products=4, fp32_product_us=500)
    assert snippet.where_to_look(s) == ["float32 products: TF32, bf16 autocast",
                                        "the GPU waits: data loading, synchronizations"]
    s = symptoms(snippet, gpu_busy_us=400, fp32_products=4, fp32_product_us=300)
    assert snippet.where_to_look(s) == ["the GPU waits: data loading, synchronizations",
                                        "float32 products: TF32, bf16 autocast"]


def test_many_tiny_kernels_that_take_little_of_the_time_are_no_tiny_kernel_step(snippet):
    # Counted, nine kernels in ten are tiny; timed, they are a tenth of the GPU's work.
    few_long = symptoms(snippet, tiny_kernels=90, tiny_kernel_us=99)
    assert few_long.tiny_kernel_share == pytest.approx(0.1)
    assert snippet.where_to_look(few_long) == [BUSY]


def test_the_busy_branch_is_what_remains_and_says_to_compare_with_the_peak():
    busy = sections(PAGE.read_text(encoding="utf-8"))["the-gpu-is-busy"]
    assert "whenever nothing else" in busy and "peak" in busy and "more speed" not in busy


def test_the_page_names_the_settings_the_reader_reads_for_tf32(snippet):
    text = PAGE.read_text(encoding="utf-8")
    code = (ROOT / "snippets" / "start_here" / "slow_training.py").read_text(encoding="utf-8")
    assert "cannot show whether TF32 was on" in text
    for setting in ("torch.backends.cuda.matmul.fp32_precision",
                    "torch.backends.cudnn.conv.fp32_precision"):
        assert setting in text and setting in code, setting


def test_a_file_that_is_no_trace_gets_an_error_naming_it_and_the_fix(snippet, tmp_path):
    wrong = tmp_path / "notes.txt"
    wrong.write_text("not json", encoding="utf-8")
    with pytest.raises(ValueError, match=r"notes\.txt: not a trace .*take_trace"):
        snippet.read_trace(wrong)
    unstepped = write(tmp_path, [event("kernel", "gemm", 0, 10)])
    with pytest.raises(ValueError, match=r"synthetic\.json: no ProfilerStep.*prof\.step\(\)"):
        snippet.read_trace(unstepped)


# --- The page: each branch links the page that measures its fix ----------------------------------

BRANCH_PAGES = {
    "the-gpu-waits": {"data-movement/data-loading.md", "execution/async-execution.md"},
    "many-tiny-kernels": {"execution/cuda-graphs.md"},
    "matrix-products-in-float32": {"precision/tensor-cores-and-shapes.md",
                                   "precision/mixed-precision-training.md"},
    "out-of-memory": {"memory/out-of-memory-errors.md", "memory/memory-over-time.md"},
    "the-gpu-is-busy": {"several-gpus/ddp-with-torchrun.md",
                        "precision/tensor-cores-and-shapes.md"},
}


def sections(markdown: str) -> dict[str, str]:
    """Each `##`/`###` heading's slug (as the toc extension makes it) -> its text."""
    parts = re.split(r"^#{2,3} (.+)$", markdown, flags=re.M)
    return {re.sub(r"[^\w]+", "-", title.lower()).strip("-"): body
            for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_every_branch_links_the_published_pages_with_its_fix():
    found = sections(PAGE.read_text(encoding="utf-8"))
    for slug, pages in BRANCH_PAGES.items():
        assert slug in found, f"no section {slug!r} on the page: {sorted(found)}"
        linked = {m.removeprefix("../") for m in re.findall(r"\]\(([^)#]+\.md)", found[slug])}
        assert pages <= linked, f"{slug}: links {sorted(linked)}, not {sorted(pages - linked)}"
        for page in pages:
            assert not is_draft(ROOT / "docs" / page), f"{slug} links the draft {page}"
        assert "<!-- timing-" in found[slug], f"{slug} shows no measured gain"
