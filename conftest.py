# Shared by tests/ and benchmarks/: device needs from snippets, the GPU-skip guard, file hashes.
pytest_plugins = ["fieldguide.pytest_plugin"]
