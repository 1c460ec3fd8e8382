"""Child ids: they always fit, whatever the parent's id, and a parent adopts only its own.

The tests of squatted ids run in both flavours (``tests/flavours.py``): the async twins of
parent and child await ``invoke_async``, ``map_tasks_async`` and an ``async def`` step, and
derive the same child ids.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from continuum import BatchResult, ChildTaskError, Completion, Continuum, Status, TaskContext
from tests.fanout.kit import children_of, runtime_on, settle
from tests.flavours import FLAVOURS


class Many(BaseModel):
    n: int


class One(BaseModel):
    i: int


def leaf_app(flavour: str = "sync") -> Continuum:
    """An app with the child task ``leaf``: the square of its ``i``, in a step."""
    app = Continuum()

    if flavour == "sync":

        @app.step
        def square(i: int) -> int:
            return i * i

        @app.task(state=One)
        def leaf(ctx: TaskContext[One]) -> int:
            return square(ctx.state.i)

    else:

        @app.step
        async def square(i: int) -> int:
            return i * i

        @app.task(state=One)
        async def leaf(ctx: TaskContext[One]) -> int:
            return await square(ctx.state.i)

    return app


def many_app() -> Continuum:
    app = leaf_app()

    @app.task(state=Many)
    def fan(ctx: TaskContext[Many]) -> Any:
        done = ctx.map_tasks("leaf", [One(i=i) for i in range(ctx.state.n)], max_concurrency=40)
        return done.values()

    return app


def test_a_parent_with_a_long_id_maps_more_than_a_hundred_child_tasks():
    app = many_app()
    parent = "p" * 110  # a valid id, 18 characters short of the limit
    with runtime_on("memory", app) as runtime, runtime.time.running():
        app.client().start("fan", Many(n=110), task_id=parent)
        settle(runtime, limit=5000)
        done = runtime.record(parent)
        children = children_of(runtime, parent)
    assert done.status == Status.SUCCEEDED, done.error
    assert done.result == [i * i for i in range(110)]
    ids = [child.task_id for child in children]
    assert len(set(ids)) == 110
    assert max(len(task_id) for task_id in ids) <= 128
    assert all(child.status == Status.SUCCEEDED for child in children)


def test_every_derived_child_id_fits_in_a_task_id_whatever_the_parent_id_length():
    from continuum._fanout.child_tasks import child_id

    for length in (1, 90, 99, 100, 110, 128):
        parent = "q" * length
        prefix = child_id(parent, turn=7, path="block#0/", key="map_tasks.leaf#0", index=None)
        again = child_id(parent, turn=7, path="block#0/", key="map_tasks.leaf#0", index=None)
        assert prefix == again  # the same on every replay
        last = child_id(parent, turn=7, path="block#0/", key="map_tasks.leaf#0", index=10**11)
        assert last == f"{prefix}.{10**11}"
        assert len(last) <= 128


class Squat(BaseModel):
    n: int = 5
    api: str = "map_tasks"


def squat_app(flavour: str = "sync") -> Continuum:
    app = leaf_app(flavour)
    leaves = Completion(tolerated_failure_count=2)

    def refused(exc: ChildTaskError) -> dict[str, Any]:
        return {"error_type": exc.error_type, "child": exc.child_id, "text": str(exc)}

    def report(done: BatchResult) -> dict[str, Any]:
        return {
            "succeeded": {item.index: item.result for item in done.succeeded()},
            "failed": {item.index: item.error.type for item in done.failed() if item.error},
            "status": done.status,
        }

    if flavour == "sync":

        @app.task(state=Squat)
        def adopt(ctx: TaskContext[Squat]) -> Any:
            if ctx.state.api == "invoke":
                try:
                    return {"value": ctx.invoke("leaf", One(i=3))}
                except ChildTaskError as exc:
                    return refused(exc)
            inputs = [One(i=i) for i in range(ctx.state.n)]
            return report(ctx.map_tasks("leaf", inputs, max_concurrency=2, completion=leaves))

    else:

        @app.task(state=Squat)
        async def adopt(ctx: TaskContext[Squat]) -> Any:
            if ctx.state.api == "invoke":
                try:
                    return {"value": await ctx.invoke_async("leaf", One(i=3))}
                except ChildTaskError as exc:
                    return refused(exc)
            inputs = [One(i=i) for i in range(ctx.state.n)]
            done = await ctx.map_tasks_async("leaf", inputs, max_concurrency=2, completion=leaves)
            return report(done)

    return app


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_parent_does_not_adopt_a_task_started_earlier_under_its_childs_id(backend, flavour):
    app = squat_app(flavour)
    parent = "job"
    squatted = f"{parent}.0.invoke.leaf-0"  # predictable: derived from the parent's id
    with runtime_on(backend, app) as runtime, runtime.time.running():
        app.client().start("leaf", One(i=99), task_id=squatted)
        settle(runtime)
        app.client().start("adopt", Squat(api="invoke"), task_id=parent)
        settle(runtime)
        done, squatter = runtime.record(parent), runtime.record(squatted)
    assert done.status == Status.SUCCEEDED, (done.status, done.error)
    assert done.result["error_type"] == "ChildIdTakenError"
    assert done.result["child"] == squatted
    assert squatted in done.result["text"]
    assert (squatter.status, squatter.result, squatter.parent) == (Status.SUCCEEDED, 9801, None)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_squatted_ids_in_a_batch_fail_their_slots_and_the_rest_of_the_batch_runs(backend, flavour):
    app = squat_app(flavour)
    parent = "job"
    prefix = f"{parent}.0.map_tasks.leaf-0"
    # Index 1 would start in the first wave, index 2 after index 0 (its predecessor).
    taken = {1: f"{prefix}.1", 2: f"{prefix}.2"}
    with runtime_on(backend, app) as runtime, runtime.time.running():
        for i, task_id in taken.items():
            app.client().start("leaf", One(i=100 + i), task_id=task_id)
        settle(runtime)
        app.client().start("adopt", Squat(), task_id=parent)
        settle(runtime)
        done = runtime.record(parent)
        squatters = {i: runtime.record(task_id) for i, task_id in taken.items()}
        ours = {i: runtime.record(f"{prefix}.{i}") for i in (0, 3, 4)}
    assert done.status == Status.SUCCEEDED, (done.status, done.error)
    assert done.result == {
        "succeeded": {"0": 0, "3": 9, "4": 16},
        "failed": {"1": "ChildIdTakenError", "2": "ChildIdTakenError"},
        "status": "failed",
    }
    for i, squatter in squatters.items():
        assert (squatter.status, squatter.result, squatter.parent) == (
            Status.SUCCEEDED,
            (100 + i) ** 2,
            None,
        )
    assert all(child.status == Status.SUCCEEDED for child in ours.values())
