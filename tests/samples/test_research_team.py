"""The research-team sample: a lead task fans sub-questions out to researcher child tasks and
merges their answers; one researcher fails and the lead tolerates it.

Its fake model and tools sleep; here they only note that they ran (each step calls ``_pause``
once, with a seed unique to that step call), so "each child step ran once" is counted, not
timed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from samples import research_team as sample
from tests.conftest import ScriptedContext
from tests.support import LocalRuntime

EXPECTED = """\
Report on tides (5 answers):
- what causes tides: finding 78 from 2 notes [source-500, source-310]
- how tides are measured: finding 172 from 2 notes [source-945, source-435]
- how tides vary over a month: finding 32 from 2 notes [source-509, source-725]
- what tides do to coastlines: finding 204 from 3 notes [source-079, source-040, source-599]
- how tides were explained before Newton: finding 120 from 3 notes [source-905, source-895, \
source-300]
- unanswered: what tides will be like in the year 3000"""


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[Any, ...]]:
    """Each live step call, by its seed (the sample's fakes take no time)."""
    ran: Counter[tuple[Any, ...]] = Counter()

    def pause(scale: float, low_s: float, high_s: float, *seed: object) -> None:
        ran[seed] += 1

    monkeypatch.setattr(sample, "_pause", pause)
    return ran


def expected_calls() -> Counter[tuple[Any, ...]]:
    """The step calls one run makes: the lead's two, and each researcher's."""
    calls: Counter[tuple[Any, ...]] = Counter({("plan", "tides"): 1, ("merge", "tides", 5): 1})
    for angle in sample.ANGLES:
        question = angle.format(topic="tides")
        calls[("search", question)] += 1
        if sample.UNKNOWABLE in question:
            continue
        wanted = 2 + sample._digest("sources", question) % 2
        for i in range(wanted):
            source = f"source-{sample._digest('source', question, i) % 1000:03d}"
            calls[("read", question, source)] += 1
        calls[("answer", question)] += 1
    return calls


def children_of(runtime: LocalRuntime, lead_id: str) -> list[Any]:
    records = [runtime.record(task_id) for task_id in runtime.observer.task_ids()]
    return [r for r in records if r.parent is not None and r.parent.task_id == lead_id]


def test_the_lead_merges_its_researchers_answers_and_each_step_runs_once(pauses):
    runtime = LocalRuntime(sample.app, budget_s=60, backend="memory", virtual_time=True)
    summary = runtime.run("lead", {"topic": "tides"})

    assert summary.status == "succeeded", summary.error
    assert summary.result == EXPECTED
    assert pauses == expected_calls()
    children = children_of(runtime, summary.task_id)
    assert sorted(c.status.value for c in children) == ["failed"] + ["succeeded"] * 5
    [failed] = [c for c in children if c.status.value == "failed"]
    assert failed.error is not None
    assert "no sources" in failed.error.message


def test_continuations_in_the_lead_and_the_researchers_change_nothing(pauses):
    """Every invocation runs one live step, then its time runs out."""
    runtime = LocalRuntime(sample.app, budget_s=60, backend="memory", virtual_time=True)
    with runtime.time.running():
        lead_id = sample.app.client().start("lead", {"topic": "tides", "max_concurrency": 2})
        runtime.drive(lead_id, context=lambda: ScriptedContext(1, pauses.total))
    lead = runtime.record(lead_id)

    assert lead.status.value == "succeeded", lead.error
    assert lead.result == EXPECTED
    assert pauses == expected_calls()
    children = children_of(runtime, lead_id)
    assert len(children) == 6
    assert sum(c.counters.continuations for c in children) > 0
    assert lead.counters.continuations > 0
    for child in children:
        assert child.counters.steps_executed == sum(
            n for seed, n in pauses.items() if child.state["question"] in seed
        )
