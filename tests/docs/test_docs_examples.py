"""Every Python example of the README and of docs/ runs (pytest-examples).

A complete example runs as it is; the test functions an example defines are then called, as
pytest would. A *sketch* leaves some names to the reader ("``payments`` stands for your own
client"): ``SKETCHES`` below defines each such name as a small stand-in, in plain sight, and a
sketch whose names are not all listed there fails instead of being skipped.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from pydantic import BaseModel
from pytest_examples import CodeExample, EvalExample, find_examples

from continuum import Continuum, TaskContext
from continuum.testing import TaskRunner
from tests.conftest import BACKENDS, on_backend
from tests.fresh import ROOT

DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(ROOT.glob("docs/**/*.md"))]


class _Payments:
    """Stands for a payment API that deduplicates on the idempotency key."""

    def charge(self, order_id: str, cents: int, idempotency_key: str) -> str:
        return f"charged {cents} on {order_id} ({idempotency_key})"


def _fetch_page(url: str, number: int) -> str | None:
    """Stands for a paged HTTP client: three pages, then nothing."""
    return f"{url} page {number}" if number < 3 else None


class _Span:
    def __init__(self) -> None:
        self.attributes: dict[str, Any] = {}

    def set_attribute(self, name: str, value: Any) -> None:
        self.attributes[name] = value

    def end(self) -> None:
        self.attributes["ended"] = True


class _Tracer:
    """Stands for an OpenTelemetry tracer."""

    def start_span(self, name: str, attributes: dict[str, Any]) -> _Span:
        return _Span()


class _Chat(BaseModel):
    """Stands for the support sample's state."""

    question: str


def _lookup_order(order_id: str) -> str:
    """Stands for a tool of the agent."""
    return f"order {order_id}: a kayak"


#: A sketch (by a line it holds) -> the names it leaves to the reader, defined as stand-ins.
SKETCHES: dict[str, dict[str, Any]] = {
    "payments.charge(": {"app": Continuum(), "payments": _Payments(), "fetch_page": _fetch_page},
    "tracer.start_span(": {"app": Continuum(), "tracer": _Tracer()},
    "tools=[lookup_order]": {
        "app": Continuum(),
        "lookup_order": _lookup_order,
        "Chat": _Chat,
        "TaskContext": TaskContext,
    },
}


def examples() -> list[CodeExample]:
    found = [ex for ex in find_examples(*DOCS) if ex.prefix == "python"]
    assert found, "no python examples found in the docs"
    return found


def sketch_names(example: CodeExample) -> dict[str, Any]:
    """The stand-ins a sketch needs: none for a complete example."""
    matches = [names for marker, names in SKETCHES.items() if marker in example.source]
    assert len(matches) <= 1, f"{example}: more than one SKETCHES entry matches"
    return dict(matches[0]) if matches else {}


@pytest.fixture(autouse=True)
def _aws_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # An example's Continuum() reads these, and boto3 must never reach a real account.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def call_its_tests(namespace: dict[str, Any], app: Continuum | None) -> list[str]:
    """Call each ``test_*`` function an example defined, as pytest would: a test that names
    ``continuum_runner`` gets a fresh TaskRunner over ``app`` (the plugin's fixture), one that
    names ``aws`` runs once on each backend (the suite's fixture, tests/conftest.py)."""
    called = []
    for name, function in list(namespace.items()):
        if not (name.startswith("test_") and callable(function)):
            continue
        parameters = inspect.signature(function).parameters
        if "continuum_runner" in parameters:
            assert app is not None, f"{name} needs continuum_runner, but no app is known"
            with TaskRunner(app, budget_s=5) as runner:  # the example's marker: budget_s=5
                function(continuum_runner=runner)
        elif "aws" in parameters:  # the suite's fixture: the test runs on each backend
            for backend in BACKENDS:
                with on_backend(backend) as aws:
                    function(aws=aws)
        else:
            function()
        called.append(name)
    return called


#: The pytest plugin's example (by a line it holds) runs the app of the TaskRunner example.
PLUGIN_EXAMPLE, ITS_APP = "@pytest.mark.continuum(", "def approve(ctx"


@pytest.mark.parametrize("example", examples(), ids=str)
def test_the_docs_python_example_runs(example: CodeExample, eval_example: EvalExample) -> None:
    namespace = eval_example.run(example, module_globals=sketch_names(example))
    app = namespace.get("app")
    if PLUGIN_EXAMPLE in example.source:
        (app_example,) = [ex for ex in examples() if ITS_APP in ex.source]
        app = eval_example.run(app_example)["app"]
    called = call_its_tests(namespace, app)
    assert called == [n for n in namespace if n.startswith("test_")]


def test_every_sketch_listed_is_in_the_docs_and_uses_its_stand_ins() -> None:
    sources = [ex.source for ex in examples()]
    for marker, names in SKETCHES.items():
        (source,) = [s for s in sources if marker in s]
        unused = [name for name in names if name not in source]
        assert not unused, f"the sketch with {marker!r} does not use {unused}"
