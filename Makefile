# Two entry points for a fresh machine (see README): `make demo` and `make test`.
# GPU users: `make demo TORCH="torch==<version> --index-url <your CUDA wheel index>"`, or install
# torch into .venv first; the package itself only asks for torch>=2.4.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin

.PHONY: demo test install install-test lint clean

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

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q $(ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check mixerzoo tests
	$(BIN)/ruff format --check mixerzoo tests

clean:
	rm -rf $(VENV) results .pytest_cache
