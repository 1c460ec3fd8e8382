"""Features a user combines in one story, beyond one cell each: a scheduled run that waits for
a person's answer and is forked while it waits, both answered from their links."""

from __future__ import annotations

from datetime import timedelta

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
