"""The record the docs show (docs/record.md) is the record continuum writes: every key it names
is a field."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from samples.research_agent import app
from tests.conftest import raw_record
from tests.support import (
    Counters,
    InvocationRun,
    JournalEntry,
    LiveStep,
    LocalRuntime,
    StepStats,
    TaskRecord,
    Usage,
)

PAGES = Path(__file__).resolve().parents[2] / "docs"


def section(title: str) -> str:
    """The docs page whose title is ``title``."""
    (page,) = [p for p in PAGES.glob("*.md") if p.read_text().startswith(f"# {title}\n")]
    return page.read_text()


def fields(model: Any) -> set[str]:
    if isinstance(model, type) and issubclass(model, BaseModel):
        return set(model.model_fields)
    return {f.name for f in dataclasses.fields(model)}


def test_the_records_shown_name_only_fields_a_record_has():
    blocks = re.findall(r"```json\n(.*?)```", section("The record in S3"), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        shown = json.loads(block)
        assert set(shown) <= fields(TaskRecord), set(shown) - fields(TaskRecord)
        assert shown["format"] in (2, 4)
        for entry in shown.get("journal", []):
            assert set(entry) <= fields(JournalEntry)
        for stats in shown.get("step_stats", {}).values():
            assert set(stats) <= fields(StepStats)
        assert set(shown.get("counters", {})) <= fields(Counters)
        assert set(shown.get("usage", {})) <= fields(Usage)
        for run in shown.get("history", []):
            if run == "...":
                continue
            assert set(run) <= fields(InvocationRun), set(run) - fields(InvocationRun)
            assert set(run["usage"]) <= fields(Usage)
            for step in run["steps"]:
                if step != "...":
                    assert set(step) <= fields(LiveStep), set(step) - fields(LiveStep)


def test_a_fresh_record_still_has_the_format_the_readme_shows(aws):
    runtime = LocalRuntime(app, budget_s=60, backend=aws)
    runtime.run(
        "research", {"topic": "tides", "max_turns": 2, "latency_scale": 0.001}, task_id="tides-1"
    )
    stored = raw_record(runtime, "tides-1")
    assert stored["format"] == 2
    shown = json.loads(re.findall(r"```json\n(.*?)```", section("The record in S3"), re.S)[0])
    assert set(shown) <= set(stored)
