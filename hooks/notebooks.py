"""MkDocs hook: every page with code offers its notebook (Download, Open in Colab).

The committed notebooks (notebooks/, written by `make notebooks`, see fieldguide/notebooks.py)
are served beside the pages, and each page with code gets both links under its title. A
notebook that no longer matches its page, a missing one or one without a page is logged as a
warning, so `mkdocs build --strict` fails on it as it does on a stale timing.
"""

import logging
from pathlib import Path

from mkdocs.structure.files import File

from fieldguide import notebooks

log = logging.getLogger("mkdocs.hooks.notebooks")
repo: notebooks.Repo | None = None


def on_config(config):
    global repo
    repo = notebooks.Repo.from_config(config.repo_url, config.edit_uri)


def on_files(files, config):
    root = Path(config.config_file_path).parent
    for problem in notebooks.problems(root, repo):
        log.warning(problem)
    for path in notebooks.committed(root):
        files.append(File(path, src_dir=str(root), dest_dir=config.site_dir,
                          use_directory_urls=config.use_directory_urls))
    return files


def on_page_markdown(markdown, page, config, files):
    return notebooks.add_links(markdown, page.file.src_uri, repo)
