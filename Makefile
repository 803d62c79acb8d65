# The two commands of the README: `make demo` (set up, run the main job) and `make test` (set up, run the tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.diffreason-installed

.PHONY: setup demo test bench

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	test -f runs/tiny/config.json || $(BIN)/diffreason build-model --preset tiny runs/tiny
	$(BIN)/diffreason generate --model runs/tiny --seed 0 --max-new-tokens 64 "Hello, diffusion"

test: setup
	$(BIN)/python -m pytest tests -q

bench: setup
	$(BIN)/python -m diffreason.evals.bench_engine --preset small --repeats 3
