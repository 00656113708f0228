"""MkDocs hook: converts the notebooks mkdocs-jupyter has not cached yet in a second process.

mkdocs-jupyter converts each notebook page as the build reaches it, on the build's one core: in a
cold build (a fresh clone, or changed notebooks) that was a fifth of the time (2026-11-26,
2 cores: about 8 of 41 s). At on_nav this hook lists the notebooks whose entry is missing
from mkdocs-jupyter's cache and, if there are any, starts

    python hooks/notebook_prefill.py --parent PID --options JSON NOTEBOOK ...

which writes each entry as mkdocs-jupyter itself would (the same key, the same conversion
calls, the same JSON; tests/tooling/test_notebook_prefill.py compares the two), last notebook
first, while the build works forward. mkdocs-jupyter then finds the entry or, where it gets
there first, converts the notebook itself. Each entry is written whole (a temporary file,
renamed), so the build never reads half of one. The process stops when it is done, when the
build's process is gone (checked between notebooks), and when the build ends or fails
(on_post_build, on_build_error). Drafts (draft_docs) are left out: the build renders none.
MkDocs only: Zensical runs no hooks (and no mkdocs-jupyter).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

# The project: this file's folder's parent. The process below runs this file as a script, so
# the package is put on its path here (MkDocs' own process has it already).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fieldguide.rendering.figure_cache import write_whole  # noqa: E402 (after the path, above)
from fieldguide.rendering.figure_prefill import as_child, disabled  # noqa: E402

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


def on_nav(nav, config, files, **kwargs):
    global _process
    plugin = config.plugins.get(PLUGIN)
    if plugin is None or not plugin.config["cache"] or disabled() or (
            _process is not None and _process.poll() is None):
        return nav
    # cache_dir as mkdocs-jupyter reads it (relative to the working directory, which the
    # process below shares)
    options = {name: plugin.config[name] for name in OPTIONS}
    # Not the drafts (draft_docs): the build renders none, and mkdocs-jupyter evicts every
    # entry the build did not use. (on_nav, not on_files: MkDocs sets each file's inclusion
    # between the two; `mkdocs serve` renders drafts too, and converts those itself.)
    missing = [f.abs_src_path for f in files
               if plugin.should_include(f) and f.inclusion.is_included()
               and not cache_path(f.abs_src_path, options).exists()]
    if missing:
        _process = subprocess.Popen(
            [sys.executable, __file__, "--parent", str(os.getpid()), "--options",
             json.dumps(options), *reversed(missing)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return nav


def stop() -> None:
    if _process is not None and _process.poll() is None:
        _process.terminate()
        _process.wait()


def on_post_build(config, **kwargs):
    stop()


def on_build_error(error, **kwargs):
    stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--options", type=json.loads, required=True)
    parser.add_argument("notebooks", nargs="+")
    args = parser.parse_args(argv)
    if argv is None:  # as a process of its own
        as_child()
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
