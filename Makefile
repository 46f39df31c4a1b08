# `make test` and `make demo` set themselves up: they create .venv/ at the repo root
# and install the package with its extras the first time (and again when
# pyproject.toml changes); afterwards they only run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: test lint typecheck pytest docs bench demo clean fuzz

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[emulator,test,docs]'
	touch $(STAMP)

# The benchmarks' peers (kopf), apart from the test setup.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

test: lint typecheck docs pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

pytest: $(STAMP)
	$(BIN)/pytest -q

# The documentation site, built with --strict: a broken reference or link fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

# Benchmarks print tables with ratios against peers measured in the same run;
# nothing in them is asserted by the tests.
bench: $(BENCH_STAMP)
	@for script in benchmarks/[!_]*.py; do \
		echo "== $$script"; $(BIN)/python $$script || exit 1; \
	done

demo: $(STAMP)
	$(BIN)/kubereflector demo

# A longer fuzz campaign than the one `make test` runs (200 examples per test):
# `make fuzz FUZZ_EXAMPLES=100000`. Hypothesis keeps what it found in .hypothesis/.
FUZZ_EXAMPLES ?= 20000
fuzz: $(STAMP)
	KUBEREFLECTOR_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -q tests/fuzz -o timeout=0

clean:
	rm -rf $(VENV) site .mypy_cache .pytest_cache .ruff_cache
