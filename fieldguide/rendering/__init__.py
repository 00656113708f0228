"""The site's rendering: the Markdown extensions of mkdocs.yml and all they draw.

- render.py: the extension `fieldguide.rendering.render` (shortcodes, figures, notebook links);
  context.py: the page being rendered and PageProblems; unrendered.py: the guard
- shortcodes.py: the shortcodes' registry (RENDERERS) and the text ones (value, ratio, table)
- labels.py: how benchmarks and fields are named in tables and charts
- charts.py, roofline.py (with fieldguide/datasheets.toml), memory_chart.py, diagrams.py, figures.py:
  the figures; figure_cache.py and figure_prefill.py: drawn once, kept by content
- calculators.py (with pyjs.py, the estimators translated to JavaScript): the calculators
- glossary.py, placeholders.py, reading_time.py, loop_results.py: the other extensions

May import: fieldguide.content, fieldguide.measuring, fieldguide.notebooks.
"""
