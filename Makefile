# Two commands on a fresh machine:  `make demo`  and  `make test`  (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The main job: simulate a demo history, ingest it and write its monthly report.
demo: $(STAMP)
	$(BIN)/aegis-slurm demo --out reports/demo

# Everything, including the tests that start a real Slurm 22.05 cluster (needs root and apt).
test: $(STAMP)
	@if [ "$$(id -u)" = 0 ]; then bash tools/install-test-deps.sh; \
	else echo "not root: Slurm packages not installed; tests/slurm will skip"; fi
	$(BIN)/ruff check .
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .

# Meta's gcm (PyPI: gpucm) in a venv of its own, for bench_cbd's side-by-side measurement;
# kept out of the project venv because it pulls in pydantic, opentelemetry and more.
GCM_VENV := .venv-gcm
$(GCM_VENV)/bin/health_checks:
	$(PYTHON) -m venv $(GCM_VENV)
	$(GCM_VENV)/bin/pip install --quiet gpucm

bench: $(STAMP) $(GCM_VENV)/bin/health_checks
	$(BIN)/python benchmarks/bench_ingest.py
	AEGIS_GCM_HEALTH_CHECKS=$(GCM_VENV)/bin/health_checks $(BIN)/python benchmarks/bench_cbd.py
	$(BIN)/python benchmarks/bench_epilog.py
	$(BIN)/python benchmarks/bench_analytics.py
	$(BIN)/python benchmarks/bench_report.py
	$(BIN)/python benchmarks/bench_logs.py
	$(BIN)/python benchmarks/bench_minder.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
