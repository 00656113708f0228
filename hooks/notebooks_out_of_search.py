"""MkDocs hook: the notebook pages (mkdocs-jupyter renders each page's notebook as a page of its
own, under /notebooks/) stay out of the site search.

Each repeats its lesson's prose and code, so indexed they would double every search hit with a
copy that has no shortcode's numbers; and indexing their HTML (about 0.7 MB each, the notebook
viewer's styles included) was a third of a warm build's time. Zensical runs no hooks and indexes
them: its search is its own."""


def on_page_content(html, page, config, files):
    if page.file.src_uri.startswith("notebooks/"):
        page.meta.setdefault("search", {})["exclude"] = True
    return html
