"""Retry and fork of tasks with children and batches: what a parent hears, what runs again.

- A fork of a parent gets its own children for the calls that had not finished at its
  checkpoint (their ids derive from the fork's id); finished calls keep their results.
- A retried child counts for its parent by its latest outcome while the parent waits for
  it; a retried parent takes its failed children's latest outcomes, retrying those that
  failed.
- A retried task runs again the failed items of the batch (or the failed block) where its
  turn failed; the items that succeeded return their recorded results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Completion, Continuum, Status, TaskContext
from tests.fanout.kit import runtime_on


class Gate(BaseModel):
    i: int


class Fan(BaseModel):
    n: int = 2


def counted_work(app: Continuum, ran: Counter[str], broken: set[int]) -> Callable[[int], int]:
    """The step ``work`` on ``app``: ``i * 10``, counted in ``ran``; an ``i`` in ``broken``
    fails, until the test repairs it (the fix)."""

    @app.step
    def work(i: int) -> int:
        ran[f"work {i}"] += 1
        if i in broken:
            raise ValueError(f"item {i} is broken")
        return i * 10

    return work


def gated_app() -> tuple[Continuum, Counter[str]]:
    app = Continuum()
    ran: Counter[str] = Counter()
    work = counted_work(app, ran, set())

    @app.task(state=Gate)
    def gate(ctx: TaskContext[Gate]) -> int:
        ctx.wait_for_signal("go")
        return work(ctx.state.i)

    @app.task(state=Fan)
    def fan(ctx: TaskContext[Fan]) -> Any:
        first = ctx.invoke("gate", Gate(i=1))
        rest = ctx.map_tasks("gate", [Gate(i=i) for i in range(2, 2 + ctx.state.n)])
        return [first, *rest.values()]

    return app, ran


def drain(runtime: Any) -> None:
    """Run every message due now (a waiting parent's look every 15 minutes is not)."""
    for _ in range(2000):
        if runtime.invoke_once() is None:
            return
    raise AssertionError("the queue never emptied")


def _open_gates(runtime: Any, app: Continuum) -> None:
    for summary in app.client().tasks(task_name="gate", status="waiting"):
        app.client().signal(summary.task_id, "go")
    drain(runtime)


def test_a_fork_of_a_parent_waiting_for_its_children_gets_children_of_its_own(backend):
    app, _ = gated_app()
    with runtime_on(backend, app) as runtime, runtime.time.running():
        app.client().start("fan", Fan(), task_id="fan")
        drain(runtime)
        _open_gates(runtime, app)  # the invoke's child ends; the batch's children wait
        assert runtime.record("fan").status == Status.WAITING
        app.client().fork("fan", version="latest", new_id="what-if")
        drain(runtime)
        _open_gates(runtime, app)
        original, fork = runtime.record("fan"), runtime.record("what-if")
        theirs = [child for batch in original.children for child in batch.ids()]
        mine = [child for batch in fork.children for child in batch.ids()]
        parents = {runtime.record(child).parent.task_id for child in mine}
    assert (original.status, original.result) == (Status.SUCCEEDED, [10, 20, 30])
    assert (fork.status, fork.result) == (Status.SUCCEEDED, [10, 20, 30])
    # The invoke had finished at the checkpoint: its result is kept. The batch had not: the
    # fork started its own children, ids derived from its own id, reporting to it.
    assert len(theirs) == 3
    assert len(mine) == 2
    assert all(child.startswith("what-if.") for child in mine)
    assert parents == {"what-if"}


class Batch(BaseModel):
    api: str
    n: int = 3


def flaky_app(broken: set[int]) -> tuple[Continuum, Counter[str]]:
    """Items whose index is in ``broken`` fail, until the test repairs them (the fix)."""
    app = Continuum()
    ran: Counter[str] = Counter()
    work = counted_work(app, ran, broken)

    def item(ctx: TaskContext[Batch], i: int, index: int) -> int:
        return work(i)

    def block(ctx: TaskContext[Batch]) -> list[int]:
        return [work(i) for i in range(ctx.state.n)]

    @app.task(state=Gate)
    def leaf(ctx: TaskContext[Gate]) -> int:
        return work(ctx.state.i)

    @app.task(state=Batch)
    def batch(ctx: TaskContext[Batch]) -> Any:
        n = ctx.state.n
        if ctx.state.api == "map":
            return ctx.map(range(n), item).values()
        if ctx.state.api == "parallel":
            return ctx.parallel([lambda c, i=i: work(i) for i in range(n)]).values()
        if ctx.state.api == "child_context":
            return ctx.child_context(block, name="block")
        return ctx.map_tasks("leaf", [Gate(i=i) for i in range(n)]).values()

    return app, ran


@pytest.mark.parametrize("api", ["map", "parallel", "child_context", "map_tasks"])
def test_retry_runs_again_the_failed_items_of_the_batch_where_the_turn_failed(backend, api):
    broken = {1}
    app, ran = flaky_app(broken)
    with runtime_on(backend, app) as runtime, runtime.time.running():
        task_id = app.client().start("batch", Batch(api=api))
        drain(runtime)
        failed = runtime.record(task_id)
        assert failed.status == Status.FAILED
        before = dict(ran)
        broken.clear()  # the fix, deployed
        app.client().retry(task_id)
        drain(runtime)
        done = runtime.record(task_id)
    assert (done.status, done.error) == (Status.SUCCEEDED, None)
    assert done.result == [0, 10, 20]
    again = {tag: ran[tag] - before.get(tag, 0) for tag in ran}
    if api == "child_context":
        # A block runs again as a whole; its steps that succeeded replay from its journal.
        assert again == {"work 0": 0, "work 1": 1, "work 2": 1}
    else:
        assert again == {"work 0": 0, "work 1": 1, "work 2": 0}  # only the failed item


_REPORTS_OF_A_RETRIED_CHILD = """
from continuum._waits.kinds.child_wait import batch_counts
keys = frozenset(
    f"children/p.0.map-0.{i}/{status}.json"
    for i in range(8)
    for status in ("failed", "cancelled", "succeeded")[: 1 + i % 3]
)
print(sorted(batch_counts(keys, "p.0.map-0").items()))
"""


def test_a_retried_child_counts_by_its_latest_outcome_whatever_the_hash_seed():
    import subprocess
    import sys

    seen = set()
    for seed in ("0", "1", "2", "3"):
        out = subprocess.run(
            [sys.executable, "-c", _REPORTS_OF_A_RETRIED_CHILD],
            env={"PYTHONHASHSEED": seed, "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        seen.add(out)
    # failed, then retried: cancelled; failed, then retried: succeeded (an end is final).
    latest = {0: "failed", 1: "cancelled", 2: "succeeded"}
    expected = [(f"p.0.map-0.{i}", latest[i % 3]) for i in range(8)]
    assert seen == {f"{expected}\n"}


def waiting_batch_app(broken: set[int]) -> tuple[Continuum, Counter[str]]:
    app = Continuum()
    ran: Counter[str] = Counter()
    work = counted_work(app, ran, broken)

    @app.task(state=Gate)
    def member(ctx: TaskContext[Gate]) -> int:
        if ctx.state.i == 1:
            ctx.wait_for_signal("go")
        return work(ctx.state.i)

    @app.task(state=Fan)
    def tolerant(ctx: TaskContext[Fan]) -> Any:
        done = ctx.map_tasks(
            "member",
            [Gate(i=i) for i in range(ctx.state.n)],
            completion=Completion(tolerated_failure_count=1),
        )
        return {"status": done.status, "results": [item.result for item in done.items]}

    return app, ran


def test_a_child_retried_while_its_parent_waits_counts_by_its_latest_outcome(backend):
    broken = {0}
    app, ran = waiting_batch_app(broken)
    with runtime_on(backend, app) as runtime, runtime.time.running():
        app.client().start("tolerant", Fan(), task_id="tolerant")
        drain(runtime)
        first = "tolerant.0.map_tasks.member-0.0"
        assert runtime.record(first).status == Status.FAILED
        broken.clear()  # the fix, deployed
        app.client().retry(first)
        drain(runtime)
        app.client().signal("tolerant.0.map_tasks.member-0.1", "go")
        drain(runtime)
        done = runtime.record("tolerant")
        keys = app.records.inbox.list("tolerant").keys
    reports = {key.rsplit("/", 1)[1] for key in keys if key.startswith(f"children/{first}/")}
    assert reports == {"failed.json", "succeeded.json"}
    assert (done.status, done.result) == (
        Status.SUCCEEDED,
        {"status": "succeeded", "results": [0, 10]},
    )
    assert ran == Counter({"work 0": 2, "work 1": 1})


@pytest.mark.parametrize("lost", ["child", "parent"])
def test_a_retry_cut_short_after_a_write_is_finished_by_the_next_retry(backend, monkeypatch, lost):
    """A retry writes a record, then sends its continuation: a send that fails leaves the
    record reopened with no message. Retrying again sends it (a duplicate is harmless), for
    the parent and for a child the parent's retry reopened first."""
    from continuum._record.continuation import Continuations
    from continuum.backends.queue import QueueError

    broken = {1}
    app, ran = flaky_app(broken)
    with runtime_on(backend, app) as runtime, runtime.time.running():
        task_id = app.client().start("batch", Batch(api="map_tasks"))
        drain(runtime)
        assert runtime.record(task_id).status == Status.FAILED
        broken.clear()  # the fix, deployed
        send = Continuations.send
        target = f"{task_id}.0.map_tasks.leaf-0.1" if lost == "child" else task_id

        def lose_one(self: Continuations, task: str, **kwargs: Any) -> None:
            if task == target:
                monkeypatch.setattr(Continuations, "send", send)
                raise QueueError("send failed: injected")
            send(self, task, **kwargs)

        monkeypatch.setattr(Continuations, "send", lose_one)
        with pytest.raises(QueueError):
            app.client().retry(task_id)
        app.client().retry(task_id)  # the outside world tries again
        drain(runtime)
        done = runtime.record(task_id)
    assert (done.status, done.error) == (Status.SUCCEEDED, None), done.error
    assert done.result == [0, 10, 20]
    assert ran["work 1"] == 2
