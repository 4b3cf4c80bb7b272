# make test  - lint, type-check, validate the Bicep, run the test suite (installs what is missing)
# make demo  - the whole flow offline: local Cosmos server + peek-lock queue + the real function
# make docs  - the documentation site (mkdocs.yml) into site/, failing on any warning
PYTHON ?= python3.13
VENV := .venv
PY := $(VENV)/bin/python
INFRA_VENV := .venv-infra
# The host-worker protocol messages the local host hands Microsoft's worker (local/standins/worker.py),
# compiled with grpcio-tools; the generated module is git-ignored.
PROTO := local/standins/protos/function_rpc.proto
PROTO_MODULE := local/standins/protos/function_rpc_pb2.py
DEMO_ARGS ?=
CHAOS_ARGS ?=
BENCH_ARGS ?=

.PHONY: install install-python install-node install-infra protos lint typecheck infra-lint test demo \
        chaos bench azurite clean docs

install: install-python install-node

install-python: $(VENV)/.installed $(PROTO_MODULE)
# requirements.txt installs the kit from ./kit as a deployed app does; here it is then reinstalled
# editable (its dependencies are already in), so an edit of kit/src is what the tests run.
$(VENV)/.installed: requirements.txt requirements-dev.txt kit/pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is required: install Python 3.13 (pyenv install 3.13, or uv python install 3.13)" >&2; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps --editable ./kit
	# pip built ./kit in its own tree: leave nothing there a publish could ship (.funcignore)
	rm -rf kit/build kit/dist kit/src/*.egg-info
	touch $@

protos: $(PROTO_MODULE)
$(PROTO_MODULE): $(PROTO) $(VENV)/.installed
	$(PY) -m grpc_tools.protoc -Ilocal/standins/protos --python_out=local/standins/protos $(PROTO)

install-node: node_modules/.installed
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# checkov pins many libraries of its own: it gets a venv of its own.
install-infra: $(INFRA_VENV)/.installed
$(INFRA_VENV)/.installed: requirements-infra.txt
	test -x $(INFRA_VENV)/bin/python || $(PYTHON) -m venv $(INFRA_VENV)
	$(INFRA_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(INFRA_VENV)/bin/python -m pip install --quiet -r requirements-infra.txt
	touch $@

# lint-imports: the dependency contracts of pyproject.toml ([tool.importlinter], docs/architecture.md "Layout").
lint: install-python
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-logo

typecheck: install-python
	$(VENV)/bin/mypy

infra-lint: install-infra
	$(INFRA_VENV)/bin/checkov -d infra --framework bicep --quiet --compact --skip-download

test: install install-infra lint typecheck infra-lint
	$(PY) -m pytest

demo: install
	$(PY) -m local demo $(DEMO_ARGS)

# MkDocs with --strict: a broken link or anchor, a missing page or one left out of the nav fails
# (mkdocs.yml's validation). `make test` builds it too (tests/docs). NO_MKDOCS_2_WARNING: the
# theme's notice of its end of life, printed on every build.
docs: install-python
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# Long runs, outside `make test` (the suite runs small versions of both).
chaos: install
	$(PY) -m local chaos $(CHAOS_ARGS)

bench: install
	$(PY) -m bench $(BENCH_ARGS)

azurite: install-node
	npx azurite --silent --location .local/azurite

clean:
	rm -rf $(VENV) $(INFRA_VENV) node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis \
		.import_linter_cache site

# The operator tool draining a 10,000-message dead-letter queue (docs/operations.md); long run.
.PHONY: bench-dead-letters
bench-dead-letters: install
	$(PY) -m bench.dead_letters $(BENCH_ARGS)

# Mutation testing of the product modules ([tool.mutmut] in pyproject.toml; docs/testing.md):
# 1-2 hours on 2 cores, so never part of `make test`. Writes docs/mutation-report.{md,json}.
# MUTANTS='shared.config.*' runs only those mutants again, over the last full run's results.
MUTANTS ?=
.PHONY: mutation
mutation: install
	$(PY) -m tools.mutation $(MUTANTS)
