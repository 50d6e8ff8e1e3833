# newsroom: the two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean

# pip's own output goes to $(VENV)/pip.log, not the terminal (it is mostly this machine's index
# settings and progress bars; `pip -qq --log` would still print them); a failure shows its end.
$(STAMP): pyproject.toml
	@echo "newsroom: installing Python packages into $(VENV) (a couple of minutes the first time; log: $(VENV)/pip.log)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --upgrade pip > $(VENV)/pip.log 2>&1 || { tail -n 40 $(VENV)/pip.log; exit 1; }
	@$(BIN)/python -m pip install -e '.[test]' >> $(VENV)/pip.log 2>&1 || { tail -n 40 $(VENV)/pip.log; exit 1; }
	@touch $(STAMP)
	@echo "newsroom: installed ($$($(BIN)/python -m pip list 2>/dev/null | tail -n +3 | wc -l) packages)"

demo: $(STAMP)
	@$(BIN)/newsroom demo $(DEMO_ARGS)

# Test modules are imported by their basename (rootdir-relative imports of conftest and the
# harnesses), so two test files of one name stop the whole run at collection: refuse that first.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	@dups=$$(find tests -name 'test_*.py' -printf '%f\n' | sort | uniq -d); \
	if [ -n "$$dups" ]; then echo "test files share a basename (rename one): $$dups"; exit 1; fi

test: $(STAMP)
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-postgresql.sh
	$(MAKE) lint
	$(BIN)/pytest -q

# The headline figures, each beside its same-run baseline, as one JSON object (docs/measurements.md).
bench: $(STAMP)
	$(BIN)/python -m bench.headline $(BENCH_ARGS)

clean:
	rm -rf var .pytest_cache
