# Two commands set up everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
PIP := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: demo test lint typecheck pytest bench chaos clean requirements template

# `sam build` packaging targets (build-WorkerFunction, build-DeadLetterFunction).
include infra/build.mk

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[local,pydantic-ai]'
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[dev]'
	touch $@ $(STAMP_RUN)

## demo: run the sample research agent locally on moto, with a 2.5 s invocation budget
demo: $(STAMP_RUN)
	$(BIN)/continuum run samples.research_agent:research --input '{"topic": "tides"}' --budget 2.5

## test: lint, type-check and run the whole test suite (what CI runs)
test: lint typecheck pytest

lint: $(STAMP_DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP_DEV)
	$(BIN)/mypy

pytest: $(STAMP_DEV)
	$(BIN)/pytest

## chaos: 200 tasks under random worker deaths, AWS faults and hostile deliveries (SEED=n)
SEED ?= 1
chaos: $(STAMP_RUN)
	$(BIN)/python -m chaos.harness --tasks 200 --seed $(SEED)

## bench: the benchmarks; each prints `name: value unit` lines
bench: $(STAMP_RUN)
	$(BIN)/python -m benchmarks.run

## requirements: regenerate infra/requirements.txt from pyproject.toml
requirements: $(STAMP_RUN)
	$(BIN)/python infra/gen_requirements.py

## template: regenerate infra/template.yaml from continuum/scaffold/templates/template.yaml.tmpl
template: $(STAMP_RUN)
	$(BIN)/python infra/gen_template.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info
