"""The ``>>>`` examples in continuum's docstrings run, each module's as one test.

An example that needs an app, AWS or a person says ``# doctest: +SKIP`` and is read, not run.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "continuum"
#: The extras a module may need that a plain install lacks.
OPTIONAL = ("pydantic_ai", "opentelemetry", "moto", "freezegun")


def modules_with_examples() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>>" in path.read_text():
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.mark.parametrize("name", modules_with_examples())
def test_the_examples_in_a_modules_docstrings_run(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:  # an integration whose extra is not installed
        if exc.name in OPTIONAL:
            pytest.skip(f"{name} needs {exc.name}, an optional extra")
        raise
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [test for test in finder.find(module, name) if test.examples]
    for test in tests:
        runner.run(test, clear_globs=True)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{name}: {results.failed} of its examples failed (above)"
