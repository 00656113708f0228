"""What a contributor runs on a change: start a page, check it, time the site build.

- scaffold.py: `make new-page`
- check.py: `make check PAGE=...` (one page's loop)
- build_benchmark.py: `make build-benchmark`

May import: fieldguide.content, fieldguide.measuring, fieldguide.notebooks, fieldguide.rendering.
"""
