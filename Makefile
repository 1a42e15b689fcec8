# Two entry points for a fresh machine (see README): `make demo` and `make test` (`make test-all`: everything).
# GPU users: `make demo TORCH="torch==<version> --index-url <your CUDA wheel index>"`, or install
# torch into .venv first; the package itself only asks for torch>=2.4.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin

.PHONY: demo test test-all install install-test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e .
	touch $@

# the test suite also runs the Ray executor on a real local instance (plain ray is enough there)
$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install -q -e ".[test]" "ray>=2.9"
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: $(VENV)/.installed
	$(BIN)/mixerzoo demo $(ARGS)

# the fast tier (minutes): units, contracts, parity, claims, store, configs, CLI parsing and one
# end-to-end path of each kind; it prints its slowest tests
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q $(ARGS)

# everything: the fast tier and the full tier of tests/full_tier.txt (compile traces, spawned
# workers and kills, every Ray path, registry-wide training, every paper preset planned); CI runs it
test-all: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -m "" $(ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check mixerzoo tests
	$(BIN)/ruff format --check mixerzoo tests

clean:
	rm -rf $(VENV) results .pytest_cache
