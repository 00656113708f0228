"""The numbers: how they are measured on a GPU, kept, keyed and reported.

- timing_run.py: the timing run (`make timings`, `python3 -m fieldguide.measuring.timing_run`);
  gpu_round.py: one GPU round in one device call (`make gpu-round`)
- pytest_plugin.py: the harness every test and benchmark runs under (the `snippet`, `gpus`,
  `timed` markers, `gpu_benchmark`, a benchmark's code key in its record); the timing run
  loads it, so it lives here
- timings.py: the runs' data model (Timings, Run, Record, Benchmark) and their staleness
- codekey.py: a benchmark's code key; fingerprint.py: what a run records of its machine
- numbers.py: how every number reads (format, unit, range), on the site and in the report
- host_bound.py: numbers that measure the host, declared beside their benchmark
- estimates.py: the will-it-fit estimators against the runs that measured the same case
- report.py: `make report`

May import: fieldguide.content.
"""
