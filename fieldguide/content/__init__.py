"""What the repository's pages and snippets hold and declare, read without running them.

- pages.py: the pages, their includes (`--8<--`), drafts, the GPUs a page's code needs
- snippets.py: a snippet module's named sections and its GPUS_NEEDED
- prompts.py: a page's "predict, then run" blocks

May import: nothing of fieldguide but `fieldguide.ROOT`.
"""
