"""Tooling behind the GPU Field Guide: snippet metadata, the timing run, and timing data for the site.

Nothing in this package imports torch or CuPy at module level, so the site builds without them.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
