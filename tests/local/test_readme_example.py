"""The README's example runs as shown."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

from tests.support import LocalRuntime

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_runs_as_shown(aws, tmp_path, monkeypatch):
    code = re.search(r"## A dozen lines\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    (tmp_path / "readme_example.py").write_text(code.group(1))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("readme_example")
    try:
        runtime = LocalRuntime(module.app, budget_s=60, backend=aws)
        summary = runtime.run("research", {"topic": "tides"})
    finally:
        sys.modules.pop("readme_example", None)
    assert summary.status == "succeeded"
    assert summary.result.splitlines()[-1] == "tides: finding 39"
    assert summary.steps == 40
