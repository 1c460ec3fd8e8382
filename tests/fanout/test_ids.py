"""Child ids: they always fit, whatever the parent's id, and a parent adopts only its own."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.fanout.kit import children_of, runtime_on, settle


class Many(BaseModel):
    n: int


class One(BaseModel):
    i: int


def many_app() -> Continuum:
    app = Continuum()

    @app.step
    def square(i: int) -> int:
        return i * i

    @app.task(state=One)
    def leaf(ctx: TaskContext[One]) -> int:
        return square(ctx.state.i)

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
    from continuum.family import child_id

    for length in (1, 90, 99, 100, 110, 128):
        parent = "q" * length
        prefix = child_id(parent, turn=7, path="block#0/", key="map_tasks.leaf#0", index=None)
        again = child_id(parent, turn=7, path="block#0/", key="map_tasks.leaf#0", index=None)
        assert prefix == again  # the same on every replay
        last = child_id(parent, turn=7, path="block#0/", key="map_tasks.leaf#0", index=10**11)
        assert last == f"{prefix}.{10**11}"
        assert len(last) <= 128
