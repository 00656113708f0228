# Shared by tests/ and benchmarks/: device needs from snippets, the GPU-skip guard, file hashes.
import os

import torch

pytest_plugins = ["fieldguide.measuring.pytest_plugin"]

# Without a GPU, every Triton kernel runs in Triton's interpreter. Triton reads TRITON_INTERPRET
# once, when triton.language is first imported, and in a whole run some page's torch.compile or
# Dynamo import loads Triton long before the Triton page's tests are collected: set it here,
# before any test module is imported (a full CPU run failed 9 Triton tests that pass alone).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
