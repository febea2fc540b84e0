# Two commands on a fresh machine: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA ?= memseal-data

.PHONY: run test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

HOST ?= 127.0.0.1
PORT ?= 8420

run: $(STAMP)
	@echo "memseal: point HTTP clients at http://$(HOST):$(PORT)/v1 (OpenAPI: /docs) and MCP clients at http://$(HOST):$(PORT)/mcp; Ctrl-C stops it"
	$(BIN)/memseal serve --data $(DATA) --host $(HOST) --port $(PORT)

test: $(STAMP) lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# All of tests/ is type-checked too, bodies included (check_untyped_defs; see pyproject.toml).
typecheck: $(STAMP)
	$(BIN)/mypy -p memseal
	MYPYPATH=tests $(BIN)/mypy --explicit-package-bases tests

# One worker a core (pytest-xdist); PYTEST_ARGS adds options, e.g. PYTEST_ARGS="-n 0 -x".
unit: $(STAMP)
	$(BIN)/pytest -n auto $(PYTEST_ARGS)

# One table of issue 17's rows, each beside its floor and the peer (docs/performance.md),
# then issue 38's: recall@5, stale@5 and trap@5 of fetch and packs (docs/engine.md), and
# what its currency rule costs a read, off against on (docs/performance.md).
bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/currency_eval.py $(CURRENCY_ARGS)
	$(BIN)/python benchmarks/currency_cost.py $(CURRENCY_COST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
