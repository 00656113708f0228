"""Claims of docs/start-here/slow-training.md: the profiler's summary has the columns the page
names, the trace reader finds the symptoms the decision tree branches on (in a real CPU trace and
in a synthetic GPU trace whose answer is known), and every branch links a published page."""

import json
import re

import pytest
import torch

from fieldguide import ROOT
from fieldguide.content.pages import is_draft

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
    if snippet.device.type == "cpu":  # a CPU trace holds no GPU work, so no shares
        assert symptoms.kernels == 0 and symptoms.gpu_busy_us == 0
        assert snippet.where_to_look(symptoms) == [(None, snippet.FP32)]


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
    assert snippet.FP32 not in branches(snippet, symptoms)


def test_convolutions_count_as_float32_only_when_cudnn_tf32_is_off(snippet, tmp_path,
                                                                   precision):
    events = [event("user_annotation", "ProfilerStep#1", 0, 100),
              event("cpu_op", "aten::convolution", 10, 20, **{"Input type": ["float"] * 3})]
    path = write(tmp_path, events)
    assert precision.cudnn.conv.fp32_precision == "tf32"  # cuDNN's default, as the page says
    assert snippet.read_trace(path).fp32_products == 0
    precision.cudnn.conv.fp32_precision = "ieee"
    assert snippet.read_trace(path).fp32_products == 1


def test_a_convolution_nets_products_are_counted_once_each_way(snippet, tmp_path,
                                                               precision):
    # aten::convolution (forward, its kernels launched under aten::cudnn_convolution on a
    # GPU) and aten::convolution_backward, each counted once though nested ops run below
    conv = torch.nn.Conv2d(3, 8, 3).to(snippet.device)
    x = torch.randn(4, 3, 16, 16, device=snippet.device)
    precision.cudnn.conv.fp32_precision = "ieee"  # strict float32 convolutions
    path = tmp_path / "conv.json"
    snippet.take_trace(path, lambda: conv(x).square().mean().backward())
    s = snippet.read_trace(path)
    assert s.products == s.fp32_products == 3 * 2, s  # three recorded steps
    if snippet.device.type == "cuda":  # the kernels found under their ops, both ways
        assert s.fp32_product_us > 0, s


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
    assert snippet.FP32 not in branches(snippet, symptoms)


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_on_a_gpu_the_page_step_leaves_the_gpu_waiting(snippet, real_trace):
    # The step is small: each kernel takes microseconds and the host, which makes the batch
    # and reads the loss, keeps the GPU waiting.
    _, path = real_trace
    symptoms = snippet.read_trace(path)
    assert symptoms.kernels > 0 and symptoms.tiny_kernels > 0
    assert symptoms.gpu_idle_share > 0.5, symptoms
    found = branches(snippet, symptoms)
    assert found and found[0] in (LAUNCH, SYNC), symptoms
    assert snippet.FP32 not in found, symptoms  # a few µs of products: below MIN_SHARE


# --- Synthetic traces whose answer is known ----------------------------------------------------

SYNC, HOST, LAUNCH, OTHER = (
    "the GPU waits while the host synchronizes: read metrics every N steps",
    "the GPU waits for host work: DataLoader workers, pinned memory",
    "tiny kernels, launched one by one: CUDA graphs, fusion",
    "idle for a reason one trace cannot show: HTA, Nsight Systems")
BUSY = "the GPU is busy: compare with its peak, then more GPUs"


def branches(snippet, symptoms):
    return [branch for _, branch in snippet.where_to_look(symptoms)]


def event(cat, name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid,
            "args": args}


def launched(correlation, call_ts, ts, dur, name="kernel", cat="kernel", tid=1):
    """A kernel (or copy) on stream 7 and the host call that launched it, on thread `tid`."""
    return [event("cuda_runtime", "cudaLaunchKernel", call_ts, 2, tid=tid,
                  correlation=correlation),
            {**event(cat, name, ts, dur, correlation=correlation), "pid": 0, "tid": 7}]


def write(tmp_path, events):
    path = tmp_path / "synthetic.json"
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    return path


def test_idle_time_is_split_by_what_the_host_did_during_each_gap(snippet, tmp_path):
    events = [
        event("user_annotation", "ProfilerStep#1", 0, 1000),
        event("cpu_op", "aten::mm", 0, 10, **{"Input type": ["float", "float"]}),
        *launched(1, 1, 0, 100, "gemm"),          # busy 0-100, under the float32 mm
        *launched(2, 20, 103, 97),                # queued early: 3 µs of kernel wait
        *launched(3, 250, 300, 20),               # launched after the GPU ran dry at 200,
        event("cpu_op", "aten::add", 248, 5),     # with nothing but launching on the host
        event("cuda_runtime", "cudaStreamSynchronize", 310, 20),  # the host waits ...
        *launched(4, 480, 500, 10),               # ... and only then launches: a sync gap
        event("cpu_op", "aten::randn", 520, 240),  # making a batch, no launch: host work
        *launched(5, 790, 800, 10, "Memcpy HtoD", cat="gpu_memcpy"),
        *launched(6, 770, 900, 100),              # launched long before, yet 90 µs idle
    ]
    s = snippet.read_trace(write(tmp_path, events))
    assert s.span_us == 1000 and s.gpu_busy_us == 100 + 97 + 20 + 10 + 10 + 100
    assert s.idle_us == {"kernel wait": 3, "launch": 100, "sync": 180, "host work": 290,
                         "other": 90}
    assert s.gpu_idle_share == pytest.approx(1 - 337 / 1000)
    assert s.longest_gaps_us == [290, 180, 100]
    assert (s.kernels, s.tiny_kernels) == (5, 0)
    assert (s.products, s.fp32_products, s.fp32_product_us) == (1, 1, 100)
    assert snippet.where_to_look(s) == [(0.29, HOST), (0.18, SYNC),
                                        (pytest.approx(0.103), LAUNCH),
                                        (0.1, snippet.FP32)]  # other: 9 %, below 10 %


def test_a_launch_call_still_running_when_the_gpu_ran_dry_is_launch_not_other(
        snippet, tmp_path):
    # HTA counts a queued gap over its threshold as other, launch delays included; the
    # reader gives the gap to launch when the launch call had not returned as the GPU ran
    # dry (as in every queued gap over KERNEL_WAIT_US of the H200 example traces).
    slow_call = event("cuda_runtime", "cudaLaunchKernel", 40, 30, correlation=2)
    events = [event("user_annotation", "ProfilerStep#1", 0, 200),
              *launched(1, 0, 0, 50),
              slow_call, {**event("kernel", "k", 75, 10, correlation=2), "pid": 0, "tid": 7},
              *launched(3, 60, 120, 80)]  # returned at 62, long before the GPU ran dry
    s = snippet.read_trace(write(tmp_path, events))
    assert s.idle_us == {"sync": 0, "host work": 0, "launch": 25, "kernel wait": 0,
                         "other": 35}


def test_a_launch_bound_step_is_tiny_kernels_not_waits(snippet, tmp_path):
    # Each 4 µs kernel is launched 20 µs after the one before has ended: the host row
    # between them holds the next operator, which launches; no synchronization, no batch.
    events = [event("user_annotation", "ProfilerStep#1", 0, 24 * 40)]
    for i in range(40):
        events += launched(i, 24 * i + 20, 24 * i + 20, 4, "elementwise")
        events.append(event("cpu_op", "aten::mul", 24 * i + 5, 16))
    s = snippet.read_trace(write(tmp_path, events))
    assert (s.kernels, s.tiny_kernels) == (40, 40)
    assert s.idle_us["launch"] == 39 * 20 and s.idle_us["sync"] == s.idle_us["host work"] == 0
    assert branches(snippet, s) == [LAUNCH]


def test_convolution_kernels_count_under_the_op_that_launched_them_at_any_depth(
        snippet, tmp_path, precision):
    # The kernel's External id would name aten::cudnn_convolution (the innermost op), the
    # backward one aten::convolution_backward: both are matched, by time on the host thread.
    float3 = {"Input type": ["float"] * 3}
    events = [event("user_annotation", "ProfilerStep#1", 0, 400),
              event("cpu_op", "aten::convolution", 0, 60, **float3),
              event("cpu_op", "aten::_convolution", 2, 56, **float3),
              event("cpu_op", "aten::cudnn_convolution", 4, 50, **float3),
              *launched(1, 10, 10, 100, "cudnn conv fprop"),
              event("cpu_op", "aten::convolution_backward", 150, 50, tid=2, **float3),
              *launched(2, 160, 160, 200, "cudnn conv dgrad", tid=2)]
    path = write(tmp_path, events)
    precision.cudnn.conv.fp32_precision = "ieee"  # strict float32 convolutions
    s = snippet.read_trace(path)
    assert (s.products, s.fp32_products, s.fp32_product_us) == (2, 2, 300)
    assert branches(snippet, s)[0] == snippet.FP32
    precision.cudnn.conv.fp32_precision = "tf32"  # cuDNN's default
    s = snippet.read_trace(path)
    assert (s.products, s.fp32_products, s.fp32_product_us) == (2, 0, 0)


def symptoms(snippet, **changes):
    healthy = dict(span_us=1000, gpu_busy_us=990, longest_gaps_us=[], kernels=100,
                   tiny_kernels=1, products=10, fp32_products=0, fp32_product_us=0,
                   idle_us={"sync": 0, "host work": 0, "launch": 5, "kernel wait": 5,
                            "other": 0})
    return snippet.Symptoms(**{**healthy, **changes})


def idle(**us):
    return {"sync": 0, "host work": 0, "launch": 0, "kernel wait": 0, "other": 0,
            **{cause.replace("_", " "): t for cause, t in us.items()}}


def test_each_branch_is_taken_from_its_own_share_of_the_step(snippet):
    assert branches(snippet, symptoms(snippet)) == [BUSY]
    for causes, branch in [({"sync": 300}, SYNC), ({"host_work": 300}, HOST),
                           ({"launch": 200, "kernel_wait": 100}, LAUNCH),
                           ({"other": 300}, OTHER)]:
        s = symptoms(snippet, gpu_busy_us=700, idle_us=idle(**causes))
        assert snippet.where_to_look(s) == [(pytest.approx(0.3), branch)]
    s = symptoms(snippet, fp32_products=4, fp32_product_us=500)
    assert snippet.where_to_look(s) == [(0.5, snippet.FP32)]


def test_the_branches_are_ranked_by_their_share_of_the_step(snippet):
    s = symptoms(snippet, gpu_busy_us=250, fp32_products=4, fp32_product_us=200,
                 idle_us=idle(sync=250, launch=500))
    assert branches(snippet, s) == [LAUNCH, SYNC, snippet.FP32]


def test_a_branch_below_the_minimum_share_is_not_listed(snippet):
    # float32 products of 2 % of the step and a 5 % host wait are not where the time goes
    s = symptoms(snippet, gpu_busy_us=300, fp32_products=5, fp32_product_us=20,
                 idle_us=idle(launch=650, host_work=50))
    assert snippet.MIN_SHARE == 0.1
    assert branches(snippet, s) == [LAUNCH]
    assert branches(snippet, symptoms(snippet, fp32_products=5, fp32_product_us=99)) == [BUSY]


def test_many_tiny_kernels_on_a_busy_gpu_are_no_tiny_kernel_step(snippet):
    # Counted, nine kernels in ten are tiny; but the GPU never waits for a launch.
    assert branches(snippet, symptoms(snippet, tiny_kernels=90)) == [BUSY]

# --- The page's example, as each GPU recorded it -----------------------------------------------

# The runs recorded before the reader split idle time by cause (code of ad7e48b and 6a4933d):
# they kept what the trace showed, not the trace. The old reader listed "float32 products"
# on both GPUs, and "tiny kernels" on the H100 only (57 % of the kernels' time, against
# 49 % on the H200, around its threshold of half).
BEFORE = ["nvidia-h100-80gb-hbm3/20261127T015637Z_ad7e48bf00.json",
          "nvidia-h100-80gb-hbm3/20261127T020140Z_ad7e48bf00.json",
          "nvidia-h200/20261128T144327Z_6a4933de4f.json"]


def recorded_before():
    for name in BEFORE:
        run = json.loads((ROOT / "timings" / name).read_text(encoding="utf-8"))
        yield name, next(b["extra_info"] for b in run["benchmarks"]
                         if b["name"] == "bench_trace"
                         and "slow_training" in b["fullname"])


def test_the_example_float32_products_are_below_the_minimum_share_on_both_gpus(snippet):
    # The same code gives the same answer on both GPUs: its strict float32 products,
    # matched to their kernels (gemm kernels run under aten::mm and aten::addmm themselves),
    # took about 2 % of the step, a fifth of MIN_SHARE.
    gpus = set()
    for name, extra in recorded_before():
        assert extra["fp32_products"] == extra["products"] == 15, name
        assert extra["fp32_product_pct"] < 100 * snippet.MIN_SHARE / 4, (name, extra)
        gpus.add(name.split("/")[0])
    assert len(gpus) == 2


def test_the_example_is_idle_between_kernels_well_beyond_its_longest_gaps(snippet):
    # The tiny-kernel branch is judged by the idle time it costs. On both GPUs most of the
    # step is idle outside the longest gap of each step (that is where the loss is read):
    # the share of the step left for the launch gaps stays far from MIN_SHARE on both.
    for name, extra in recorded_before():
        run = json.loads((ROOT / "timings" / name).read_text(encoding="utf-8"))
        step_us = 1e6 * next(b["stats"]["median"] for b in run["benchmarks"]
                             if "slow_training" in b["fullname"])
        # the unprofiled step is the shorter: the longest gaps take at most this share
        outside = extra["gpu_idle_pct"] / 100 - extra["longest_gap_us"] / step_us
        assert outside > 4 * snippet.MIN_SHARE, (name, outside)


def example_traces(tmp_path):
    """(run, its extra_info, a trace file of the events it kept) for every committed run of
    slow_training.trace on every GPU that kept them, whatever reader version took them: the
    events are the GPU's, and the reader as it is now reads them again."""
    from fieldguide.measuring.timings import all_timings

    for timings in all_timings(ROOT / "timings"):
        if "slow_training.trace" not in timings.names:
            continue
        bench = timings.benchmark("slow_training.trace")
        for record in [*bench.superseded, *bench.records]:
            if "trace_events" not in record.extra:
                continue
            path = tmp_path / f"{record.run.id}.json"
            path.write_text(json.dumps({"traceEvents": record.extra["trace_events"]}),
                            encoding="utf-8")
            yield f"{timings.slug}/{record.run.id}", record.extra, path


def test_the_example_trace_of_every_gpu_takes_the_same_branches(snippet, tmp_path):
    # Read again from the events each run kept, with the reader as it is now: the same
    # branches on every run and GPU, the first the launches (a launch-bound step), and the
    # float32 products (a few µs each) never among them.
    found = {}
    for run, extra, path in example_traces(tmp_path):
        s = snippet.read_trace(path)
        names = branches(snippet, s)
        assert s.gpu_idle_share == pytest.approx(extra["gpu_idle_pct"] / 100), run
        assert snippet.FP32 not in names and names[0] == LAUNCH, (run, names)
        found[run] = names
    assert len(found) >= 2 and len({tuple(n) for n in found.values()}) == 1, found


def test_the_example_trace_table_sentence_holds_on_every_run(measured):
    """The page's sentence under the example trace's table: idle most of the step, the
    launches' waits more than host work and synchronizing together, tiny kernels first."""
    for run in measured("slow_training.trace"):
        extra = run.record("slow_training.trace").extra
        assert extra["gpu_idle_pct"] > 50, str(run)
        assert extra["launch_wait_pct"] > extra["host_work_pct"] + extra["sync_wait_pct"], \
            str(run)
        assert extra["branches"].split(" / ")[0].startswith("tiny kernels"), str(run)
        # profiled, the step is longer than the timed median (the profiler's host time)
        assert extra["profiled_step_us"] > 1e6 * run.value("slow_training.trace", "median"), \
            str(run)


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


# --- The page's few lines, and its drawing of the decision procedure ------------------------

def test_the_few_lines_on_the_page_take_read_and_list_the_branches(snippet, tmp_path,
                                                                     monkeypatch, capsys):
    """The `use` section, run as the page shows it (in a folder of its own), prints the
    summary and one line per branch where_to_look lists; the import its comment names works."""
    import importlib

    from fieldguide.content.snippets import sections

    code = sections(ROOT / "snippets/start_here/slow_training.py")["use"]
    assert len(code.splitlines()) <= 8, "a few lines, not the reader's code"
    imported = re.search(r"# from slow_training import (.+)", code)[1].split(", ")
    module = importlib.import_module("snippets.start_here.slow_training")
    assert all(hasattr(module, name) for name in imported), imported
    monkeypatch.chdir(tmp_path)
    exec(code, dict(vars(snippet)))  # noqa: S102 (the page's section, as the notebook runs it)
    printed = capsys.readouterr().out
    listed = snippet.where_to_look(snippet.read_trace(tmp_path / "trace.json"))
    assert listed, "the page's step shows at least one branch"
    looks = [line for line in printed.splitlines() if line.startswith("Look at: ")]
    assert [line.split(" (")[0] for line in looks] == [f"Look at: {b}" for _, b in listed]


def test_the_drawn_decision_procedure_is_where_to_look_s(snippet):
    """fieldguide/rendering/diagrams.py draws the branches of where_to_look, in its order, each with
    its causes and where to look; and the busy branch for a trace where none is listed."""
    from fieldguide.rendering.diagrams import DECISION_BUSY, DECISION_ROWS, DIAGRAMS

    def flat(text):
        return " ".join(text.split())

    branches = [*snippet.BRANCHES.items(), (snippet.FP32, None)]
    assert len(DECISION_ROWS) == len(branches)
    for (symptom, where, _), (branch, causes) in zip(DECISION_ROWS, branches, strict=True):
        assert branch.endswith(": " + flat(where)), (branch, where)
        if causes:
            assert flat(symptom).endswith(f"({', '.join(causes)})"), (symptom, causes)
    assert snippet.BUSY.split(": ", 1)[1] in flat(DECISION_BUSY)
    assert "MIN_SHARE" in DIAGRAMS["slow-step-decision"].description


def test_the_real_job_sentences_hold_on_every_run(measured, snippet):
    """'One real job, read before and after': the baseline busy, in float32 products (its
    only branch); TF32 (step 3) faster than step 2; step 7 waits on launches, first."""
    steps = [f"training_made_fast.step[{s}]" for s in
             ("0-baseline", "2-read-every", "3-tf32", "7-compile")]
    for run in measured(*steps):
        base, before, tf32, last = (run.record(s).extra for s in steps)
        assert base["gpu_idle_pct"] < 100 * snippet.MIN_SHARE, str(run)
        assert base["branches"] == snippet.FP32, str(run)
        assert run.value(steps[2], "per_op") < run.value(steps[1], "per_op"), str(run)
        assert tf32["fp32_product_pct"] == 0 < before["fp32_product_pct"], str(run)
        assert last["branches"].split(" / ")[0] == LAUNCH, str(run)
