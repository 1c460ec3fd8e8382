"""What each invocation did is in the record, at no extra write: runs, steps, crashes, cost."""

from __future__ import annotations

import time

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from tests.support import inspect_task


class Work(BaseModel):
    items: int = 6
    done: list[int] = []


class WorkerDied(BaseException):
    """Stands in for SIGKILL in-process."""


def work_app(*, die_at: int | None = None) -> tuple[Continuum, list[int]]:
    app = Continuum(default_step_s=0.05, safety_margin_s=0.05)
    ran: list[int] = []

    @app.step(retries=1, backoff_s=0)
    def work(i: int) -> int:
        ran.append(i)
        time.sleep(0.05)
        if i == die_at and ran.count(i) == 1:
            raise WorkerDied
        if i == 3 and ran.count(3) == 1:
            raise ConnectionError("flaky once")
        return i

    @app.task(state=Work)
    def batch(ctx: TaskContext[Work]) -> list[int] | None:
        ctx.state.done.append(work(len(ctx.state.done)))
        return ctx.state.done if len(ctx.state.done) >= ctx.state.items else None

    return app, ran


def test_each_invocation_is_recorded_with_its_steps_and_how_it_ended(make_runtime):
    app, _ = work_app()
    runtime = make_runtime(app, budget_s=0.3)
    summary = runtime.run("batch", {})
    record = runtime.record(summary.task_id)
    runs = record.history
    assert summary.status == "succeeded"
    assert [r.number for r in runs] == list(range(1, summary.invocations + 1))
    assert [r.outcome for r in runs[:-1]] == ["suspended"] * (len(runs) - 1)
    assert runs[-1].outcome == "succeeded"
    assert runs[0].message == "start"
    steps = [(s.key, s.turn, s.outcome) for r in runs for s in r.steps]
    assert ("work#0", 3, "retry") in steps  # the failed attempt ...
    assert ("work#0", 3, "ok") in steps  # ... and the retry, in turn 3
    assert sum(r.steps_executed for r in runs) == record.counters.steps_executed
    assert all(s.duration_s > 0 for r in runs for s in r.steps)


def test_a_worker_that_died_leaves_its_run_marked_crashed(make_runtime):
    app, _ = work_app(die_at=2)
    runtime = make_runtime(app, budget_s=5)
    with runtime.time.running():
        task_id = app.client().start("batch", {})
        for _ in range(20):
            if runtime.record(task_id).status.finished:
                break
            try:
                if runtime.invoke_once() is None:
                    runtime.time.advance(runtime.visibility_timeout_s + 1)
            except WorkerDied:
                runtime.time.advance(runtime.visibility_timeout_s + 1)
    runs = runtime.record(task_id).history
    assert runs[0].outcome == "crashed"
    assert "died" in runs[0].reason
    assert runs[-1].outcome == "succeeded"


def test_the_task_cost_sums_its_invocations_and_requests(make_runtime):
    app, _ = work_app()
    runtime = make_runtime(app, budget_s=0.3)
    summary = runtime.run("batch", {})
    record = runtime.record(summary.task_id)
    usage = record.usage
    assert usage.invocations == summary.invocations
    assert usage.lambda_ms >= 1000 * sum(r.duration_s for r in record.history) - 1
    assert usage.s3_put >= summary.invocations  # at least each ending's write
    assert usage.sqs_send == summary.continuations
    view = inspect_task(runtime.observer, summary.task_id)
    assert view.cost["total"] > 0
    assert view.cost["total"] == round(view.cost["lambda"] + view.cost["s3"] + view.cost["sqs"], 8)


def test_inspect_merges_the_history_of_every_stored_version(make_runtime):
    app, _ = work_app()
    runtime = make_runtime(app, budget_s=0.3)
    summary = runtime.run("batch", {"items": 8})
    view = inspect_task(runtime.observer, summary.task_id)
    assert [r.number for r in view.invocations] == list(range(1, summary.invocations + 1))
    assert len(view.checkpoints) >= summary.invocations  # versioned on both backends
    assert view.checkpoints[-1].status == "succeeded"
    assert [c.generation for c in view.checkpoints] == sorted(
        c.generation for c in view.checkpoints
    )
