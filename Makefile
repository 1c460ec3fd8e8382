# Two commands set up everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
# pytest's workers (pytest-xdist): one per core by default.
WORKERS ?= auto

.PHONY: demo test docs lint typecheck pytest pytest-slow oldest sam-tools bench chaos clean requirements template

# `sam build` packaging targets (build-WorkerFunction, build-DeadLetterFunction,
# build-CallbackLinkFunction).
include infra/build.mk

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[local,pydantic-ai]'
	touch $@

# The tests' venv holds the newest versions the package's ranges allow, as a user's fresh install
# does: a stamp older than a day is dropped, so that a stale venv cannot hide a new release.
$(shell find $(STAMP_DEV) -mmin +1440 -delete 2>/dev/null)
$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(PIP) install --upgrade --upgrade-strategy eager -e '.[dev]'
	$(PIP) uninstall -y aws-sam-translator 2>/dev/null  # see SAM_TOOLS
	touch $@ $(STAMP_RUN)

# SAM's translator and cfn-lint, for tests/test_template.py, in a venv of their own: the
# translator pins pydantic to one minor, and in the tests' venv would decide the pydantic every
# test sees. (moto[server] brings a cfn-lint of its own, which no longer needs the translator.)
SAM_VENV ?= .venv-infra
SAM_TOOLS := 'aws-sam-translator>=1.90' 'cfn-lint>=1.20'
STAMP_SAM := $(SAM_VENV)/.installed
$(STAMP_SAM):
	test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip --disable-pip-version-check -q install --upgrade $(SAM_TOOLS)
	touch $@

## sam-tools: the venv of SAM's translator and cfn-lint that the template tests call
sam-tools: $(STAMP_SAM)

# The oldest end of every range: venvs with the lowest versions pyproject.toml allows
# (tests/lowest_versions.py), where the key suites run again (in the first, less those marked
# slow: they install the wheel in venvs of their own, at the newest versions). The pydantic-ai
# extra raises some of those floors, so it has a venv of its own.
OLDEST_VENV ?= .venv-oldest
OLDEST_AI_VENV ?= .venv-oldest-ai
OLDEST_SUITES := tests/waits tests/fanout tests/steps tests/budget tests/record tests/worker \
	tests/local tests/testing tests/samples tests/first_run
OLDEST_AI_SUITES := tests/integrations tests/first_run
# A venv ($(1)) with the lowest versions for the extras ($(2)), and the test extra's tools.
define oldest_venv
	test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	$(PYTHON) tests/lowest_versions.py $(2) > $(1)/constraints.txt
	$(1)/bin/python -m pip --disable-pip-version-check -q install -c $(1)/constraints.txt \
		-e '.[$(subst $(space),$(comma),$(2)),test]'
	touch $(1)/.installed
endef
comma := ,
space := $(subst ,, )
$(OLDEST_VENV)/.installed: pyproject.toml tests/lowest_versions.py
	$(call oldest_venv,$(OLDEST_VENV),local)
$(OLDEST_AI_VENV)/.installed: pyproject.toml tests/lowest_versions.py
	$(call oldest_venv,$(OLDEST_AI_VENV),local pydantic-ai)

## oldest: the key suites on the lowest versions the ranges allow (part of make test)
oldest: $(OLDEST_VENV)/.installed $(OLDEST_AI_VENV)/.installed
	$(OLDEST_VENV)/bin/pytest -n $(WORKERS) --dist loadgroup -p no:cacheprovider -m 'not slow' \
		$(OLDEST_SUITES)
	$(OLDEST_AI_VENV)/bin/pytest -n $(WORKERS) --dist loadgroup -p no:cacheprovider \
		$(OLDEST_AI_SUITES)

# The other Pythons Lambda runs: the template deploys python3.12, and 3.13 is Lambda's newest
# (the tests' venv is 3.11, the oldest requires-python allows). Each has a venv at the newest
# versions, as a fresh install gets, where the key suites run, less those marked slow.
PYTHONS ?= 3.12 3.13
PYTHONS_SUITES := $(OLDEST_SUITES) tests/asyncio_tasks tests/integrations tests/combinations
# The interpreter of version $(1): pyenv's newest of that minor when pyenv holds one (its
# shims answer only for the versions it is told to use), else python$(1) from the PATH.
python_of = $(or $(lastword $(sort $(wildcard $(shell pyenv root 2>/dev/null)/versions/$(1).*/bin/python$(1)))),python$(1))
$(shell find .venv-py3.*/.installed -mmin +1440 -delete 2>/dev/null)
.venv-py%/.installed: pyproject.toml
	test -x $(@D)/bin/python || $(call python_of,$*) -m venv $(@D)
	$(@D)/bin/python -m pip --disable-pip-version-check -q install --upgrade \
		--upgrade-strategy eager -e '.[local,pydantic-ai,otel,test]'
	touch $@

.PHONY: pythons
## pythons: the key suites on Python 3.12 and 3.13, at the newest versions (part of make test)
pythons: $(foreach v,$(PYTHONS),.venv-py$(v)/.installed)
	$(foreach v,$(PYTHONS),.venv-py$(v)/bin/python --version && .venv-py$(v)/bin/pytest \
		-n $(WORKERS) --dist loadgroup -p no:cacheprovider -m 'not slow' $(PYTHONS_SUITES) &&) true

## demo: run the sample research agent locally on moto, with a 2.5 s invocation budget
demo: $(STAMP_RUN)
	$(BIN)/continuum run samples.research_agent:research --input '{"topic": "tides"}' --budget 2.5

## test: lint, type-check, build the docs, the whole suite on the newest versions, key suites on the oldest and on Python 3.12 and 3.13 (CI)
test: lint typecheck docs pytest pytest-slow oldest pythons

## docs: build the docs site into site/, strictly (a warning fails), with no network
docs: $(STAMP_DEV)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lint: $(STAMP_DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP_DEV)
	$(BIN)/mypy

# The suite in two runs: the quick one (within five minutes on two cores), then the suites
# marked slow (fresh venvs from the wheel, the chaos run, the benchmarks' quick mode).
PYTEST := CONTINUUM_SAM_TOOLS_VENV=$(abspath $(SAM_VENV)) $(BIN)/pytest -n $(WORKERS) --dist loadgroup
pytest: $(STAMP_DEV) $(STAMP_SAM)
	$(PYTEST) -m 'not slow'

## pytest-slow: the suites marked slow (part of make test)
pytest-slow: $(STAMP_DEV) $(STAMP_SAM)
	$(PYTEST) -m slow

## chaos: 200 tasks under random worker deaths, AWS faults and hostile deliveries (SEED=n)
SEED ?= 1
chaos: $(STAMP_RUN)
	$(BIN)/python -m chaos.harness --tasks 200 --seed $(SEED)

## bench: the benchmarks; each prints `name: value unit` lines
# The benchmarks measure the tracing too (tracing_overhead): the run's extras and otel's.
STAMP_BENCH := $(VENV)/.installed-bench
$(STAMP_BENCH): pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[local,pydantic-ai,otel]'
	touch $@
bench: $(STAMP_BENCH)
	$(BIN)/python -m benchmarks.run

## requirements: regenerate infra/requirements.txt from pyproject.toml
requirements: $(STAMP_RUN)
	$(BIN)/python infra/gen_requirements.py

## template: regenerate infra/template.yaml from continuum/scaffold/templates/template.yaml.tmpl
template: $(STAMP_RUN)
	$(BIN)/python infra/gen_template.py

clean:
	rm -rf site $(VENV) $(SAM_VENV) $(OLDEST_VENV) $(OLDEST_AI_VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info
