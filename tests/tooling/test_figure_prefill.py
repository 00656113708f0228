"""The figure prefill (fieldguide/rendering/figure_prefill.py): it draws exactly the figures the build will
ask the cache for, last page first; its command carries the build's settings; FIELDGUIDE_NO_PREFILL
turns it off; it stops once the build's process is gone. (That a build starts it once, on a miss,
is tests/site/test_site_build.py's; that a cold build gains from it, the loop benchmark's
build_cold, benchmarks/loop/.)"""

import os
import sys
from pathlib import Path

import pytest

from fieldguide.rendering import figure_cache, figure_prefill, shortcodes

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
PAGE = "memory/needing-less-memory.md"   # one chart: the cheapest page with a figure


def settings() -> tuple[str, list[str]]:
    """The build's own timings settings (mkdocs.yml, under fieldguide.rendering.render)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)
    for extension in config["markdown_extensions"]:
        if isinstance(extension, dict) and "fieldguide.rendering.render" in extension:
            options = extension["fieldguide.rendering.render"]
            return options["timings"], list(options.get("beside") or [])
    raise AssertionError("mkdocs.yml configures no fieldguide.rendering.render")


def test_it_finds_the_pages_with_figures_last_first(tmp_path):
    docs = tmp_path / "docs"
    (docs / "a").mkdir(parents=True)
    (docs / "a" / "one.md").write_text("<!-- timing-chart: x* x=n y=median -->\n")
    (docs / "a" / "two.md").write_text("only a number: <!-- timing-value: x -->\n")
    (docs / "b.md").write_text("<!-- timing-diagram: ring -->\n")
    assert [src for src, _ in figure_prefill.pages_with_figures(docs)] == ["b.md", "a/one.md"]


@pytest.mark.parametrize(("src", "url"), [("index.md", ""), ("execution/index.md", "execution/"),
                                          ("execution/events.md", "execution/events/")])
def test_page_urls_are_mkdocs_directory_urls(src, url):
    assert figure_prefill.page_url(src) == url


def test_what_it_draws_is_what_the_build_then_finds(tmp_path, monkeypatch):
    pytest.importorskip("pymdownx.details")  # the build converts tab contents with the site's Markdown
    monkeypatch.setattr(figure_cache, "CACHE", tmp_path / "figures")  # absolute: root / it = it
    gpu, beside = settings()
    markdown = (ROOT / "docs" / PAGE).read_text(encoding="utf-8")
    before = dict(figure_cache.stats)
    prefill = shortcodes.Build(ROOT, gpu, beside=beside, to_html=lambda text: text)
    prefill.render_page(markdown, PAGE, figure_prefill.page_url(PAGE))
    drawn = figure_cache.stats["misses"] - before["misses"]
    assert drawn >= 1 and any((tmp_path / "figures").rglob("*.json"))
    # The build, with the site's own Markdown for tab contents, finds every figure drawn.
    build = shortcodes.Build(ROOT, gpu, beside=beside)
    _, page = build.render_page(markdown, PAGE, figure_prefill.page_url(PAGE))
    assert not page.problems
    assert figure_cache.stats["misses"] - before["misses"] == drawn, "the build drew again"
    assert figure_cache.stats["hits"] - before["hits"] == drawn


def test_run_as_the_build_runs_it_it_fills_the_cache_for_the_pages(tmp_path, monkeypatch):
    monkeypatch.setattr(figure_cache, "CACHE", tmp_path / "figures")
    gpu, beside = settings()
    args = [str(ROOT), "--gpu", gpu, "--parent", str(os.getppid()), "--page", PAGE]
    assert figure_prefill.main(args + [f"--beside={slug}" for slug in beside]) == 0
    assert any((tmp_path / "figures").rglob("*.json"))


def test_it_stops_at_once_when_the_build_is_gone(tmp_path, monkeypatch):
    monkeypatch.setattr(figure_cache, "CACHE", tmp_path / "figures")
    gpu, _ = settings()
    misses = figure_cache.stats["misses"]
    gone = 2 ** 22 + 1  # above pid_max's default: no such process, so not this one's parent
    assert figure_prefill.main([str(ROOT), "--gpu", gpu, "--parent", str(gone)]) == 0
    assert figure_cache.stats["misses"] == misses
    assert not (tmp_path / "figures").exists()


class FakeProcess:
    def __init__(self, command, **kwargs):
        self.command, self.pid = command, None

    def poll(self):
        return None   # still running


def test_its_command_names_the_build_settings_and_its_parent(monkeypatch):
    monkeypatch.setattr(figure_prefill.subprocess, "Popen", FakeProcess)
    monkeypatch.setattr(figure_prefill, "_running", [])
    monkeypatch.delenv(figure_prefill.OFF, raising=False)
    process = figure_prefill.start(ROOT, "some-gpu", ["other-gpu"])
    assert process.command == [sys.executable, "-m", "fieldguide.rendering.figure_prefill", str(ROOT),
                               "--gpu", "some-gpu", "--parent", str(os.getpid()),
                               "--beside", "other-gpu"]


@pytest.mark.parametrize(("value", "off"), [("1", True), ("yes", True), ("0", False), ("", False)])
def test_fieldguide_no_prefill_turns_it_off(monkeypatch, value, off):
    monkeypatch.setattr(figure_prefill.subprocess, "Popen", FakeProcess)
    monkeypatch.setattr(figure_prefill, "_running", [])
    monkeypatch.setenv(figure_prefill.OFF, value)
    assert (figure_prefill.start(ROOT, "some-gpu", []) is None) == off


def test_a_project_without_the_package_gets_none(tmp_path, monkeypatch):
    monkeypatch.setattr(figure_prefill.subprocess, "Popen", FakeProcess)
    monkeypatch.delenv(figure_prefill.OFF, raising=False)
    assert figure_prefill.start(tmp_path, "some-gpu", []) is None
