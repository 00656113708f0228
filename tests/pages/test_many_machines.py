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
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.slurm import cluster

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/several-gpus/many-machines.md"
SCRIPT = ROOT / "snippets/several_gpus/ddp_with_torchrun.py"
FENCE = re.compile(r'^```(?P<lang>\w+) title="(?P<title>[^"]+)"\n(?P<body>.*?)^```\s*$', re.M | re.S)
TIMEOUT = 240  # seconds: a rendezvous that never completes fails the test instead of hanging CI

pytestmark = pytest.mark.snippet("snippets/several_gpus/ddp_with_torchrun.py")


def page_block(title: str) -> str:
    found = {m["title"]: m["body"] for m in FENCE.finditer(PAGE.read_text(encoding="utf-8"))}
    assert title in found, f"{PAGE.name} has no code block titled {title!r}"
    return found[title]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def workdir(tmp_path):
    """A folder with the page-3 script as train.py, and `torchrun` for this interpreter first
    on PATH (torchrun is `python -m torch.distributed.run`; this pins the interpreter)."""
    shutil.copy(SCRIPT, tmp_path / "train.py")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "torchrun"
    launcher.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m torch.distributed.run "$@"\n')
    launcher.chmod(0o755)
    return tmp_path


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
    command = page_block("on every machine")
    two_gpus = torch.cuda.device_count() >= 2
    env = {**os.environ, "HEAD_NODE": "127.0.0.1", "HEAD_PORT": str(free_port()),
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
        nodes.append(subprocess.Popen(["bash", "-c", command], cwd=workdir, env=node_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    try:
        outputs = [node.communicate(timeout=TIMEOUT) for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.pid, signal.SIGKILL)
                node.wait()
    for node, (_, err) in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, err[-3000:]
    printed = [epoch_lines(out) for out, _ in outputs]
    # rank 0 printed three epochs, on whichever "node" the rendezvous made GROUP_RANK 0
    assert sorted(len(lines) for lines in printed) == [0, 3], printed
    lines = max(printed, key=len)
    backend = "nccl" if two_gpus else "gloo"
    assert all("2 process(es)" in line and backend in line for line in lines), lines
    checkpoint = torch.load(workdir / "ckpt.pt", weights_only=True, map_location="cpu")
    assert checkpoint["epoch"] == 2


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


def submit_command() -> tuple[dict[str, str], list[str]]:
    """The environment and sbatch arguments of the page's "how the tests submit it" line."""
    words = shlex.split(page_block("how the tests submit it").strip())
    env = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[0] == "sbatch" and words[-1] == "train.sbatch", words
    return env, words[1:]


def test_sbatch_script_trains_on_a_real_slurm(slurm, workdir):
    (workdir / "train.sbatch").write_text(page_block("train.sbatch"))
    env, args = submit_command()
    assert env == {"PROCS_PER_NODE": "1"} and "--gpus-per-node=0" in args
    if len(slurm.nodes) == 1:  # the page's fallback: one node, both workers on it
        args, env = ["--nodes=1", *args], {"PROCS_PER_NODE": "2"}
    # a cluster without GPUs: hide any this machine has, as Slurm does on a node without them
    env.update(RDZV_PORT=str(free_port()), PATH=path_with(workdir, slurm.env["PATH"]),
               CUDA_VISIBLE_DEVICES="")
    job = slurm.run_job(*args, cwd=workdir, env=env)
    output = workdir / f"ddp-train-{job.id}.out"
    printed = output.read_text() if job.id and output.is_file() else ""
    logs = "\n".join(f"{name}:\n{slurm.log(name)}" for name in
                     ["slurmctld.log", *(f"slurmd-{n}.log" for n in slurm.nodes)])
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), (
        f"job {job.id}: {job.state} {job.exit_code} {job.submitted}\n"
        f"job output:\n{printed[-3000:]}\n{logs}")
    lines = epoch_lines(printed)
    assert len(lines) == 3, printed
    assert all("2 process(es), cpu, gloo" in line for line in lines), lines
    checkpoint = torch.load(workdir / f"ckpt-{job.id}.pt", weights_only=True)
    assert checkpoint["epoch"] == 2


def test_the_cluster_has_two_nodes(slurm):
    """Debian's Slurm runs two slurmd on one machine; if another build cannot, say why."""
    assert slurm.nodes == ["127.0.0.1", "127.0.0.2"], "\n".join(slurm.problems)
