"""The property that matters most: wherever a task is suspended, it ends the same way.

For every k, a run suspended after its k-th step finishes with the same result as a run
that never stopped, and no step that ran before the suspension runs again.

Both properties run in both flavours (``tests/flavours.py``): ``tally`` and its async twin,
whose turns gather two steps (``tests/tally.py``). The async flavour's sequences of
suspensions run on the in-memory fakes only (on moto they take most of the suite's time);
every k runs on both backends.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from continuum import Status
from tests.conftest import ScriptedContext, drain, on_backend
from tests.flavours import FLAVOURS
from tests.support import LocalRuntime
from tests.tally import TOTAL_STEPS, build


def run_with_plan(
    backend: str, plan: list[int], flavour: str = "sync"
) -> tuple[dict, object, object]:
    """Run ``tally`` on ``backend`` where invocation i may run plan[i] live steps (then
    unlimited)."""
    app, calls = build(flavour)

    def context(i: int) -> ScriptedContext:
        allowed = plan[i] if i < len(plan) else None
        return ScriptedContext(allowed, executed=lambda: sum(calls.values()))

    with on_backend(backend):  # a fresh bucket and queue for every run
        runtime = LocalRuntime(app, budget_s=900, backend=backend)
        task_id = app.client().start("tally", {"label": "x"}, task_id="tally-1")
        record = drain(runtime, task_id, context)
    return record.result, record, calls


@pytest.fixture(scope="module")
def uninterrupted():
    """The result of a run that never stopped (on the fakes: it is the same on moto); the
    same for both flavours."""
    results = {}
    for flavour in FLAVOURS:
        result, record, calls = run_with_plan("memory", [], flavour)
        assert record.status == Status.SUCCEEDED
        assert record.counters.continuations == 0
        assert sum(calls.values()) == TOTAL_STEPS
        results[flavour] = result
    assert results["sync"] == results["async"]
    return results["sync"]


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("k", range(TOTAL_STEPS + 1))
def test_suspended_after_step_k_finishes_the_same(uninterrupted, backend, k, flavour):
    result, record, calls = run_with_plan(backend, [k], flavour)

    assert record.status == Status.SUCCEEDED
    assert result == uninterrupted
    # Every step ran exactly once: none recorded before the suspension ran again.
    assert sum(calls.values()) == TOTAL_STEPS
    assert all(n == 1 for n in calls.values()), calls
    assert record.counters.steps_executed == TOTAL_STEPS
    expected_continuations = 0 if k == TOTAL_STEPS else 1
    assert record.counters.continuations == expected_continuations
    if k % 3:  # suspended mid-turn: the turn's recorded steps were replayed, not run
        assert record.counters.steps_replayed == k % 3


# ``backend`` is only a name; every example makes its own bucket and queue.
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plan=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=8))
def test_any_sequence_of_suspensions_finishes_the_same(uninterrupted, backend, plan):
    result, record, calls = run_with_plan(backend, plan)

    assert record.status == Status.SUCCEEDED
    assert result == uninterrupted
    assert all(n == 1 for n in calls.values()), calls
    assert sum(calls.values()) == TOTAL_STEPS


@settings(max_examples=20, deadline=None)
@given(plan=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=8))
def test_any_sequence_of_suspensions_of_an_async_task_finishes_the_same(uninterrupted, plan):
    result, record, calls = run_with_plan("memory", plan, "async")

    assert record.status == Status.SUCCEEDED
    assert result == uninterrupted
    assert all(n == 1 for n in calls.values()), calls
    assert sum(calls.values()) == TOTAL_STEPS
