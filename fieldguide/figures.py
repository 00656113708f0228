"""Figures drawn at build time: SVGs held in memory during a build, shown as light and dark images.

The figure hooks hand their SVGs to `embed`, which returns the HTML for the page; `write` puts
every SVG of the build under site/assets/charts/ once the build is done.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from mkdocs.utils import get_relative_url

CHART_DIR = "assets/charts"
_svgs: dict[str, str] = {}


def clear() -> None:
    _svgs.clear()


def embed(svgs: dict[str, str], alt: str, caption_html: str, details_markdown: str,
          page_url: str) -> str:
    """<figure> with one <img> per theme (Material's #only-light / #only-dark) and the numbers
    behind it in a collapsed block."""
    imgs = []
    for theme, svg in svgs.items():
        name = f"{CHART_DIR}/{hashlib.sha256(svg.encode()).hexdigest()[:16]}-{theme}.svg"
        _svgs[name] = svg
        imgs.append(f'<img src="{get_relative_url(name, page_url)}#only-{theme}" alt="{alt}">')
    details = details_markdown.strip().replace("\n", "\n    ")
    return (
        f'\n<figure class="timing-chart">\n{chr(10).join(imgs)}\n'
        f"<figcaption>{caption_html}</figcaption>\n</figure>\n\n"
        f'??? note "The numbers behind this figure"\n\n    {details}\n'
    )


def write(site_dir: str | Path) -> None:
    for name, svg in _svgs.items():
        path = Path(site_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(svg, encoding="utf-8")
