# newsroom: the two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean

# pip prints only errors here (-qq: no warnings about this machine's index settings, no progress);
# everything it did, warnings included, goes to $(VENV)/pip.log.
$(STAMP): pyproject.toml
	@echo "newsroom: installing Python packages into $(VENV) (a couple of minutes the first time; log: $(VENV)/pip.log)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -qq --log $(VENV)/pip.log --upgrade pip
	@$(BIN)/python -m pip install -qq --log $(VENV)/pip.log -e '.[test]'
	@touch $(STAMP)
	@echo "newsroom: installed ($$($(BIN)/python -m pip list 2>/dev/null | tail -n +3 | wc -l) packages)"

demo: $(STAMP)
	@$(BIN)/newsroom demo $(DEMO_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

test: $(STAMP)
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-postgresql.sh
	$(MAKE) lint
	$(BIN)/pytest -q

clean:
	rm -rf var .pytest_cache
