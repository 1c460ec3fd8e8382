"""Features a user combines in one story, beyond one cell each: a scheduled run that waits for
a person's answer and is forked while it waits, both answered from their links."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from continuum import Status
from continuum.testing import TaskRunner
from tests.combinations.shapes import INPUT, Combo
from tests.flavours import FLAVOURS

BEFORE_THE_WAIT = {"callback": ["prepare", "send_link"], "agent": ["prepare", "lookup_order"]}


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("shape", ["callback", "agent"])
def test_scheduled_run_waiting_for_an_answer_forked_while_it_waits(combo: Combo, backend: str):
    combo.app.schedule("daily", "job", every=timedelta(days=1), input=INPUT)
    with TaskRunner(combo.app, backend=backend, timeout_s=10) as runner:
        runner.advance(timedelta(minutes=2))  # a rate schedule fires when it is created
        [run] = runner.client.tasks(task_name="job")
        assert run.status == Status.WAITING
        runner.client.fork(run.task_id, version="latest", new_id="what-if")
        for task_id in (run.task_id, "what-if"):
            task = combo.answer(runner.handle(task_id))
            assert (task.status, task.result) == (Status.SUCCEEDED, combo.result)
    # The fork ran on from the wait: what the run did before it is not done again.
    before_the_wait = BEFORE_THE_WAIT[combo.shape]
    assert [combo.probe.ran.count(step) for step in before_the_wait] == [1] * len(before_the_wait)


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("shape", ["plain"])
def test_schedule_on_a_clock_started_at_a_given_time_fires_once_per_time(
    combo: Combo, backend: str
):
    combo.app.schedule("daily", "job", every=timedelta(days=1), input=INPUT)
    start = datetime(2027, 1, 15, 9, 0, tzinfo=UTC)
    with TaskRunner(combo.app, backend=backend, start_at=start, timeout_s=10) as runner:
        runner.advance(timedelta(days=1, minutes=2))  # created at 9:00: fires then and a day on
        runs = sorted(run.task_id for run in runner.client.tasks(task_name="job"))
    assert runs == ["daily-20270115T090000Z", "daily-20270116T090000Z"]
