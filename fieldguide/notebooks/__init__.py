"""Each page's notebook, and what its code printed on a GPU.

- generate.py: a page becomes its notebook (`make notebooks`: `python3 -m fieldguide.notebooks`,
  `--check`), and the links a lesson shows to it
- outputs.py: recorded outputs, keyed by each block's code, and how a page shows them
- record_outputs.py: running the notebooks on a GPU to record them (`make outputs`);
  record_commands.py: the same for the shell commands a page declares

May import: fieldguide.content, fieldguide.measuring.
"""
