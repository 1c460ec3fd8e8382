"""A run of each flavour and shape to its documented end: started by the test, by a schedule's
fire, and by a test that freezes the clock itself (freezegun) around its client calls."""

from __future__ import annotations

from datetime import timedelta

from freezegun import freeze_time

from continuum import Status
from continuum.testing import TaskRunner
from tests.combinations.shapes import EVERY_COMBINATION, INPUT, TASK_ID, Combo, build

pytestmark = EVERY_COMBINATION


def assert_ran_to_its_end(combo: Combo, status: Status, result: object) -> None:
    assert (status, result) == (Status.SUCCEEDED, combo.result)
    assert sorted(combo.probe.ran) == sorted(combo.steps)  # each step once
    if combo.shape == "callback":
        [link] = combo.outbox
        assert link.startswith("https://links.test/")


def test_run_gives_the_result_running_each_step_once(combo: Combo, backend: str):
    with TaskRunner(combo.app, backend=backend) as runner:
        task = combo.answer(runner.run("job", INPUT, task_id=TASK_ID))
        assert_ran_to_its_end(combo, task.status, task.result)
        if combo.shape == "child":
            [child] = runner.client.tasks(task_name="helper")
            assert (child.status, child.parent) == (Status.SUCCEEDED, TASK_ID)


def test_schedule_fire_starts_one_run_that_ends_as_a_started_one(combo: Combo, backend: str):
    combo.app.schedule("daily", "job", every=timedelta(days=1), input=INPUT)
    with TaskRunner(combo.app, backend=backend) as runner:
        runner.advance(timedelta(minutes=2))  # a rate schedule fires when it is created
        runs = runner.client.tasks(task_name="job")
        assert [run.task_id[: len("daily-")] for run in runs] == ["daily-"]
        task = combo.answer(runner.handle(runs[0].task_id))
        assert_ran_to_its_end(combo, task.status, task.result)
        assert len(runner.client.tasks(task_name="job")) == 1  # the day has not come again


def test_freeze_time_of_the_users_own_around_client_calls(flavour: str, shape: str, backend: str):
    combo = build(flavour, shape, pause_s=0.2)  # real time: a short sleep
    with TaskRunner(combo.app, backend=backend, virtual_time=False, timeout_s=10) as runner:
        with freeze_time("2026-01-15 09:00:00"):
            task = runner.start("job", INPUT, task_id=TASK_ID)
            assert runner.client.status(TASK_ID).status == Status.PENDING
        combo.answer(task.run())
        with freeze_time("2026-01-15 10:00:00"):
            status = runner.client.status(TASK_ID)
            assert_ran_to_its_end(combo, status.status, runner.client.result(TASK_ID))
