"""The README's example runs as shown."""

from __future__ import annotations

import re
from pathlib import Path

from continuum.local import LocalRuntime, moto_backend

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_runs_as_shown():
    code = re.search(r"## A dozen lines\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(code.group(1), "README.md", "exec"), namespace)  # noqa: S102 - our own README
    app = namespace["app"]
    with moto_backend():
        runtime = LocalRuntime(app, budget_s=60)  # type: ignore[arg-type]
        summary = runtime.run("research", {"topic": "tides"})
    assert summary.status == "succeeded"
    assert summary.result.splitlines()[-1] == "tides: finding 39"
    assert summary.steps == 40
