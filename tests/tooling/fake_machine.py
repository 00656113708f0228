"""Pytest plugin for the timing run's child processes in test_timing_run.py.

The run measures each benchmark module in a new Python, where a test's monkeypatch cannot
reach; `-p tests.tooling.fake_machine` in PYTEST_ADDOPTS puts the fingerprint that
FIELDGUIDE_FAKE_FINGERPRINT holds (JSON) in place of the GPU's.
"""

import json
import os

from fieldguide.measuring import fingerprint

fingerprint.collect = lambda device_index=0: json.loads(os.environ["FIELDGUIDE_FAKE_FINGERPRINT"])
