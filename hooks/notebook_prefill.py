"""MkDocs hook: converts the notebooks mkdocs-jupyter has not cached yet in a second process.

mkdocs-jupyter converts each notebook page as the build reaches it, on the build's one core: in a
cold build (a fresh clone, or changed notebooks) that was a fifth of the time (2026-11-26,
2 cores: about 8 of 41 s). At on_files this hook lists the notebooks whose entry is missing
from mkdocs-jupyter's cache and, if there are any, starts

    python hooks/notebook_prefill.py --parent PID --options JSON NOTEBOOK ...

which writes each entry as mkdocs-jupyter itself would (the same key, the same conversion
calls, the same JSON; tests/tooling/test_notebook_prefill.py compares the two), last notebook
first, while the build works forward. mkdocs-jupyter then finds the entry or, where it gets
there first, converts the notebook itself. Each entry is written whole (a temporary file,
renamed), so the build never reads half of one. The process stops when the build's is gone, and
at the end of the build.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PLUGIN = "mkdocs-jupyter"
# What mkdocs-jupyter's conversion reads from its config (plugin.py, on_pre_page and its key).
OPTIONS = ("execute", "kernel_name", "theme", "allow_errors", "show_input", "no_input",
           "no_prompt", "remove_tag_config", "highlight_extra_classes", "include_requirejs",
           "custom_mathjax_url", "toc_depth", "cache_dir", "execute_ignore")

_process: subprocess.Popen | None = None


def cache_path(notebook: str, options: dict) -> Path:
    """Where mkdocs-jupyter keeps this notebook's entry."""
    from mkdocs_jupyter.plugin import _compute_cache_key, _get_cache_path

    return _get_cache_path(options["cache_dir"], _compute_cache_key(notebook, options,
                                                                    executes(notebook, options)))


def executes(notebook: str, options: dict) -> bool:
    """mkdocs-jupyter's own rule: `execute`, unless the path matches `execute_ignore`."""
    from pathlib import PurePath

    return bool(options["execute"]) and not any(
        PurePath(notebook).match(pattern) for pattern in options["execute_ignore"] or [])


def entry(notebook: str, options: dict) -> dict:
    """The cache entry mkdocs-jupyter writes for this notebook (plugin.py, new_render)."""
    from mkdocs_jupyter import convert
    from mkdocs_jupyter.plugin import _get_nb_toc_tokens

    body = convert.nb2html(
        notebook, execute=executes(notebook, options), kernel_name=options["kernel_name"],
        theme=options["theme"], allow_errors=options["allow_errors"],
        show_input=options["show_input"], no_input=options["no_input"],
        no_prompt=options["no_prompt"], remove_tag_config=options["remove_tag_config"],
        highlight_extra_classes=options["highlight_extra_classes"],
        include_requirejs=options["include_requirejs"],
        custom_mathjax_url=options["custom_mathjax_url"])
    toc_tokens, title = _get_nb_toc_tokens(notebook, options["toc_depth"])
    return {"content": body, "toc_tokens": toc_tokens, "title": title}


def write_whole(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False,
                                     suffix=".tmp") as file:
        json.dump(data, file)
    os.replace(file.name, path)


def on_files(files, config, **kwargs):
    global _process
    plugin = config.plugins.get(PLUGIN)
    if plugin is None or not plugin.config["cache"] or (_process and _process.poll() is None):
        return files
    # cache_dir as mkdocs-jupyter reads it (relative to the working directory, which the
    # process below shares)
    options = {name: plugin.config[name] for name in OPTIONS}
    missing = [f.abs_src_path for f in files
               if plugin.should_include(f) and not cache_path(f.abs_src_path, options).exists()]
    if missing and not os.environ.get("FIELDGUIDE_NO_PREFILL"):
        _process = subprocess.Popen(
            [sys.executable, __file__, "--parent", str(os.getpid()), "--options",
             json.dumps(options), *reversed(missing)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lower_priority(_process.pid)
    return files


def lower_priority(pid: int) -> None:
    """The build's own process, which the reader waits on, goes first. (Not preexec_fn, which
    is unsafe in a process with threads, such as `mkdocs serve`.)"""
    if hasattr(os, "setpriority"):
        os.setpriority(os.PRIO_PROCESS, pid, 5)


def on_post_build(config, **kwargs):
    if _process is not None and _process.poll() is None:
        _process.terminate()
        _process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--options", type=json.loads, required=True)
    parser.add_argument("notebooks", nargs="+")
    args = parser.parse_args(argv)
    for notebook in args.notebooks:
        if os.getppid() != args.parent:
            return 0  # the build is over
        path = cache_path(notebook, args.options)
        if path.exists():
            continue  # the build converted it first
        try:
            write_whole(path, entry(notebook, args.options))
        except Exception:  # noqa: BLE001 (the build converts it, and reports what fails)
            continue
    return 0


if __name__ == "__main__":
    sys.exit(main())
