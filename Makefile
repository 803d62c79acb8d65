# The two commands of the README: `make demo` (set up, run the main job) and `make test` (set up, run the tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.diffreason-installed

.PHONY: setup demo test bench

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --no-cache-dir -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# A medium puzzle (32 givens) from the generator's demo seed; the embedded model solves it on CPU.
PUZZLE ?= 6.58.37.9.237...6.97..5.3.273..6.....9.1.....15...942........1..4.2..5.......623.

demo: setup
	$(BIN)/diffreason solve sudoku "$(PUZZLE)"

test: setup
	$(BIN)/python -m pytest tests -q

bench: setup
	$(BIN)/python -m diffreason.evals.bench_engine --repeats 2 | tee evals/reports/bench_engine.txt
