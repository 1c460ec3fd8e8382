"""A cancel at every boundary of each flavour and shape: before its first run, while it waits,
and from inside each step (the task sees it at its next step or wait, when it lists its inbox
before each step). It always ends
``cancelled``, no step runs after the cancel was seen, and a cancelled parent's child is
cancelled too."""

from __future__ import annotations

import gc
import sys
from datetime import timedelta
from typing import Any

import pytest

from continuum import Status
from continuum.testing import TaskRunner
from tests.combinations.shapes import EVERY_COMBINATION, INPUT, TASK_ID, Combo, build

pytestmark = EVERY_COMBINATION


def assert_cancelled_with_its_children(runner: TaskRunner) -> None:
    gc.collect()  # what the unwinding left unawaited warns here, not in a later test
    assert runner.client.status(TASK_ID).status == Status.CANCELLED
    for child in runner.client.tasks(task_name="helper"):
        assert child.status == Status.CANCELLED, child


def test_cancel_before_the_first_run_runs_no_step(combo: Combo, backend: str):
    with TaskRunner(combo.app, backend=backend, timeout_s=10) as runner:
        task = runner.start("job", INPUT, task_id=TASK_ID)
        task.cancel("changed my mind")
        assert_cancelled_with_its_children(runner)
        assert combo.probe.ran == []


def test_cancel_while_it_waits_runs_nothing_more(combo: Combo, backend: str):
    with TaskRunner(combo.app, backend=backend, timeout_s=10) as runner:
        task = runner.start("job", INPUT, task_id=TASK_ID)
        runner.settle()  # runs it until it waits: a sleep, a child, an answer
        assert task.status == Status.WAITING
        before = list(combo.probe.ran)
        task.cancel("changed my mind")
        runner.advance(timedelta(days=4))  # its timers come due: nothing wakes it again
        assert_cancelled_with_its_children(runner)
        assert combo.probe.ran == before


def test_cancel_inside_each_step_stops_the_task_at_its_next_boundary(
    flavour: str, shape: str, backend: str, monkeypatch: pytest.MonkeyPatch
):
    # What the unwinding leaves unawaited is this test's failure, never a later test's.
    unawaited: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unawaited.append(repr(u.object)))
    boundaries = list(dict.fromkeys(build(flavour, shape).steps[:-1]))
    wrong = {}
    for boundary in boundaries:
        seen, wanted = cancel_inside(flavour, shape, backend, boundary)
        if seen != wanted:
            wrong[boundary] = seen
    gc.collect()
    assert not wrong, f"a cancel inside these steps (status, children, ran): {wrong}"
    assert unawaited == []


def cancel_inside(flavour: str, shape: str, backend: str, boundary: str) -> tuple[Any, Any]:
    """What a run cancelled inside the step ``boundary`` ended as, and what it should have."""
    # A running task lists its inbox every inbox_poll_s: here before each step.
    combo = build(flavour, shape, inbox_poll_s=0)
    combo.probe.cancel_in = boundary
    with TaskRunner(combo.app, backend=backend, timeout_s=10) as runner:
        combo.answer(runner.run("job", INPUT, task_id=TASK_ID))
        runner.settle()  # the children's cancels
        status = runner.client.status(TASK_ID).status
        children = [child.status for child in runner.client.tasks(task_name="helper")]
    until = combo.steps.index(boundary) + 1
    seen = (status, children, combo.probe.ran)
    return seen, (Status.CANCELLED, [Status.CANCELLED] * len(children), combo.steps[:until])
