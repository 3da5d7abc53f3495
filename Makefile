# Set-up is part of every target: the first run creates .venv and installs the project (CPU torch pinned).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export MLFLOW_DISABLE_TELEMETRY := true
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo demo-metaworld test test-all bench bench-quality bench-labelling bench-active clean

$(STAMP): pyproject.toml
	@# Meta-World renders headless through OSMesa: install it only where it is missing
	@ldconfig -p | grep -q libOSMesa || { command -v apt-get >/dev/null && (apt-get update -qq && apt-get install -y -qq libosmesa6) \
		|| echo "warning: install OSMesa (libosmesa6) to render Meta-World suites"; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==2.13.0" -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)  ## the main job, end to end, on embedded defaults
	$(BIN)/autorater demo

demo-metaworld: $(STAMP)  ## the main job on Meta-World (3-D robot video rendered headless)
	$(BIN)/autorater demo --world metaworld

test: $(STAMP)  ## lint, then the fast test suite (what CI runs)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

test-all: $(STAMP)  ## every test, the slow ones too
	$(BIN)/python -m pytest -m "slow or not slow"

bench: $(STAMP)  ## throughput benchmarks: generation, decoding
	$(BIN)/python -m benchmarks.throughput

bench-quality: $(STAMP)  ## the quality benchmark: held-out sets, baselines, training time
	$(BIN)/python -m benchmarks.quality

bench-labelling: $(STAMP)  ## labelling throughput, human work saved, leaderboard vs truth (needs demo-out/model)
	$(BIN)/python -m benchmarks.labelling

bench-active: $(STAMP)  ## simulated active-learning rounds: BA per human label, per strategy
	$(BIN)/python -m benchmarks.active_learning

clean:
	rm -rf demo-out bench-out runs mlruns mlflow.db
