"""The sweep at a task's finish completes whatever interrupts it, reduced from what the fault
run (``python -m chaos.harness --tasks 200 --seed 1``) found: every blob ends referenced,
deleted, or tagged ``continuum-finished=true``.

A blob that a mid-run removal did not remove (the DeleteObject failed, or the worker died
between its write and the removal) is left, by design, for the sweep when the task finishes.
That sweep ran once, only in the invocation that saw its own finish write land: if that
invocation died after the write, if one S3 call of the sweep failed (after botocore's own
retries), or if the write's reply was lost (so the worker never learnt the task finished),
the blob stayed unreferenced and untagged for good. Now a sweep cut short leaves the record
untagged and the message comes back; its next delivery finishes the sweep
(``continuum/_record/sweep.py``; the details are specified in ``test_sweep.py``).
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.conftest import ScriptedContext, StoreFaults, drain, raw_record, set_visibility_timeout
from tests.record.test_blobs import current_blobs, digest_of, digests, tagged_finished
from tests.support import LocalRuntime, PreconditionFailed


class WorkerDied(BaseException):
    """Stands for SIGKILL: no ``except Exception`` in the library catches it."""


class Grow(BaseModel):
    notes: list[str] = []


def growing_app() -> tuple[Continuum, list[int]]:
    """A task whose state passes the inline limit and changes every turn: each suspension
    supersedes the previous state blob (which the lease holder then removes)."""
    app = Continuum(inline_limit_bytes=1024, visibility_margin_s=None)
    runs: list[int] = []

    @app.step
    def write(i: int) -> str:
        runs.append(i)
        return f"{i}:" + "n" * 1000

    @app.task(state=Grow)
    def grow(ctx: TaskContext[Grow]) -> int | None:
        ctx.state.notes.append(write(len(ctx.state.notes)))
        return len(ctx.state.notes) if len(ctx.state.notes) >= 4 else None

    return app, runs


def die_after_the_first_finish_write(faults: StoreFaults) -> None:
    """The worker dies right after its finish write landed, before anything is swept."""
    died: list[int] = []

    def die(write):
        etag = write()
        if not died:
            died.append(1)
            raise WorkerDied
        return etag

    faults.on_finish_write(die)


def lose_the_finish_reply(faults: StoreFaults) -> None:
    """The finish write lands but its reply is lost: botocore's retry of it gets 412, and the
    read that would show the write was ours fails (in the fault run: ``s3_412_own_write``,
    then ``s3_500`` on that GetObject)."""
    lost: list[int] = []

    def land_then_412(write):
        etag = write()
        if lost:
            return etag
        lost.append(1)
        faults.fail_next("get")
        raise PreconditionFailed("record.json (injected: the retry of a write that landed)")

    faults.on_finish_write(land_then_412)


def leaked(runtime: LocalRuntime, task_id: str) -> list[str]:
    """Blobs neither referenced by the current record, nor deleted, nor tagged finished."""
    referenced = digests(raw_record(runtime, task_id))
    return [
        key
        for key in current_blobs(runtime, task_id)
        if digest_of(key) not in referenced and not tagged_finished(runtime, key)
    ]


def run_to_the_end(runtime: LocalRuntime, task_id: str, live: list[int]) -> None:
    """One step per invocation until the task finished; a WorkerDied ends an invocation as a
    SIGKILL would (its message comes back at once: the queue's visibility timeout is 0)."""
    set_visibility_timeout(runtime, 0)
    for _ in range(20):
        try:
            drain(runtime, task_id, lambda i: ScriptedContext(1, executed=lambda: len(live)))
            break
        except WorkerDied:
            continue
    # Whatever message is left (a redelivery after the death, a retry) is handled too.
    while runtime.invoke_once(ScriptedContext(None, executed=lambda: len(live))) is not None:
        pass


INTERRUPTIONS = [
    "killed after the finish write",
    "ListObjectsV2 fails",
    "DeleteObject fails",
    "PutObjectTagging fails",
    "the finish write's reply is lost",
]


def run_with_a_leftover_blob(
    interruption: str | None, backend: str
) -> tuple[LocalRuntime, str, StoreFaults]:
    """Run the task to its end; the first mid-run blob removal fails (a blob is left for the
    finish sweep, as the library intends), and ``interruption`` hits the finish sweep."""
    app, live = growing_app()
    runtime = LocalRuntime(app, budget_s=900, backend=backend)
    task_id = app.client().start("grow", {}, task_id="sweep-cut-short")
    faults = StoreFaults(app)
    faults.fail_next("delete")  # the first superseded state blob is not removed mid-run
    sweep_fails = {
        "ListObjectsV2 fails": "list_keys",
        "DeleteObject fails": "delete",
        "PutObjectTagging fails": "tag",
    }
    if interruption == "killed after the finish write":
        die_after_the_first_finish_write(faults)
    elif interruption in sweep_fails:
        operation = sweep_fails[interruption]

        def then_fail(write):
            etag = write()
            faults.fail_next(operation)
            return etag

        faults.on_finish_write(then_fail)
    elif interruption == "the finish write's reply is lost":
        lose_the_finish_reply(faults)

    run_to_the_end(runtime, task_id, live)

    status = app.client().status(task_id)
    assert status.status == Status.SUCCEEDED, status.error
    assert status.result == 4
    return runtime, task_id, faults


def test_a_blob_left_by_a_failed_mid_run_removal_is_swept_when_the_task_finishes(aws):
    runtime, task_id, _ = run_with_a_leftover_blob(None, aws)
    assert leaked(runtime, task_id) == []


@pytest.mark.parametrize("interruption", INTERRUPTIONS)
def test_a_left_blob_is_swept_whatever_interrupts_the_finish_sweep(aws, interruption):
    runtime, task_id, faults = run_with_a_leftover_blob(interruption, aws)
    assert not any(faults.armed.values())  # every injected fault was met
    assert leaked(runtime, task_id) == []
    referenced = digests(raw_record(runtime, task_id))
    blobs = current_blobs(runtime, task_id)
    assert {digest_of(key) for key in blobs} == referenced  # the left blob was deleted
    assert all(tagged_finished(runtime, key) for key in blobs)  # the rest expire with the task
    assert tagged_finished(runtime, "tasks/sweep-cut-short/record.json")
