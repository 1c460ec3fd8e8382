"""An app on continuum.testing's fakes uses them, even while the queue is empty (falsy)."""

from __future__ import annotations

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.testing import InMemoryContinuationQueue, InMemoryRecordStore
from tests.support import LocalRuntime


class One(BaseModel):
    x: int


def one_step_app(**backends) -> Continuum:
    app = Continuum(**backends)

    @app.task(state=One)
    def double(ctx: TaskContext[One]) -> int:
        return ctx.state.x * 2

    return app


def test_an_app_built_on_an_empty_in_memory_queue_sends_to_it_not_to_sqs(monkeypatch):
    monkeypatch.delenv("CONTINUUM_QUEUE_URL", raising=False)
    queue = InMemoryContinuationQueue()
    assert not queue  # empty: a length of 0
    app = one_step_app(store=InMemoryRecordStore(), queue=queue)
    app.client().start("double", {"x": 2}, task_id="t1")
    assert len(queue) == 1


def test_the_local_runtime_runs_a_task_in_memory(monkeypatch):
    monkeypatch.delenv("CONTINUUM_QUEUE_URL", raising=False)
    summary = LocalRuntime(one_step_app(), budget_s=5, backend="memory").run("double", {"x": 21})
    assert (summary.status, summary.result) == ("succeeded", 42)
