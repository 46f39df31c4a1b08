# `make test` and `make demo` set themselves up: they create .venv/ at the repo root
# and install the package with its extras the first time (and again when
# pyproject.toml changes); afterwards they only run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: test lint typecheck pytest docs bench demo clean

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
# nothing in them is asserted by the tests. BENCH_KUBECONFIG=path also measures
# informers.py's initial sync and memory against that cluster.
BENCH_KUBECONFIG ?=
bench: $(BENCH_STAMP)
	@for script in benchmarks/[!_]*.py; do \
		echo "== $$script"; \
		if [ "$$script" = benchmarks/informers.py ] && [ -n "$(BENCH_KUBECONFIG)" ]; then \
			$(BIN)/python $$script --kubeconfig "$(BENCH_KUBECONFIG)" || exit 1; \
		else \
			$(BIN)/python $$script || exit 1; \
		fi; \
	done

demo: $(STAMP)
	$(BIN)/kubereflector demo

clean:
	rm -rf $(VENV) site .mypy_cache .pytest_cache .ruff_cache
