"""Record what the pages' declared shell commands print on this machine, one at a time.

    python3 -m fieldguide.notebooks.record_commands               # every page with a declaration
    python3 -m fieldguide.notebooks.record_commands PAGE ...      # these (docs/<chapter>/<page>.md)

A bash block followed by `<!-- command-output: gpus=N NAME=PATH ... -->` (fieldguide/notebooks/outputs.py)
is run here when this machine has N GPUs or more and its key (the block's text and the files'
bytes) has no record here yet: in a new folder holding each PATH of the repository as NAME, with
`torchrun` on PATH (this interpreter's `-m torch.distributed.run`), under `bash -c`, with the
GPUs to itself before and after (`outputs.gpu_alone`), as a notebook's outputs are recorded. Its
stdout, stderr and exit code land in outputs/<machine>/<chapter>/<page>.commands.json: commit
them. A command that outlives --timeout is killed and not recorded.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fieldguide import ROOT
from fieldguide.content.pages import pages
from fieldguide.measuring import fingerprint
from fieldguide.measuring.timings import machine_slug
from fieldguide.notebooks import outputs

SHIM = '#!/bin/sh\nexec "{python}" -m torch.distributed.run "$@"\n'


def declaring(root: Path) -> list[str]:
    """The pages (relative to docs/) holding a command-output declaration."""
    docs = Path(root) / "docs"
    return [p.relative_to(docs).as_posix() for p in pages(docs)
            if "command-output:" in p.read_text(encoding="utf-8")]


def run(command: outputs.Command, root: Path, timeout: float) -> dict[str, Any] | None:
    """Run the block in a new folder holding its files; its entry, or None where it timed out."""
    with tempfile.TemporaryDirectory(prefix="command-") as tmp:
        folder = Path(tmp)
        for name, path in command.files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(root) / path, folder / name)
        shims = Path(tempfile.mkdtemp(prefix="bin-", dir=tmp))
        (shims / "torchrun").write_text(SHIM.format(python=sys.executable))
        (shims / "torchrun").chmod(0o755)
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
        env["PATH"] = os.pathsep.join([str(shims), env.get("PATH", "")])
        started = subprocess.Popen(["bash", "-c", command.block], cwd=folder, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True)  # its own group: killed whole
        try:
            stdout, stderr = started.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(started.pid, signal.SIGKILL)
            started.communicate()
            return None
    return {"key": command.key, "stdout": stdout, "stderr": stderr,
            "returncode": started.returncode}


def write(path: Path, page: str, machine: dict[str, Any], keep: list[dict[str, Any]],
          new: list[dict[str, Any]]) -> None:
    record = {
        "page": page,
        "gpu": machine["gpu_name"], "gpu_count": machine["gpu_count"],
        "driver": machine.get("driver"), "torch": machine["torch"],
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "alone": True,          # gpu_alone() held before each command ran and after
        "cpu_threads": outputs.cpu_threads(),
        "boot_id": machine.get("boot_id"),
        "commands": keep + new,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m fieldguide.notebooks.record_commands",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", help="docs/<chapter>/<page>.md (default: every page "
                        "with a command-output declaration)")
    parser.add_argument("--timeout", type=float, default=300, metavar="SECONDS",
                        help="kill a command after this long, and record nothing of it")
    args = parser.parse_args(argv)
    try:
        outputs.gpu_alone()
    except outputs.NotAlone as exc:
        print(f"record_commands: error: {exc}", file=sys.stderr)
        return 2
    machine = fingerprint.collect()
    slug, gpus = machine_slug(machine), machine["gpu_count"] or 0
    chosen = [p.removeprefix("docs/") for p in args.pages] or declaring(root)
    failed = 0
    for page in chosen:
        declared = [c for _, c in outputs.commands(
            (Path(root) / "docs" / page).read_text(encoding="utf-8"), page, root)]
        path = Path(root) / outputs.OUTPUTS / slug / outputs.commands_path(page)
        old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        current = {c.key for c in declared}
        keep = [e for e in old.get("commands", []) if e["key"] in current] \
            if old.get("alone") is True else []
        have = {e["key"] for e in keep}
        new = []
        for n, command in enumerate(declared, 1):
            what = f"{page} command {n} ({command.block.strip().splitlines()[-1][:60]})"
            if command.gpus > gpus:
                print(f"skipped {what}: needs {command.gpus} GPUs, {slug} has {gpus}")
                continue
            if command.key in have:
                print(f"skipped {what}: recorded on {slug} already, as it is now")
                continue
            try:
                outputs.gpu_alone()
                started = time.perf_counter()
                entry = run(command, root, args.timeout)
                outputs.gpu_alone()
            except outputs.NotAlone as exc:
                print(f"record_commands: error: {what}: {exc}; nothing written for {page}",
                      file=sys.stderr)
                return 2
            if entry is None:
                print(f"FAILED {what}: still running after {args.timeout:.0f} s, killed, "
                      "not recorded")
                failed += 1
                continue
            entry["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            entry["torch"] = machine["torch"]
            new.append(entry)
            have.add(command.key)
            print(f"recorded {what} on {slug}: exit code {entry['returncode']} in "
                  f"{time.perf_counter() - started:.0f} s"
                  + ("" if entry["returncode"] == 0 else " (recorded as failed; shown so)"))
        if new:
            write(path, page, machine, keep, new)
            print(f"wrote {path.relative_to(root)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
