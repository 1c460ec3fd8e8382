"""The README's "Testing your tasks" example runs as shown: its tests pass."""

from __future__ import annotations

import importlib
import sys

from tests.testing.readme import blocks


def test_the_readme_example_and_its_tests_run_as_shown(tmp_path, monkeypatch):
    example = blocks("python")[0]
    (tmp_path / "orders.py").write_text(example)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module = importlib.import_module("orders")
        tests = [getattr(module, name) for name in dir(module) if name.startswith("test_")]
        assert len(tests) == 3
        for test in tests:
            test()
    finally:
        sys.modules.pop("orders", None)
