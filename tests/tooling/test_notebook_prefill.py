"""The notebook prefill (hooks/notebook_prefill.py) writes, for a notebook, the very cache entry
mkdocs-jupyter writes (same file name, same JSON), so the build reads it as its own; it lists
only the published notebooks (not drafts) whose entry is missing; it stops once the build's
process is gone."""

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("mkdocs_jupyter")


def load_hook():
    spec = importlib.util.spec_from_file_location("notebook_prefill", ROOT / "hooks/notebook_prefill.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def site(tmp_path, monkeypatch):
    """The site's config with mkdocs-jupyter's cache in tmp_path, its files, the plugin."""
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files, set_exclusions

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))       # mkdocs.yml's fieldguide.rendering.render extension
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    monkeypatch.setenv("FIELDGUIDE_NO_PREFILL", "1")
    config = load_config(str(ROOT / "mkdocs.yml"))
    plugin = config.plugins["mkdocs-jupyter"]
    plugin.config["cache_dir"] = str(tmp_path / "cache")
    plugin.on_pre_build(config)
    files = plugin.on_files(get_files(config), config)
    set_exclusions(files, config)   # as the build does before on_nav: drafts are marked
    notebooks = [f for f in files if plugin.should_include(f) and f.inclusion.is_included()]
    assert notebooks, "mkdocs-jupyter includes no notebook of this site"
    if len(notebooks) == len([f for f in files if plugin.should_include(f)]):
        pytest.skip("no draft page has a notebook now: nothing for the prefill to leave out")
    return config, files, plugin, notebooks


def test_its_entry_is_the_one_mkdocs_jupyter_writes(site, tmp_path):
    from mkdocs.structure.pages import Page

    config, files, plugin, notebooks = site
    hook = load_hook()
    options = {name: plugin.config[name] for name in hook.OPTIONS}
    notebook = notebooks[0]
    ours = hook.entry(notebook.abs_src_path, options)
    page = plugin.on_pre_page(Page(None, notebook, config), config, files)
    page.render(config, files)   # mkdocs-jupyter converts it and writes its entry
    written = list((tmp_path / "cache").glob("*.json"))
    assert [p.name for p in written] == [hook.cache_path(notebook.abs_src_path, options).name]
    assert json.loads(written[0].read_text(encoding="utf-8")) == json.loads(json.dumps(ours))


def test_only_the_published_notebooks_missing_from_the_cache_are_listed(site, monkeypatch):
    config, files, plugin, notebooks = site
    hook = load_hook()
    options = {name: plugin.config[name] for name in hook.OPTIONS}
    hook.write_whole(hook.cache_path(notebooks[0].abs_src_path, options), {"content": ""})
    started = []
    monkeypatch.delenv("FIELDGUIDE_NO_PREFILL")
    monkeypatch.setattr(hook.subprocess, "Popen", lambda command, **kw: started.append(command)
                        or SimpleNamespace(pid=None, poll=lambda: 0))   # "finished at once"
    monkeypatch.setattr(hook, "_process", None)
    hook.on_nav(None, config, files)
    (command,) = started
    listed = command[command.index("--options") + 2:]
    assert listed == [f.abs_src_path for f in reversed(notebooks[1:])]   # last first


def test_it_stops_at_once_when_the_build_is_gone(site, tmp_path):
    config, files, plugin, notebooks = site
    hook = load_hook()
    options = {name: plugin.config[name] for name in hook.OPTIONS}
    gone = 2 ** 22 + 1  # above pid_max's default: not this process's parent
    assert hook.main(["--parent", str(gone), "--options", json.dumps(options),
                      notebooks[0].abs_src_path]) == 0
    assert not (tmp_path / "cache").exists()
