"""Steering each flavour and shape: a failure retried after the fix is deployed, and a fork
from every checkpoint the task left, each of which ends as the original did."""

from __future__ import annotations

from collections import Counter

from continuum import Status
from continuum.testing import TaskRunner
from tests.combinations.shapes import EVERY_COMBINATION, INPUT, TASK_ID, Combo
from tests.support import inspect_task

pytestmark = EVERY_COMBINATION


def test_retry_after_a_fix_runs_only_the_failed_step_again(combo: Combo, backend: str):
    combo.probe.broken = {"finish"}
    with TaskRunner(combo.app, backend=backend, timeout_s=10) as runner:
        task = combo.answer(runner.run("job", INPUT, task_id=TASK_ID))
        assert task.status == Status.FAILED
        assert task.error is not None
        assert "finish is broken" in task.error.message
        combo.probe.broken.clear()  # the fix, deployed
        runner.client.retry(TASK_ID)
        task = combo.answer(task.run())
        assert (task.status, task.result) == (Status.SUCCEEDED, combo.result)
    # What the failed run recorded is not run again: only the failed step.
    assert Counter(combo.probe.ran) == Counter([*combo.steps, "finish"])


def test_fork_from_every_checkpoint_ends_as_the_original(combo: Combo, backend: str):
    with TaskRunner(combo.app, backend=backend, timeout_s=10) as runner:
        combo.answer(runner.run("job", INPUT, task_id=TASK_ID))
        checkpoints = [
            c
            for c in inspect_task(runner.runtime.observer, TASK_ID).checkpoints
            if not c.status.finished
        ]
        assert checkpoints, "a task that waits leaves checkpoints"
        wrong = {}
        for i, checkpoint in enumerate(checkpoints):
            combo.probe.ran.clear()
            assert checkpoint.version_id is not None
            runner.client.fork(TASK_ID, version=checkpoint.version_id, new_id=f"fork-{i}")
            fork = combo.answer(runner.handle(f"fork-{i}").run())
            ran = Counter(combo.probe.ran)
            # A fork runs on from its checkpoint: no step more often than the original did.
            if (fork.status, fork.record.result) != (Status.SUCCEEDED, combo.result) or not (
                ran <= Counter(combo.steps) and ran["finish"] == 1
            ):
                wrong[f"{checkpoint.status.value} #{i}"] = (fork.status, fork.error, ran)
        assert not wrong, f"forks that did not end as the original: {wrong}"
