# GPU Field Guide. `make help` lists the targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash

VENV      ?= .venv
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PY        := $(VENV)/bin/python
# `make test` and `make check` set up .venv first, unless PY=/path/to/python is given: then they
# run with that interpreter as it is (the scaffold test runs `make check` with its own).
SETUP     := $(if $(filter command line,$(origin PY)),,$(VENV)/.test)
SETUP_DOCS := $(if $(filter command line,$(origin PY)),,$(VENV)/.docs)
# GPU targets use the machine's own interpreter as it is: GPU runners are offline, and a
# measurement must not change the environment it measures.
GPU_PYTHON ?= python3
HOST      ?= 127.0.0.1
PORT      ?= 8000
PYTEST_ARGS ?=   # e.g. make test-gpu PYTEST_ARGS="tests/pages/test_streams.py -x"
export NO_MKDOCS_2_WARNING := 1   # silence Material's banner about MkDocs 2 in every build

.PHONY: help serve build zensical build-benchmark test test-gpu lint timings timings-list timings-report lock browser \
        slurm gpu-wheels clean notebooks new-page mermaid axe venv check loop-benchmark gpu-round outputs stress

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

$(VENV)/.docs: requirements/docs.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -r requirements/docs.txt
	touch $@

$(VENV)/.test: requirements/test.txt $(VENV)/.docs
	$(PY) -m pip install -q -r requirements/test.txt
	touch $@

venv: $(VENV)/.test ## Set up .venv with everything the tests need (torch CPU); then .venv/bin/python -m snippets.<chapter>.<topic>

# FIELDGUIDE_PREVIEW=1: a page's problems (a stale number, a stale notebook) are logged and shown
# in the page instead of stopping the preview; every build without it fails on them. --dirty:
# after a prose edit only that page renders again (hooks/rebuild_what_changed.py rebuilds all
# when a snippet, a timing run, the rendering code or a page title changed).
serve: $(SETUP_DOCS) ## Serve the site at http://127.0.0.1:8000 from the committed timings (no GPU, no torch)
	FIELDGUIDE_PREVIEW=1 $(PY) -m mkdocs serve --dirty --dev-addr $(HOST):$(PORT)

build: $(SETUP_DOCS) ## Build the site into site/ with --strict (fails on stale or missing timings)
	$(PY) -m mkdocs build --strict

# The second engine. --clean: Zensical keeps each page's HTML keyed by the page's own text, so
# without it a changed snippet or timing run would not render its pages again. `make test` runs
# this build too (tests/site/test_engines.py), and compares every page with MkDocs'.
zensical: $(VENV)/.docs ## Build the site with Zensical into site/ (the check of the second engine)
	$(PY) -m zensical build --clean

build-benchmark: $(VENV)/.docs ## Time cold and warm builds (MkDocs strict, Zensical) of a fresh copy of the tree
	$(PY) -m fieldguide.authoring.build_benchmark

# Chromium's headless shell: the browser test takes a tenth less CPU in it than in the full
# chromium (tests/browser/test_site_browser.py, CHROMIUM_NAMES). Where apt-get cannot install
# it, a chromium or Chrome on PATH serves instead.
BROWSERS := chromium chromium-browser google-chrome
browser: ## Install Debian's chromium-headless-shell for the browser test, unless $CHROMIUM or PATH has it
	@if [ -n "$$CHROMIUM" ]; then \
	  command -v "$$CHROMIUM" >/dev/null || { echo "CHROMIUM=$$CHROMIUM is not an executable" >&2; exit 1; }; \
	elif command -v chromium-headless-shell >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
	  echo "installing chromium-headless-shell (apt-get)"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell >/dev/null; \
	else \
	  for b in $(BROWSERS); do command -v $$b >/dev/null && { echo "no apt-get: the browser test runs $$b"; exit 0; }; done; \
	  echo "no apt-get to install chromium-headless-shell and no $(BROWSERS) on PATH: install one, or set CHROMIUM" >&2; exit 1; \
	fi

# The Slurm test (tests/pages/test_many_machines.py) submits a page's batch script to a real
# Slurm: slurmctld, slurmd and munged, started by the test as this user (tests/slurm/cluster.py).
SLURM_BINS := slurmctld slurmd munged sbatch srun scontrol sinfo scancel
slurm: ## Install Debian's Slurm (slurmctld, slurmd, slurm-client) and munge for the Slurm test, where missing
	@export PATH="$$PATH:/usr/sbin:/sbin"; missing=""; \
	for b in $(SLURM_BINS); do command -v $$b >/dev/null || missing="$$missing $$b"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing slurmctld, slurmd, slurm-client and munge (apt-get): missing$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    slurmctld slurmd slurm-client munge >/dev/null; \
	fi

lint: $(VENV)/.test ## Ruff over the code, snippets and tests
	$(PY) -m ruff check .

# The strict build runs once: the tests read it (FIELDGUIDE_BUILT_SITE, tests/conftest.py) instead
# of building the site again. Without SITE_URL, as CI and `make serve` build.
# Then the tests in two halves, as test-gpu runs them: first all but the `timed` and `whole_gpu`
# ones on TEST_WORKERS processes (pytest-xdist; most of a run's time is tests waiting on their
# children, timeouts and the browser, so two cores run two at once), then those alone, since
# they bound or compare times measured live. Both halves run whatever the first gave.
# --dist worksteal: each worker starts on its share of the queue, long tests first and then
# those that share a module fixture (fieldguide/measuring/pytest_plugin.py), and an idle worker takes
# tests from the end of a busy one's: with whole files as units (--dist loadfile) one worker
# ran the notebooks' file alone at the end (2026-11-26: 842 s, against 875 CPU-seconds of work
# for two cores). A module fixture whose tests get split runs once in each worker: none writes
# a fixed path that a twin could race (the Zensical check is one test for that reason).
# One per core: two per core made the parallel half slower on the idle 2-core machine
# (2026-11-26: 762 s against 730 s; make test 871 s against 840 s): the work is CPU-bound.
# The cores this process may use: nproc without OMP_NUM_THREADS and OMP_THREAD_LIMIT, which
# GNU nproc would otherwise return instead.
CORES := $(shell env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2)
TEST_WORKERS ?= $(CORES)
TEST_ENV := FIELDGUIDE_BUILT_SITE=site FIELDGUIDE_REQUIRE_SLURM=1   # Slurm is installed: a cluster that cannot start fails
# The environment of a parallel half on $(1) workers (make test's and test-gpu's): each worker,
# and every kernel, child or compile it starts, gets cores / workers OpenMP threads (torch
# otherwise starts one per core in every process, and on busy cores its threads spin waiting for
# each other), and Inductor compiles in the test's own process, not a pool of one per core.
# Each run alone on the idle 2-core machine, the notebooks' tests on two workers took 86 s and
# 148 CPU-seconds with a thread per core, 63 s and 93 with one (mixed-precision-training: 22 s
# against 4; 2026-11-27). An OMP_NUM_THREADS you set is kept; a worker count that is no number
# (pytest-xdist's auto, logical) gets one thread.
threads_per_worker = $(shell w='$(1)'; case "$$w" in (''|*[!0-9]*|0) echo 1;; \
  (*) echo $$(( $(CORES) / w > 0 ? $(CORES) / w : 1 ));; esac)
parallel_env = $(if $(filter environment command line,$(origin OMP_NUM_THREADS)),,OMP_NUM_THREADS=$(1)) \
               TORCHINDUCTOR_COMPILE_THREADS=1
TEST_PARALLEL_ENV := $(call parallel_env,$(call threads_per_worker,$(TEST_WORKERS)))
test: $(SETUP) browser slurm ## Set up and run everything CI runs: lint, tests (CPU + browser + Slurm), strict build
	$(PY) -m ruff check .
	env -u SITE_URL $(PY) -m mkdocs build --strict -d site
	status=0; \
	$(TEST_ENV) $(TEST_PARALLEL_ENV) $(PY) -m pytest -m "not timed and not whole_gpu" -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS) $(NO_TESTS_OK) || status=1; \
	$(TEST_ENV) $(PY) -m pytest -m "timed or whole_gpu" $(PYTEST_ARGS) $(NO_TESTS_OK) || status=1; \
	exit $$status

# Every way the tests, snippets and benchmarks start a local group of processes (the exercises'
# launch(), torchrun --standalone, two torchruns meeting in a c10d rendezvous, the benchmarks'
# rank harnesses, the Slurm cluster and its job), launched STRESS_RUNS times each (20 times that
# for the exercises' launch(), which takes a fraction of a second), alone and then beside
# STRESS_LOAD busy processes (at most 2, each ending by itself); failures counted by cause
# (tests/stress.py), the result appended to benchmarks/loop/stress.json, which the contributing
# guide shows. STRESS_CASES=a,b picks cases; STRESS_NOTE says where it ran. At the default 5:
# 100 launches of launch() and 5 of each other case in each half, several minutes (the result
# says how long one launch of each took).
STRESS_RUNS ?= 5
STRESS_LOAD ?= 2
stress: $(SETUP) slurm ## Launch every multi-process case STRESS_RUNS times, alone and under load; failures by cause
	$(PY) -m tests.stress --runs $(STRESS_RUNS) --load $(STRESS_LOAD) \
	  $(if $(STRESS_CASES),--cases $(STRESS_CASES)) $(if $(STRESS_NOTE),--note "$(STRESS_NOTE)")

# One page's loop: its notebook current, ruff on its files, a strict build of the site beside its
# tests, its snippets and its notebook, then the checks of the built site about it
# (fieldguide/authoring/check.py). Several pages: PAGE="docs/a/b.md docs/c/d.md", one build.
check: $(SETUP) ## One page's loop (target 90 s): make check PAGE=docs/execution/streams.md
	@[ -n "$(PAGE)" ] || { echo "usage: make check PAGE=docs/<chapter>/<page>.md" >&2; exit 2; }
	$(PY) -m fieldguide.authoring.check $(PAGE)

# Tests marked `timed` assert a speed-up or a time bound measured live, and tests marked
# `whole_gpu` read or fill the whole GPU's memory: both run alone, after the rest. The rest run
# first, in parallel where pytest-xdist is installed (GPU_WORKERS processes; a module-scoped
# fixture then runs once in each worker that gets a test of its module). The long tests start
# first (fieldguide/measuring/pytest_plugin.py) and an idle worker takes tests queued for a busy one
# (--dist worksteal), so the run does not end waiting on one worker.
# One worker per 9 GiB of GPU memory, at most 12 (of the machines' 16 cores): 8 on an H100,
# where the parallel half kept under 32 GB in use (four runs, 2026-11-24).
# Each is computed once, where first used: a plain `?=` re-ran python3 (and CUDA's start-up)
# at every mention, six times per test-gpu.
ifeq ($(origin GPU_WORKERS),undefined)
GPU_WORKERS = $(eval GPU_WORKERS := $(shell $(GPU_PYTHON) -c 'import xdist, torch; \
  print(min(12, torch.cuda.get_device_properties(0).total_memory // (9 * 2**30)))' 2>/dev/null))$(GPU_WORKERS)
endif
# Each worker, and every kernel, child or compile it starts, gets cores / workers library threads
# and compiles in its own process (the advice of the processes-threads-GIL page): with 16
# OpenMP threads and a 16-process Inductor compile pool per worker, 8 workers made the same long
# tests take 1.5 times as long, all 8 at once, as 6 at a time had (2026-11-24).
ifeq ($(origin GPU_THREADS),undefined)
GPU_THREADS = $(eval GPU_THREADS := $(if $(GPU_WORKERS),$(call threads_per_worker,$(GPU_WORKERS))))$(GPU_THREADS)
endif
# `=`, not `:=`: expanded only by test-gpu, so no other target starts python3 to count GPUs.
PARALLEL_ENV = $(if $(GPU_THREADS),$(call parallel_env,$(GPU_THREADS)))
# GPU_OUTCOMES=path: a JSON line as each test starts, and one as it ends with its outcome, seconds
# and a failure's text (a run cut off by a time limit still says what ran, what failed and why,
# and which tests started and never ended: those that hung).
GPU_OUTCOMES ?=
GPU_PYTEST := $(GPU_PYTHON) -m pytest --require-gpus -p no:cacheprovider \
              $(if $(GPU_OUTCOMES),--outcomes-log=$(GPU_OUTCOMES))
NO_TESTS_OK := || [ $$? -eq 5 ]   # pytest's "no tests collected" when PYTEST_ARGS picks one kind

test-gpu: ## On a CUDA machine: the whole suite with its python3; fails if a GPU test it could run is skipped
	@# -m "not browser": CI=true on a GPU runner too, and the browser check is CPU CI's job.
	@# The second half runs whatever the first gives, so one run shows every failure. It starts
	@# with the first and collects meanwhile (--after): its tests wait for the first half's end.
	@status=0; ended=$$(mktemp -u); \
	( $(PARALLEL_ENV) $(GPU_PYTEST) -m "not timed and not whole_gpu and not browser" $(if $(GPU_WORKERS),-n $(GPU_WORKERS) --dist worksteal) $(PYTEST_ARGS) $(NO_TESTS_OK); \
	  parallel=$$?; touch $$ended; exit $$parallel ) & first=$$!; \
	$(GPU_PYTEST) -m "(timed or whole_gpu) and not browser" --after $$ended $(PYTEST_ARGS) $(NO_TESTS_OK) || status=1; \
	wait $$first || status=1; rm -f $$ended; \
	exit $$status

# What a change needs measured on this GPU machine, in one device call (fieldguide/measuring/gpu_round.py):
# timing runs of what is new, stale or short of three runs from two leases (at most two from this
# lease), the outputs of pages whose blocks have none here, and `make test-gpu`, each step started
# only while GPU_ROUND_BUDGET seconds have room. ROUND_ARCHIVE=path packs what it wrote;
# ONLY="module.* ..." narrows the timings to those benchmarks.
STEPS ?= timings,outputs   # test-gpu in a call of its own: STEPS=test-gpu
GPU_ROUND_BUDGET ?= 570
gpu-round: ## On a CUDA machine: stale/short timing runs and missing outputs (STEPS=test-gpu: the tests), inside one call's budget
	$(GPU_PYTHON) -m fieldguide.measuring.gpu_round --steps $(STEPS) --budget $(GPU_ROUND_BUDGET) \
	  $(if $(ROUND_ARCHIVE),--archive $(ROUND_ARCHIVE)) $(if $(ONLY),--only $(ONLY))

# One notebook at a time, with the GPU to itself (fieldguide/notebooks/record_outputs.py refuses otherwise).
outputs: ## On a CUDA machine: record what each page's code prints where its blocks have no output here (ALL=1: every page)
	$(GPU_PYTHON) -m fieldguide.notebooks.record_outputs $(if $(ALL),--all)

# STALE=1: only the benchmarks this machine's GPU has never measured, or whose code changed since.
timings: ## On a CUDA machine: run the benchmarks and add the run to timings/<machine>/ (STALE=1: only stale or new ones)
	$(GPU_PYTHON) -m fieldguide.measuring.timing_run $(if $(STALE),--stale)

timings-list: ## List benchmark names (for `python3 -m fieldguide.measuring.timing_run --only NAME`)
	$(GPU_PYTHON) -m fieldguide.measuring.timing_run --list

timings-report: $(VENV)/.docs ## How the kept runs agree: runs per GPU, benchmarks whose runs disagree by >20%
	$(PY) -m fieldguide.measuring.report

# Standard library only: both work on a fresh clone, before any setup.
notebooks: ## Regenerate notebooks/ from the pages; commit them (`make test` and the build check them)
	python3 -m fieldguide.notebooks

new-page: ## Scaffold a page: make new-page CHAPTER=data_movement TOPIC=caching_allocator [DRAFT=1]
	python3 -m fieldguide.authoring.scaffold $(if $(DRAFT),--draft) "$(CHAPTER)" "$(TOPIC)"

# Mermaid draws the diagrams in the browser. The site works offline, so its MIT-licensed
# dist/mermaid.min.js is committed under docs/assets/javascripts/ (overrides/main.html loads it on
# pages with a diagram); this target replaces it with another version from the npm registry.
MERMAID_VERSION ?= 11.17.2
mermaid: ## Re-vendor Mermaid (MERMAID_VERSION=11.17.2) into docs/assets/javascripts/ with npm
	@tmp=$$(mktemp -d) && cd $$tmp && npm pack -q mermaid@$(MERMAID_VERSION) >/dev/null && \
	  tar -xzf mermaid-$(MERMAID_VERSION).tgz && \
	  cp package/dist/mermaid.min.js $(CURDIR)/docs/assets/javascripts/mermaid.min.js && \
	  cp package/LICENSE $(CURDIR)/docs/assets/javascripts/mermaid.LICENSE && \
	  rm -rf $$tmp && echo "docs/assets/javascripts/mermaid.min.js: mermaid $(MERMAID_VERSION)"

# axe-core (Deque, MPL-2.0): the accessibility rules the browser test runs in every page. Vendored
# under tests/browser/ so the test needs no network; this target replaces it from the npm registry.
AXE_VERSION ?= 4.14.1
axe: ## Re-vendor axe-core (AXE_VERSION=4.14.1) into tests/browser/ with npm
	@tmp=$$(mktemp -d) && cd $$tmp && npm pack -q axe-core@$(AXE_VERSION) >/dev/null && \
	  tar -xzf axe-core-$(AXE_VERSION).tgz && \
	  cp package/axe.min.js $(CURDIR)/tests/browser/axe.min.js && \
	  cp package/LICENSE $(CURDIR)/tests/browser/axe.LICENSE && \
	  rm -rf $$tmp && echo "tests/browser/axe.min.js: axe-core $(AXE_VERSION)"

lock: $(VENV)/.docs ## Re-pin requirements/*.txt from pyproject.toml
	$(PY) -m pip install -q pip-tools
	$(PY) -m piptools compile -q --strip-extras --no-emit-index-url --no-emit-find-links \
	  --extra docs -o requirements/docs.txt pyproject.toml
	$(PY) -m piptools compile -q --strip-extras --no-emit-index-url --no-emit-find-links \
	  --extra docs --extra test -o requirements/test.txt pyproject.toml
	sed -i 's/^torch==\(.*\)+cpu$$/torch==\1/' requirements/test.txt  # the CPU build's local tag

# The GPU machines are offline: the notebook tests' packages and py-spy (the many-machines page
# dumps a hung rank's stack with it; its wheel is an x86-64 binary) travel as wheels (.whl/ is
# ignored by git). There: python3 -m pip install -q --no-index --no-deps --target /tmp/site
# .whl/*.whl and PYTHONPATH=/tmp/site make test-gpu (the tests look for py-spy in /tmp/site/bin
# too). Nothing is installed into the interpreter that measures.
GPU_WHEEL_PLATFORMS := $(foreach p,manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 any,--platform $(p))

gpu-wheels: ## Download the notebook tests' packages and py-spy as wheels into .whl/ for an offline GPU machine (Python 3.12)
	python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
	  $(GPU_WHEEL_PLATFORMS) -d .whl nbclient nbformat ipykernel py-spy

# The contributor's loop, timed in a fresh clone of HEAD (benchmarks/loop/run.py): strict build
# cold and warm, `make serve` (with its install) and a reload after a prose edit, `make check` of
# one page, and `make test` (LOOP_STEPS=... picks some). Appends to benchmarks/loop/results.json,
# which docs/contributing.md shows.
LOOP_STEPS ?= build,serve,check,test
loop-benchmark: ## Time the contributor's loop in a fresh clone; appends to benchmarks/loop/results.json
	$(if $(filter command line,$(origin PY)),$(PY),python3) -m benchmarks.loop.run --steps $(LOOP_STEPS)

clean: ## Remove the virtual environment and build outputs
	rm -rf $(VENV) site .pytest_cache .ruff_cache
