"""A real Slurm cluster on this machine, for the tests: munged, slurmctld and one slurmd per node.

`make slurm` installs Debian's packages (slurmctld, slurmd, slurm-client, munge) where they are
missing. `local_cluster(nodes=2)` starts the daemons in the foreground as the current user, each
with its own files under one temporary folder (tests/slurm/slurm.conf.in, a fresh munge key),
waits until every node is idle, and stops them afterwards. Nothing is installed, configured or
started system-wide, and no root is needed.

The nodes are named after loopback addresses, 127.0.0.1, 127.0.0.2, ..., so that a job script
that uses a node's name as a network address (the first node as a rendezvous endpoint, say)
reaches it, as on a real cluster. (`localhost` as a node name makes Slurm 22.05 refuse a second
node: "Duplicated NodeHostName".) Several slurmd on one machine need a Slurm built with
--enable-multiple-slurmd; Debian's 22.05 is.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import reserved_port

HERE = Path(__file__).resolve().parent
SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/local/sbin"])
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "sinfo", "srun", "scontrol", "scancel")


FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


class ClusterUnavailable(RuntimeError):
    """The cluster could not be started here; the message says what failed."""


@dataclass
class Job:
    id: str | None
    state: str       # Slurm's JobState when it ended: COMPLETED, FAILED, ...
    exit_code: str   # "status:signal", e.g. "0:0"
    submitted: str   # what sbatch printed


@dataclass
class Cluster:
    dir: Path
    env: dict[str, str]  # SLURM_CONF and the PATH with the Slurm commands
    nodes: list[str]     # node names: 127.0.0.1, 127.0.0.2, ...

    def run_job(self, *args: str, cwd: Path, env: dict[str, str] | None = None,
                timeout: float = 300) -> Job:
        """`sbatch ARGS`, then wait until the job has ended."""
        job = self.submit(*args, cwd=cwd, env=env)
        return self.wait(job, timeout=timeout) if job.id else job

    def submit(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> Job:
        """`sbatch ARGS`; the job as submitted (state "SUBMITTED", or "NOT SUBMITTED")."""
        env = {**self.env, **(env or {})}
        submitted = subprocess.run(["sbatch", "--parsable", *args], cwd=cwd, env=env,
                                   capture_output=True, text=True, timeout=60)
        if submitted.returncode != 0:
            return Job(None, "NOT SUBMITTED", "", submitted.stdout + submitted.stderr)
        return Job(submitted.stdout.strip().split(";")[0], "SUBMITTED", "", submitted.stdout)

    def fields(self, job_id: str) -> dict[str, str]:
        """`scontrol show job`, as a dict: JobState, ExitCode, Restarts, ..."""
        shown = subprocess.run(["scontrol", "--oneliner", "show", "job", job_id], env=self.env,
                               capture_output=True, text=True, timeout=30).stdout
        return dict(re.findall(r"(\w+)=(\S*)", shown))

    def wait(self, job: Job, timeout: float = 300) -> Job:
        """Wait until the job has ended, asking scontrol twice a second.

        (`sbatch --wait` polls at growing intervals: a job that ended after 15 s was reported
        after 42 s.)"""
        deadline = time.monotonic() + timeout
        while True:
            fields = self.fields(job.id)
            state = fields.get("JobState", "UNKNOWN")
            if state in FINISHED:
                return Job(job.id, state, fields.get("ExitCode", ""), job.submitted)
            if time.monotonic() > deadline:
                subprocess.run(["scancel", job.id], env=self.env, timeout=30)
                return Job(job.id, f"still {state} after {timeout:.0f} s (cancelled)", "",
                           job.submitted)
            time.sleep(0.5)

    def signal_batch_script(self, job_id: str, signal_name: str) -> None:
        """What `--signal=B:SIG@...` does before the time limit, now: the signal to the job's
        batch script (`scancel --batch --signal`)."""
        subprocess.run(["scancel", "--batch", f"--signal={signal_name}", job_id], env=self.env,
                       check=True, capture_output=True, timeout=30)

    def log(self, name: str, lines: int = 40) -> str:
        """The end of a daemon's log: slurmctld.log, slurmd-127.0.0.1.log, munged.log."""
        path = self.dir / "log" / name
        text = path.read_text(errors="replace") if path.is_file() else ""
        return "\n".join(text.splitlines()[-lines:])


def missing_commands() -> list[str]:
    return [name for name in (*DAEMONS, *CLIENTS) if shutil.which(name, path=SEARCH) is None]


def _wait_for_idle(env: dict[str, str], procs: dict[str, subprocess.Popen], nodes: int,
                   timeout: float) -> None:
    deadline = time.monotonic() + timeout
    states: list[str] = []
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise ClusterUnavailable(f"{name} exited with status {proc.returncode} at start-up")
        result = subprocess.run(["sinfo", "--noheader", "--Node", "--format=%T"], env=env,
                                capture_output=True, text=True, timeout=30)
        states = result.stdout.split()
        if states == ["idle"] * nodes:
            return
        time.sleep(0.5)
    raise ClusterUnavailable(f"the nodes did not all become idle in {timeout:.0f} s "
                             f"(sinfo says {states})")


def node_names(nodes: int) -> list[str]:
    """127.0.0.1, 127.0.0.2, ...: loopback addresses, so every node's name is also an address
    that reaches it (on Linux all of 127.0.0.0/8 is this machine), as on a real cluster."""
    return [f"127.0.0.{n}" for n in range(1, nodes + 1)]


@contextlib.contextmanager
def local_cluster(nodes: int = 2, cpus: int = 1, start_timeout: float = 60) -> Iterator[Cluster]:
    """`nodes` nodes of `cpus` CPUs each, all on this machine."""
    missing = missing_commands()
    if missing:
        raise ClusterUnavailable(f"Slurm commands not found: {', '.join(missing)} "
                                 "(`make slurm` installs slurmctld, slurmd, slurm-client and munge)")
    # munged wants its socket's folder, and every folder above it, searchable by all
    root = Path(tempfile.mkdtemp(prefix="fieldguide-slurm-"))
    root.chmod(0o711)
    names = node_names(nodes)
    for sub in ("munge", "state", "log", *(f"spool/{name}" for name in names)):
        (root / sub).mkdir(parents=True)
    (root / "munge").chmod(0o711)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    # The daemons' ports, held for them until they stop (reserved_port): a port picked and let
    # go could be another program's by the time a daemon binds it.
    ports = contextlib.ExitStack()
    ctld_port, slurmd_port, *node_ports = (ports.enter_context(reserved_port())
                                           for _ in range(2 + len(names)))
    node_lines = "\n".join(f"NodeName={name} NodeHostname={name} NodeAddr={name} "
                            f"Port={port} CPUs={cpus} State=UNKNOWN"
                            for name, port in zip(names, node_ports, strict=True))
    conf = root / "slurm.conf"
    conf.write_text((HERE / "slurm.conf.in").read_text().format(
        dir=root, user=getpass.getuser(), ctld_port=ctld_port, slurmd_port=slurmd_port,
        node_lines=node_lines, node_names=",".join(names)))
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": SEARCH}
    for name in list(env):
        if name.startswith(("SLURM_", "SBATCH_", "SRUN_")) and name != "SLURM_CONF":
            del env[name]  # a surrounding job's settings would leak into ours
    commands = {
        "munged": ["munged", "--foreground", f"--key-file={key}",
                   f"--socket={root}/munge/munge.socket", f"--pid-file={root}/munge/munged.pid",
                   f"--log-file={root}/log/munged.log", f"--seed-file={root}/munge/munged.seed"],
        "slurmctld": ["slurmctld", "-D", "-f", str(conf)],
        **{f"slurmd-{name}": ["slurmd", "-D", "-f", str(conf), "-N", name] for name in names},
    }
    procs: dict[str, subprocess.Popen] = {}
    try:
        for name, command in commands.items():
            out = open(root / "log" / f"{name}.stderr", "w")  # the daemon keeps its own copy
            procs[name] = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True)
            out.close()
            if name == "munged":
                _wait_for_socket(root / "munge" / "munge.socket", procs[name], root)
        try:
            _wait_for_idle(env, procs, len(names), start_timeout)
        except ClusterUnavailable as exc:
            logs = "\n".join(f"--- {n}:\n" + _tail(root / "log" / f"{n}.stderr") +
                             _tail(root / "log" / f"{n}.log") for n in commands)
            raise ClusterUnavailable(f"{exc}\n{logs}") from None
        yield Cluster(dir=root, env=env, nodes=names)
    finally:
        for name in reversed(list(procs)):
            _stop(procs[name])
        ports.close()
        shutil.rmtree(root, ignore_errors=True)


def _wait_for_socket(path: Path, proc: subprocess.Popen, root: Path, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise ClusterUnavailable(f"munged did not start:\n{_tail(root / 'log' / 'munged.stderr')}"
                             f"{_tail(root / 'log' / 'munged.log')}")


def _tail(path: Path, lines: int = 15) -> str:
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the daemon and what it started
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)
