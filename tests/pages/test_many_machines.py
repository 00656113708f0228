"""Claims of docs/several-gpus/many-machines.md: the page's own commands, run for real.

- The block "on every machine", started twice on this host: two torchrun "nodes" that meet
  through the c10d rendezvous over loopback (gloo on CPU processes; NCCL with one GPU per
  "node" where the machine has two).
- The block "train.sbatch", submitted with the overrides the page states ("how the tests submit
  it") to a real Slurm: slurmctld, slurmd and munged on this machine (tests/slurm/cluster.py).

Both run the page-3 training script, saved as train.py, as the page says.
"""

import contextlib
import os
import pickle
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch

from tests.helpers import reserved_port
from tests.slurm import cluster

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/several-gpus/many-machines.md"
SCRIPT = ROOT / "snippets/several_gpus/ddp_with_torchrun.py"
FENCE = re.compile(r'^```(?P<lang>\w+) title="(?P<title>[^"]+)"\n(?P<body>.*?)^```\s*$', re.M | re.S)
TIMEOUT = 240  # seconds: a rendezvous that never completes fails the test instead of hanging CI

pytestmark = pytest.mark.snippet("snippets/several_gpus/ddp_with_torchrun.py")

CLAIMS = {
    "dead_node_job_end_s": 30,  # a job whose node's processes died has ended within this, at most
}


def page_block(title: str) -> str:
    found = {m["title"]: m["body"] for m in FENCE.finditer(PAGE.read_text(encoding="utf-8"))}
    assert title in found, f"{PAGE.name} has no code block titled {title!r}"
    return found[title]


@pytest.fixture
def workdir(tmp_path):
    """A folder with the page-3 script as train.py, and `torchrun` for this interpreter first
    on PATH (torchrun is `python -m torch.distributed.run`; this pins the interpreter)."""
    shutil.copy(SCRIPT, tmp_path / "train.py")
    return with_torchrun(tmp_path)


def with_torchrun(folder: Path) -> Path:
    """`folder`, with bin/torchrun in it for this interpreter (the stress check uses it too)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    launcher = bin_dir / "torchrun"
    launcher.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m torch.distributed.run "$@"\n')
    launcher.chmod(0o755)
    return folder


def path_with(workdir: Path, path: str) -> str:
    return os.pathsep.join([str(workdir / "bin"), path])


def epoch_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("epoch ")]


def test_the_page_states_its_blocks():
    assert "--rdzv-backend c10d" in page_block("on every machine")
    script = page_block("train.sbatch")
    assert script.startswith("#!/bin/bash\n")
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1' in script
    assert "--ntasks-per-node=1" in script and "--gpus-per-node=" in script
    assert "srun " in script and "--rdzv-id \"$SLURM_JOB_ID\"" in script


# --- Two "nodes" on one machine ------------------------------------------------------------------

@pytest.mark.fresh_interpreter
def test_two_nodes_meet_over_loopback(workdir):
    try:
        nodes, outputs = two_nodes(workdir, page_block("on every machine"))
    except NodesHung as exc:
        pytest.fail(str(exc), pytrace=False)
    two_gpus = torch.cuda.device_count() >= 2
    for node, (_, err) in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, err[-3000:]
    printed = [epoch_lines(out) for out, _ in outputs]
    # rank 0 printed three epochs: on the node with the lower pid (the same host for both),
    # which arrived last
    assert nodes[0].pid < nodes[1].pid
    assert [len(lines) for lines in printed] == [3, 0], printed
    lines = printed[0]
    backend = "nccl" if two_gpus else "gloo"
    assert all("2 process(es)" in line and backend in line for line in lines), lines
    checkpoint = torch.load(workdir / "ckpt.pt", weights_only=True, map_location="cpu")
    assert checkpoint["epoch"] == 2


class NodesHung(Exception):
    """Two "nodes" still running at the time limit: what each printed, and where each was."""


def two_nodes(workdir: Path, command: str, delay_s: float = 3, timeout: float = TIMEOUT):
    """The page's command started as two "nodes" in `workdir` (its train.py, its bin/torchrun):
    returns the two Popen and what each printed (stdout, stderr); raises NodesHung."""
    with reserved_port() as head_port:  # held until both nodes have ended
        return _two_nodes(workdir, command, delay_s, timeout, head_port)


def _two_nodes(workdir: Path, command: str, delay_s: float, timeout: float, head_port: int):
    two_gpus = torch.cuda.device_count() >= 2
    env = {**os.environ, "HEAD_NODE": "127.0.0.1", "HEAD_PORT": str(head_port),
           "GPUS_PER_NODE": "1", "JOB_ID": f"loopback-{os.getpid()}",
           "PATH": path_with(workdir, os.environ.get("PATH", ""))}
    nodes = []
    for node in range(2):
        # one GPU per "node" where there are two; else none (two processes on one GPU would
        # both pick it, and NCCL refuses that), and the script falls back to gloo on the CPU
        node_env = {**env, "CUDA_VISIBLE_DEVICES": str(node) if two_gpus else ""}
        if not two_gpus:
            # One thread per CPU "node", as torchrun sets for several workers on a machine: left
            # at one per core, both nodes' threads spin against each other and the other test
            # workers (85 s on a 16-core GPU machine with 6 workers busy, 8 s alone on 2 cores).
            node_env["OMP_NUM_THREADS"] = "1"
        # The first "node" (the lower pid) arrives delay_s after the second: ranks follow the
        # sorted (host, pid) of the agents, not the order of arrival.
        delayed = f"sleep {delay_s}; exec {command}" if node == 0 and delay_s else command
        nodes.append(subprocess.Popen(["bash", "-c", delayed], cwd=workdir, env=node_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    try:
        outputs = [node.communicate(timeout=timeout) for node in nodes]
    except subprocess.TimeoutExpired:
        # torchrun starts its workers in sessions of their own: find them through the tree.
        processes = [p for node in nodes for p in tree(node.pid)]
        stacks = hung_stacks(processes)
        for process in processes:
            with contextlib.suppress(psutil.Error):
                process.kill()
        printed = [node.communicate(timeout=30) for node in nodes]
        raise NodesHung(
            f"hung: the two nodes had not finished after {timeout} s (8 s on an idle 2-core "
            "machine).\n" + "\n".join(
                f"--- node {n} (pid {node.pid}), stdout:\n{out[-2000:]}\nstderr:\n{err[-4000:]}"
                for n, (node, (out, err)) in enumerate(zip(nodes, printed, strict=True)))
            + f"\n--- where their processes were (py-spy dump):\n{stacks}") from None
    finally:
        for node in nodes:
            if node.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.pid, signal.SIGKILL)
                node.wait()
    return nodes, outputs


def tree(pid: int) -> list:
    """The process and all its descendants (psutil.Process), the process first."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def py_spy() -> str | None:
    """py-spy beside this Python, on PATH, or in DIR/bin for a DIR of PYTHONPATH: where
    `pip install --target DIR` puts it (a GPU machine's carried wheels, Makefile gpu-wheels)."""
    carried = [str(Path(p) / "bin") for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return shutil.which("py-spy", path=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", ""), *carried]))


def hung_stacks(processes) -> str:
    """Each Python process among them, as py-spy sees it (when py-spy is there)."""
    spy = py_spy()
    if not spy:
        return "(py-spy is not installed)"
    dumps = []
    for process in processes:   # py-spy says so of a process that runs no Python
        try:
            dump = subprocess.run([spy, "dump", "--pid", str(process.pid)], capture_output=True,
                                  text=True, timeout=30)
            dumps.append(f"pid {process.pid} ({' '.join(process.cmdline())[:120]}):\n"
                         f"{(dump.stdout or dump.stderr)[-3000:]}")
        except (psutil.Error, subprocess.TimeoutExpired) as exc:
            dumps.append(f"pid {process.pid}: no dump ({exc!r})")
    return "\n".join(dumps)


# --- Slurm ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def slurm():
    """A running Slurm cluster of two nodes on this machine, or of one where this Slurm cannot
    run two slurmd side by side. `make test` sets FIELDGUIDE_REQUIRE_SLURM=1 after `make slurm`
    installed it, so there a cluster that cannot start at all is a failure, not a skip."""
    stack = contextlib.ExitStack()
    problems = []
    for nodes in (2, 1):
        try:
            running = stack.enter_context(cluster.local_cluster(nodes=nodes, cpus=1))
            break
        except cluster.ClusterUnavailable as exc:
            problems.append(f"{nodes} node(s): {exc}")
    else:
        if os.environ.get("FIELDGUIDE_REQUIRE_SLURM") == "1":
            pytest.fail("Slurm could not start:\n" + "\n".join(problems))
        pytest.skip("no Slurm cluster could start here: " + "; ".join(problems))
    running.problems = problems  # why a two-node cluster was not possible, if it was not
    with stack:
        yield running


def submit_command() -> tuple[dict[str, str], list[str], list[str]]:
    """The environment, sbatch options and script arguments of the page's "how the tests
    submit it" line."""
    words = shlex.split(page_block("how the tests submit it").strip())
    env = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[0] == "sbatch" and "train.sbatch" in words, words
    script = words.index("train.sbatch")
    return env, words[1:script], words[script + 1:]


@pytest.fixture
def rdzv_port():
    """A port for the jobs' rendezvous, held for them until the test ends (reserved_port)."""
    with reserved_port() as port:
        yield port


class SlurmRun:
    """The page's train.sbatch in a folder with train.py, submitted the page's way; its jobs'
    rendezvous on `rdzv_port` (one job at a time)."""

    def __init__(self, slurm, workdir: Path, rdzv_port: int):
        self.slurm, self.workdir = slurm, workdir
        (workdir / "train.sbatch").write_text(page_block("train.sbatch"))
        env, self.options, self.arguments = submit_command()
        assert env == {"PROCS_PER_NODE": "1"} and "--gpus-per-node=0" in self.options
        if len(slurm.nodes) == 1:  # the page's fallback: one node, both workers on it
            self.options, env = ["--nodes=1", *self.options], {"PROCS_PER_NODE": "2"}
        # a cluster without GPUs: hide any this machine has, as Slurm does on a node without
        # them; one thread per worker (two nodes share this machine's cores)
        self.env = {**env, "PATH": path_with(workdir, slurm.env["PATH"]),
                    "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1",
                    "RDZV_PORT": str(rdzv_port)}

    def submit(self, *arguments: str) -> cluster.Job:
        """Submit with the page's options; `arguments` (train.py's) replace the page's."""
        return self.slurm.submit(*self.options, "train.sbatch", *(arguments or self.arguments),
                                 cwd=self.workdir, env=self.env)

    def output(self, job: cluster.Job) -> str:
        path = self.workdir / f"ddp-train-{job.id}.out"
        return path.read_text() if job.id and path.is_file() else ""

    def wait_for_output(self, job: cluster.Job, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output(job):
            assert time.monotonic() < deadline, f"no {text!r} after {timeout} s:\n{self.report(job)}"
            time.sleep(0.2)

    def report(self, job: cluster.Job) -> str:
        logs = "\n".join(f"{name}:\n{self.slurm.log(name)}" for name in
                         ["slurmctld.log", *(f"slurmd-{n}.log" for n in self.slurm.nodes)])
        output = self.output(job)
        if len(output) > 6000:  # a failed rank's traceback comes first, torchrun's report last
            output = f"{output[:3000]}\n[...]\n{output[-3000:]}"
        return (f"job {job.id}: {job.state} {job.exit_code} {job.submitted}\n"
                f"job output:\n{output}\n{logs}")

    def checkpoint_epoch(self) -> int:
        return torch.load(self.workdir / "ddp-train.pt", weights_only=True)["epoch"]


def test_the_page_states_a_stable_checkpoint_and_the_hardening():
    script = page_block("train.sbatch")
    assert 'checkpoint="$SLURM_SUBMIT_DIR/$SLURM_JOB_NAME.pt"' in script  # not the job id
    assert "srun --kill-on-bad-exit=1 --wait=60 " in script
    assert "--max-restarts 3" in script
    assert "#SBATCH --signal=B:USR1@300" in script and "#SBATCH --requeue" in script
    assert 'scontrol requeue "$SLURM_JOB_ID"' in script


def test_sbatch_script_trains_a_resubmitted_job_resumes_and_near_the_limit_requeues(
        slurm, workdir, rdzv_port):
    """The page's job trains 3 epochs. Submitted again with more, it resumes from the same
    checkpoint; then `--signal=B:USR1@300`, which sends USR1 five minutes before the time limit,
    is sent by the test as soon as its first epoch is done, as Slurm would: the job saves,
    requeues itself and resumes, every epoch once. (One job checks both the resubmission and
    the requeue: a job of its own cost 4 more Pythons importing torch under Slurm, and its
    wait.)"""
    run = SlurmRun(slurm, workdir, rdzv_port)
    first = slurm.wait(run.submit())
    assert (first.state, first.exit_code) == ("COMPLETED", "0:0"), run.report(first)
    lines = epoch_lines(run.output(first))
    assert len(lines) == 3, run.output(first)
    assert all("2 process(es), cpu, gloo" in line for line in lines), lines
    assert run.checkpoint_epoch() == 2
    # Submitted again, with more epochs: a new job id, the same checkpoint, epoch 3 on
    job = run.submit("--epochs", "10")
    assert job.id and job.id != first.id, job.submitted
    run.wait_for_output(job, "epoch 3:")
    slurm.signal_batch_script(job.id, "USR1")
    job = slurm.wait(job, timeout=240)
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), run.report(job)
    assert slurm.fields(job.id)["Restarts"] == "1", run.report(job)  # requeued once
    printed = run.output(job)  # both runs of the job, one file (--open-mode=append)
    assert f"resumed from {workdir}/ddp-train.pt at epoch 3" in printed, printed
    stopped = re.search(r"^stopping after epoch (\d+), as asked$", printed, re.M)
    assert stopped, printed
    resumed = int(stopped[1]) + 1
    assert resumed > 3 and f"resumed from {workdir}/ddp-train.pt at epoch {resumed}" in printed
    epochs = [int(line.split()[1].rstrip(":")) for line in epoch_lines(printed)]
    assert epochs == list(range(3, 10)), printed  # every epoch once: none lost, none repeated
    assert run.checkpoint_epoch() == 9


def _processes_of(job_id: str, node: str) -> list[int]:
    """The job's processes that Slurm started on `node` (torchrun and its workers), found by
    the SLURM_* variables in their environment."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = dict(item.split("=", 1) for item in
                           (proc / "environ").read_bytes().decode(errors="replace").split("\0")
                           if "=" in item)
            command = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:  # gone, or not ours
            continue
        if (environ.get("SLURM_JOB_ID") == job_id and environ.get("SLURMD_NODENAME") == node
                and ("torch.distributed.run" in command or "train.py" in command)):
            found.append(int(proc.name))
    return found


@pytest.mark.timed  # the job must end within a bound of the kill, measured live
def test_when_a_nodes_processes_die_the_job_ends_promptly(slurm, workdir, rdzv_port):
    """Every process of the job on the second node killed at once, its slurmd alive to report
    it: srun --kill-on-bad-exit ends the whole job, instead of leaving the first node's worker
    waiting in an all-reduce for a partner that is gone. (A whole machine dying reports
    nothing; Slurm ends the job only after SlurmdTimeout, as NODE_FAIL: not tested here.)"""
    if len(slurm.nodes) < 2:
        pytest.skip("one node only: " + "\n".join(slurm.problems))
    run = SlurmRun(slurm, workdir, rdzv_port)
    job = run.submit("--epochs", "1000")
    run.wait_for_output(job, "epoch 1:")
    victims = _processes_of(job.id, slurm.nodes[1])
    assert victims, run.report(job)
    killed_at = time.monotonic()
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    job = slurm.wait(job, timeout=120)
    took = time.monotonic() - killed_at
    assert job.state == "FAILED", run.report(job)
    assert took < CLAIMS["dead_node_job_end_s"], (took, run.report(job))
    assert len(epoch_lines(run.output(job))) < 1000


def test_the_page_states_the_clusters_requeue_wait_and_scheduling_interval():
    """What the page says of the test cluster's slurm.conf is what the cluster runs with."""
    conf = (ROOT / "tests" / "slurm" / "slurm.conf.in").read_text(encoding="utf-8")
    page = " ".join((ROOT / "docs" / "several-gpus" / "many-machines.md")
                    .read_text(encoding="utf-8").split())
    expire = re.search(r"^AuthInfo=.*cred_expire=(\d+)", conf, re.M)[1]
    main = re.search(r"^SchedulerParameters=.*\bsched_interval=(\d+)", conf, re.M)[1]
    backfill = re.search(r"^SchedulerParameters=.*\bbf_interval=(\d+)", conf, re.M)[1]
    assert not re.search(r"^SchedulerType=", conf, re.M)  # the default, sched/backfill, has bf_interval
    assert f"start again after {expire} s instead of Slurm's default 120" in page
    assert (f"every {main} s and every {backfill} s instead of every 60 and every 30 "
            "(`sched_interval` and `bf_interval`") in page


def test_the_cluster_has_two_nodes(slurm):
    """Debian's Slurm runs two slurmd on one machine; if another build cannot, say why."""
    assert slurm.nodes == ["127.0.0.1", "127.0.0.2"], "\n".join(slurm.problems)


# --- Debugging a job that hangs or fails (snippets/several_gpus/debugging_distributed.py) -------

DEBUGGING = pytest.mark.snippet("snippets/several_gpus/debugging_distributed.py")


DEBUG_MODULE = "snippets.several_gpus.debugging_distributed"


def debug_run(mode: str, *args: str, env: dict | None = None, module: str = DEBUG_MODULE,
              timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc-per-node 2 -m MODULE MODE ARGS` on CPU processes."""
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", module, mode, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "",
             "OMP_NUM_THREADS": "1", **(env or {})})


def root_cause(stderr: str) -> str:
    """torchrun's report of the first failure: the block under "Root Cause"."""
    assert "Root Cause (first observed failure):" in stderr, stderr[-3000:]
    return stderr.split("Root Cause (first observed failure):", 1)[1].split("=====", 1)[0]


@DEBUGGING
@pytest.mark.timed  # alone: its ranks must start within the 10 s timeout of each other
def test_a_collective_that_one_rank_skips_times_out(tmp_path):
    """The wait ends at the timeout given, as its message says. A job that hung instead
    (gloo's default is 30 minutes) fails the test at SKIP_HANG_S, ten times the timeout, when
    torchrun is killed. (Its ranks run on: they are in sessions of their own.) It runs alone,
    not for a time it measures: beside other tests one rank could start 10 s after the other
    and time out in the first all-reduce instead of the skipped one."""
    try:
        result = debug_run("skip", "10", timeout=SKIP_HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the job still ran after {SKIP_HANG_S} s: rank 0 hung in the collective "
                    "instead of timing out after 10 s", pytrace=False)
    assert result.returncode != 0
    assert "Timed out waiting 10000ms" in result.stderr, result.stderr[-3000:]
    assert "rank      : 0" in root_cause(result.stderr)  # the rank left waiting


SKIP_HANG_S = 100


@pytest.fixture(scope="module")
def flight_record(tmp_path_factory):
    """The page's commands: `recorded` with the flight recorder on, then `read`."""
    folder = tmp_path_factory.mktemp("flight") / "flight-record"
    env = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": f"{folder}/rank_"}
    result = debug_run("recorded", "10", env=env, timeout=SKIP_HANG_S)
    read = subprocess.run([sys.executable, "-m", DEBUG_MODULE, "read", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return result, read, folder


def test_the_page_shows_the_flight_recorder_commands_the_test_runs():
    block = page_block("the flight recorder, made and read")
    assert "export TORCH_FR_BUFFER_SIZE=2000 TORCH_FR_DUMP_TEMP_FILE=flight-record/rank_" in block
    assert "debugging.py recorded 10" in block and "debugging.py read flight-record" in block


@DEBUGGING
@pytest.mark.timed  # alone, as the skip test: its ranks must start within 10 s of each other
def test_the_flight_record_names_the_rank_that_never_reached_the_collective(flight_record):
    result, read, folder = flight_record
    assert result.returncode != 0 and "Timed out waiting 10000ms" in result.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["rank_0", "rank_1"]
    assert read.returncode == 0, read.stderr[-3000:]
    entries = {rank: pickle.loads((folder / f"rank_{rank}").read_bytes())["entries"]
               for rank in (0, 1)}
    if not entries[0]:
        pytest.skip(f"PyTorch {torch_version()} records no gloo collectives")
    assert read.stdout.splitlines() == [
        "rank 0: last collective #2, gloo:all_reduce, called in recorded_skip",
        "rank 1: last collective #1, gloo:all_reduce, called in recorded_skip"], read.stdout
    # gloo's entries record no start or completion: every one stays "scheduled"
    assert {e["state"] for rank in (0, 1) for e in entries[rank]} == {"scheduled"}


@DEBUGGING
@pytest.mark.timed
def test_fr_trace_stops_on_gloos_records_in_torch_2_13(flight_record):
    """The page's reason to read the files itself: PyTorch 2.13's analyzer fails on them."""
    if not torch_version().startswith("2.13"):
        pytest.skip(f"the claim is about PyTorch 2.13's fr_trace; this is {torch_version()}")
    folder = flight_record[2]
    analyzed = subprocess.run([sys.executable, "-m",
                               "torch.distributed.flight_recorder.fr_trace", str(folder)],
                              cwd=folder.parent, capture_output=True, text=True, timeout=TIMEOUT)
    assert "KeyError" in analyzed.stderr, analyzed.stderr[-3000:]


def torch_version() -> str:
    return torch.__version__


@DEBUGGING
@pytest.mark.fresh_interpreter  # torchrun and its ranks: a long test, started early
@pytest.mark.parametrize("debug", ["OFF", "DETAIL"])
def test_detail_names_a_collective_mismatch(debug):
    result = debug_run("mismatch", env={"TORCH_DISTRIBUTED_DEBUG": debug})
    assert result.returncode != 0
    named = "Detected mismatch between collectives on ranks" in result.stderr
    assert named == (debug == "DETAIL"), result.stderr[-3000:]
    if debug == "DETAIL":
        assert "TensorShape=[4]" in result.stderr and "TensorShape=[5]" in result.stderr


RECORDLESS = """import sys
from snippets.several_gpus.debugging_distributed import main
main.__wrapped__(sys.argv[1])  # main without @record
"""


@DEBUGGING
@pytest.mark.fresh_interpreter  # torchrun and its ranks: a long test, started early
@pytest.mark.parametrize("decorated", [True, False], ids=["record", "no-record"])
def test_record_puts_the_failed_workers_traceback_in_torchruns_report(decorated, tmp_path):
    module, env = DEBUG_MODULE, {}
    if not decorated:
        (tmp_path / "recordless.py").write_text(RECORDLESS)
        module = "recordless"
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path)])
    result = debug_run("crash", module=module, env=env)
    assert result.returncode != 0
    report = root_cause(result.stderr)
    assert "rank      : 1" in report  # the rank that raised, not the one torchrun stopped
    if decorated:
        assert "ValueError: rank 1 failed on purpose" in report, report
    else:
        assert "error_file: <N/A>" in report and "ValueError" not in report, report


@DEBUGGING
@pytest.mark.fresh_interpreter  # torchrun and its ranks: a long test, started early
def test_py_spy_dump_finds_the_hung_rank(tmp_path):
    """A job that hangs for real (rank 1 stuck, rank 0 waiting in an all-reduce with a timeout
    of 10 minutes); py-spy dumps every worker's Python stack; the test finds the hung rank."""
    spy = py_spy()
    assert spy, "py-spy is in requirements/test.txt: pip install py-spy (make gpu-wheels for a GPU machine)"
    job = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "snippets.several_gpus.debugging_distributed", "hang", "600"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "",
             "OMP_NUM_THREADS": "1"}, start_new_session=True)
    # A job that never says it is ready is stopped, so the read below ends instead of hanging
    deadline = threading.Timer(TIMEOUT, os.killpg, (job.pid, signal.SIGKILL))
    deadline.start()
    try:
        pids, said = {}, ""
        while len(pids) < 2:  # "rank R ready (pid P)" from both workers
            line = job.stdout.readline()
            assert line, f"the workers ended before they were ready: {said!r}"
            # Unbuffered (PYTHONUNBUFFERED=1), a print is two writes, the text and its newline,
            # so the two workers' lines can interleave: search all that was said, not each line
            said += line
            pids = {int(rank): int(pid)
                    for rank, pid in re.findall(r"rank (\d) ready \(pid (\d+)\)", said)}
        time.sleep(2)  # both in place: rank 1 in its loop, rank 0 in the all-reduce
        dumps = {rank: subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True,
                                      text=True, timeout=60).stdout
                 for rank, pid in pids.items()}
    finally:
        deadline.cancel()
        # torchrun starts each worker in a session of its own: killing torchrun's group alone
        # would leave both workers running for their 10 minutes
        for pid in (job.pid, *pids.values()):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        job.wait()
    hung = [rank for rank, dump in dumps.items() if "load_next_batch_forever" in dump]
    assert hung == [1], dumps
    assert "all_reduce" in dumps[0] and "hang" in dumps[0], dumps[0]  # waiting for rank 1
