"""hooks/rebuild_what_changed.py: under `mkdocs serve --dirty` (make serve), a prose edit keeps
the other pages' HTML, so MkDocs renders that page alone; any other change (a snippet, a timing
run, the rendering code, a page's title) empties the served folder, so every page renders again."""

import importlib.util
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("markdown")  # the hook imports fieldguide.rendering.render, a Markdown extension


@pytest.fixture
def hook():
    """A fresh copy of the hook module (it keeps state between builds, as MkDocs keeps it)."""
    spec = importlib.util.spec_from_file_location(
        "rebuild_what_changed", ROOT / "hooks" / "rebuild_what_changed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def site(tmp_path):
    """A project with two pages, a snippet and a built page in its served folder."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Page A\n\nProse.\n")
    (tmp_path / "docs" / "b.md").write_text("# Page B\n\nProse.\n")
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nProse.\n")
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "topic.py").write_text("x = 1\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: test\n")
    served = tmp_path / "served"
    served.mkdir()
    config = SimpleNamespace(config_file_path=str(tmp_path / "mkdocs.yml"),
                             docs_dir=str(tmp_path / "docs"), site_dir=str(served),
                             watch=[str(tmp_path / "snippets")])
    return SimpleNamespace(root=tmp_path, served=served, config=config)


def build(hook, site):
    """What MkDocs does at each build: the hook's on_pre_build, then pages written."""
    hook.on_pre_build(site.config)
    for page in ("a", "b", "index"):
        (site.served / f"{page}.html").touch()
    time.sleep(0.01)


def later(path: Path, text: str):
    """Write a file with a modification time after the last build's start, whatever the
    file system's timestamp resolution."""
    path.write_text(text)
    future = time.time() + 2
    os.utime(path, (future, future))


def test_a_prose_edit_keeps_the_other_pages(hook, site):
    hook.on_startup(command="serve", dirty=True)
    build(hook, site)
    later(site.root / "docs" / "a.md", "# Page A\n\nProse, edited.\n")
    hook.on_pre_build(site.config)
    assert sorted(p.name for p in site.served.iterdir()) == ["a.html", "b.html", "index.html"]


@pytest.mark.parametrize("change", ["snippet", "benchmark", "config", "title", "new page",
                                    "home page"])
def test_anything_else_rebuilds_every_page(hook, site, change):
    hook.on_startup(command="serve", dirty=True)
    build(hook, site)
    if change == "snippet":
        later(site.root / "snippets" / "topic.py", "x = 2\n")
    elif change == "benchmark":  # not in config.watch: the rendering's own list names it
        (site.root / "benchmarks").mkdir()
        later(site.root / "benchmarks" / "bench_topic.py", "LABELS = {}\n")
    elif change == "home page":  # a partial build's search index would keep it alone
        later(site.root / "docs" / "index.md", "# Home\n")
    elif change == "config":
        later(site.root / "mkdocs.yml", "site_name: renamed\n")
    elif change == "title":
        (site.root / "docs" / "b.md").write_text("# Page B, renamed\n\nProse.\n")
    else:
        (site.root / "docs" / "c.md").write_text("# Page C\n")
    hook.on_pre_build(site.config)
    assert list(site.served.iterdir()) == []


@pytest.mark.parametrize("command, dirty", [("build", False), ("serve", False)])
def test_inert_outside_a_dirty_serve(hook, site, command, dirty):
    hook.on_startup(command=command, dirty=dirty)
    build(hook, site)
    later(site.root / "snippets" / "topic.py", "x = 2\n")
    hook.on_pre_build(site.config)
    assert sorted(p.name for p in site.served.iterdir()) == ["a.html", "b.html", "index.html"]


def test_make_serve_is_the_dirty_serve_the_hook_serves():
    makefile = (ROOT / "Makefile").read_text()
    assert "mkdocs serve --dirty" in makefile
    assert "hooks/rebuild_what_changed.py" in (ROOT / "mkdocs.yml").read_text()


def test_a_full_rebuild_empties_the_rendering_caches(hook, site):
    from fieldguide.rendering import labels

    labels.declarations(ROOT / "benchmarks" / "bench_events.py")  # filled, as a build fills it
    assert labels.declarations.cache_info().currsize >= 1
    hook.on_startup(command="serve", dirty=True)
    build(hook, site)
    later(site.root / "snippets" / "topic.py", "x = 2\n")
    hook.on_pre_build(site.config)
    assert labels.declarations.cache_info().currsize == 0


def test_pages_a_dirty_build_skips_are_read_so_the_nav_has_their_titles(hook, tmp_path):
    """Against MkDocs itself: a dirty build of a two-page site after an edit of one page."""
    pytest.importorskip("mkdocs")
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home page\n")
    (docs / "other.md").write_text("# The other page\n")
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: t\nnav:\n  - index.md\n  - other.md\n"
        f"hooks:\n  - {ROOT / 'hooks' / 'rebuild_what_changed.py'}\n")
    config = load_config(str(tmp_path / "mkdocs.yml"), site_dir=str(tmp_path / "served"))
    mkdocs_build(config)
    later(docs / "other.md", "# The other page\n\nEdited.\n")
    config = load_config(str(tmp_path / "mkdocs.yml"), site_dir=str(tmp_path / "served"))
    config.plugins.on_startup(command="serve", dirty=True)
    mkdocs_build(config, dirty=True)
    html = (tmp_path / "served" / "other" / "index.html").read_text()
    assert "Edited." in html and "Home page" in html and ">None<" not in html
