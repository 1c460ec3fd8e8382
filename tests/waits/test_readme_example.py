"""The docs' waiting and fan-out examples run as shown: an hour's sleep, then a person's answer."""

from __future__ import annotations

import importlib
import re
import sys
from datetime import timedelta
from pathlib import Path

from continuum.testing import TaskRunner

PAGES = Path(__file__).resolve().parents[2] / "docs"


def load_example(tmp_path, monkeypatch, heading: str, name: str):
    (page,) = [p for p in PAGES.glob("*.md") if p.read_text().startswith(f"# {heading}")]
    code = re.search(r"```python\n(.*?)```", page.read_text(), re.S)
    assert code is not None
    (tmp_path / f"{name}.py").write_text(code.group(1))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.modules.pop(name, None)


def test_the_waiting_example_refunds_once_a_person_approves(tmp_path, monkeypatch):
    module = load_example(tmp_path, monkeypatch, "Waiting", "readme_waiting")
    with TaskRunner(module.app) as runner:
        task = runner.run("refund", {"order": "o-1", "cents": 1200})  # sleeps its hour, asks
        assert task.status == "waiting"
        task.callback("approval").complete({"approved": True})
        assert task.result == "refunded 1200 on o-1"
        unanswered = runner.run("refund", {"order": "o-2", "cents": 5})
        runner.advance(timedelta(days=3))
        assert unanswered.result == "nobody answered in two days: not refunded"


def test_the_fan_out_example_maps_pages_and_summarizes_them_in_child_tasks(tmp_path, monkeypatch):
    module = load_example(tmp_path, monkeypatch, "Fan-out", "readme_fan_out")
    urls = [f"https://example.org/{i}" for i in range(12)]
    with TaskRunner(module.app) as runner:
        task = runner.run("survey", {"urls": urls})
        task.run_until_done()
        assert task.result == [f"THE TEXT OF {url.upper()}" for url in urls]
        assert task.step_counts == {"fetch": 12}
