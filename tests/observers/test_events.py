"""Every operation a trace shows is told to the observers once, live, in both flavours, on both
backends: steps (their results and errors, and whether an earlier invocation began them),
waits (kind, name, outcome, and whether they were reached in an earlier invocation), child
contexts (a virtual one too), parallel branches and map items, and each invocation's Lambda
request id. A replayed operation tells nothing again, or says it is a replay.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, StepError, TaskContext
from continuum._define.events import (
    ContextEnded,
    ContextStarted,
    InvocationEnded,
    InvocationStarted,
    StepEnded,
    StepStarted,
    WaitEnded,
    WaitStarted,
)
from tests.flavours import FLAVOURS
from tests.observers.recorder import Recorder

HOUR = 3600


class Empty(BaseModel):
    pass


def trip_app(flavour: str) -> tuple[Continuum, Recorder]:
    """Task ``trip``: a step; a block; a virtual group that sleeps between its two steps; a
    step retried after an hour's backoff; two parallel branches; a map of two items; a step
    that fails, caught. Three invocations: the nap and the backoff each park the task."""
    app, seen = Continuum(), Recorder()
    app.observe(seen)
    calls: Counter[str] = Counter()

    if flavour == "sync":

        @app.step
        def look(what: str) -> str:
            return what.upper()

        @app.step(retries=1, backoff_s=HOUR)
        def flaky() -> str:
            calls["flaky"] += 1
            if calls["flaky"] == 1:
                raise ConnectionError("down")
            return "up"

        @app.step
        def boom() -> str:
            raise ValueError("boom")

        def group(ctx: TaskContext[Empty]) -> str:
            look("before nap")
            ctx.sleep(HOUR, name="nap")
            return look("after nap")

        @app.task(state=Empty)
        def trip(ctx: TaskContext[Empty]) -> list[Any]:
            done = [look("hello")]
            done.append(ctx.child_context(lambda c: look("in block"), name="block"))
            done.append(ctx.child_context(group, name="group", virtual=True))
            done.append(flaky())
            branches = [lambda c: look("left"), lambda c: look("right")]
            done.append(ctx.parallel(branches, name="both").values())
            done.append(ctx.map([1, 2], lambda c, i, n: look(f"item {i}"), name="each").values())
            try:
                boom()
            except StepError as exc:
                done.append(exc.error_type)
            return done

    else:

        @app.step
        async def look(what: str) -> str:
            return what.upper()

        @app.step(retries=1, backoff_s=HOUR)
        async def flaky() -> str:
            calls["flaky"] += 1
            if calls["flaky"] == 1:
                raise ConnectionError("down")
            return "up"

        @app.step
        async def boom() -> str:
            raise ValueError("boom")

        async def group(ctx: TaskContext[Empty]) -> str:
            await look("before nap")
            await ctx.sleep_async(HOUR, name="nap")
            return await look("after nap")

        async def block(ctx: TaskContext[Empty]) -> str:
            return await look("in block")

        async def left(ctx: TaskContext[Empty]) -> str:
            return await look("left")

        async def right(ctx: TaskContext[Empty]) -> str:
            return await look("right")

        async def item(ctx: TaskContext[Empty], i: int, n: int) -> str:
            return await look(f"item {i}")

        @app.task(state=Empty)
        async def trip(ctx: TaskContext[Empty]) -> list[Any]:
            done = [await look("hello")]
            done.append(await ctx.child_context_async(block, name="block"))
            done.append(await ctx.child_context_async(group, name="group", virtual=True))
            done.append(await flaky())
            done.append((await ctx.parallel_async([left, right], name="both")).values())
            done.append((await ctx.map_async([1, 2], item, name="each")).values())
            try:
                await boom()
            except StepError as exc:
                done.append(exc.error_type)
            return done

    return app, seen


RESULT = ["HELLO", "IN BLOCK", "AFTER NAP", "up", ["LEFT", "RIGHT"], ["ITEM 1", "ITEM 2"]]


@pytest.fixture(params=FLAVOURS)
def trip(request: pytest.FixtureRequest, make_runtime: Any) -> Recorder:
    app, seen = trip_app(request.param)
    runtime = make_runtime(app)
    summary = runtime.run("trip", {})
    assert summary.status == "succeeded"
    assert runtime.record(summary.task_id).result == [*RESULT, "ValueError"]
    return seen


def test_each_invocation_starts_and_ends_once_with_its_lambda_request_id(trip):
    starts, ends = trip.of(InvocationStarted), trip.of(InvocationEnded)
    assert [s.number for s in starts] == [e.number for e in ends] == [1, 2, 3]
    assert [s.first for s in starts] == [e.first for e in ends] == [True, False, False]
    ids = [s.request_id for s in starts]
    assert all(ids)
    assert len(set(ids)) == 3
    assert [e.request_id for e in ends] == ids
    assert [e.outcome for e in ends] == ["waiting", "waiting", "succeeded"]


def test_each_live_step_attempt_starts_and_ends_once_with_its_result_or_error(trip):
    started = Counter((s.path + s.key, s.attempt) for s in trip.of(StepStarted))
    assert set(started.values()) == {1}  # no replayed step is told again
    assert sorted(started) == sorted(
        [
            ("look#0", 1),
            ("block#1/look#0", 1),
            ("group#2/look#2", 1),
            ("group#2/look#4", 1),
            ("flaky#5", 1),
            ("flaky#5", 2),
            ("both#6/0/look#0", 1),
            ("both#6/1/look#0", 1),
            ("each#7/0/look#0", 1),
            ("each#7/1/look#0", 1),
            ("boom#8", 1),
        ]
    )
    ends = {(e.path + e.key, e.attempt): e for e in trip.of(StepEnded)}
    assert len(ends) == len(trip.of(StepEnded)) == len(started)
    assert (ends["look#0", 1].outcome, ends["look#0", 1].result) == ("ok", "HELLO")
    retry = ends["flaky#5", 1]
    assert (retry.outcome, retry.error_type, retry.error) == ("retry", "ConnectionError", "down")
    assert (ends["flaky#5", 2].outcome, ends["flaky#5", 2].result) == ("ok", "up")
    failed = ends["boom#8", 1]
    assert (failed.outcome, failed.error_type, failed.error, failed.result) == (
        "failed",
        "ValueError",
        "boom",
        None,
    )
    replays = {(s.key, s.attempt): s.replay for s in trip.of(StepStarted) if s.key == "flaky#5"}
    assert replays == {("flaky#5", 1): False, ("flaky#5", 2): True}  # after the backoff


def test_a_wait_starts_once_and_ends_once_saying_it_was_replayed(trip):
    (start,) = trip.of(WaitStarted)
    (end,) = trip.of(WaitEnded)
    assert (start.kind, start.name, start.key) == ("sleep", "nap", "group#2/nap#3")
    assert (end.kind, end.name, end.key, end.outcome) == ("sleep", "nap", start.key, "ok")
    assert end.replay  # reached in the first invocation, answered in the second
    assert end.started_at == start.started_at
    assert HOUR <= end.ended_at - end.started_at < HOUR + 60


def test_contexts_branches_and_items_start_and_end_once(trip):
    started = [(e.kind, e.path, e.index, e.virtual) for e in trip.of(ContextStarted)]
    assert sorted(started, key=str) == sorted(
        [
            ("context", "block#1/", None, False),
            ("context", "group#2/", None, True),
            ("batch", "both#6/", None, False),
            ("item", "both#6/0/", 0, False),
            ("item", "both#6/1/", 1, False),
            ("batch", "each#7/", None, False),
            ("item", "each#7/0/", 0, False),
            ("item", "each#7/1/", 1, False),
        ],
        key=str,
    )
    ended = {e.path: e for e in trip.of(ContextEnded)}
    assert len(ended) == len(trip.of(ContextEnded)) == len(started)
    assert {e.outcome for e in ended.values()} == {"ok"}
    # The virtual group began in the first invocation and ended in the second, after its nap.
    assert [p for p, e in ended.items() if e.replay] == ["group#2/"]
    assert ended["group#2/"].virtual


def test_a_virtual_context_suspended_before_its_first_step_starts_once(make_runtime):
    """One live step per invocation: the group is reached in the first (which suspends before
    its first step), runs a step in each of the next two, and ends in the third."""
    from tests.conftest import ScriptedContext, drain

    app, seen = Continuum(), Recorder()
    app.observe(seen)
    ran: list[str] = []

    @app.step
    def look(what: str) -> str:
        ran.append(what)
        return what

    def group(ctx: TaskContext[Empty]) -> list[str]:
        return [look("hotel"), look("train")]

    @app.task(state=Empty)
    def trip(ctx: TaskContext[Empty]) -> list[str]:
        return [look("weather"), *ctx.child_context(group, name="plan", virtual=True)]

    runtime = make_runtime(app)
    task_id = app.client().start("trip", {})
    done = drain(runtime, task_id, lambda i: ScriptedContext(1, lambda: len(ran)))
    assert done.result == ["weather", "hotel", "train"]
    assert len(seen.of(InvocationStarted)) == 3
    (start,) = seen.of(ContextStarted)
    (end,) = seen.of(ContextEnded)
    assert (start.path, start.virtual, end.path, end.virtual) == ("plan#1/", True, "plan#1/", True)
    assert end.replay  # it began in the second invocation, and ended in the third
    first_inside = next(e for e in seen.events if isinstance(e, StepStarted) and e.path)
    assert seen.events.index(start) < seen.events.index(first_inside)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_batch_that_completes_early_ends_the_items_and_waits_it_no_longer_needs(
    flavour, make_runtime
):
    """``min_successful=1``: the fast branch's minute ends the batch while the slow one
    waits a day; observers hear that item, and its wait, end ``abandoned``."""
    from continuum import Completion

    app, seen = Continuum(), Recorder()
    app.observe(seen)

    if flavour == "sync":

        def fast(ctx: TaskContext[Empty]) -> int:
            ctx.sleep(60, name="short")
            return 0

        def slow(ctx: TaskContext[Empty]) -> int:
            ctx.sleep(86400, name="long")
            return 1

        @app.task(state=Empty)
        def race(ctx: TaskContext[Empty]) -> str:
            once = Completion(min_successful=1)
            batch = ctx.parallel([fast, slow], name="race", completion=once)
            return str(batch.completion_reason)

    else:

        async def fast_async(ctx: TaskContext[Empty]) -> int:
            await ctx.sleep_async(60, name="short")
            return 0

        async def slow_async(ctx: TaskContext[Empty]) -> int:
            await ctx.sleep_async(86400, name="long")
            return 1

        @app.task(state=Empty)
        async def race(ctx: TaskContext[Empty]) -> str:
            once = Completion(min_successful=1)
            batch = await ctx.parallel_async([fast_async, slow_async], name="race", completion=once)
            return str(batch.completion_reason)

    summary = make_runtime(app).run("race", {})
    assert summary.status == "succeeded"
    started = sorted(e.path for e in seen.of(ContextStarted))
    ended = {e.path: e.outcome for e in seen.of(ContextEnded)}
    assert sorted(ended) == started
    assert ended == {"race#0/": "ok", "race#0/0/": "ok", "race#0/1/": "abandoned"}
    waits = {e.key: e.outcome for e in seen.of(WaitEnded)}
    assert sorted(waits) == sorted(e.key for e in seen.of(WaitStarted))
    assert waits == {"race#0/0/short#0": "ok", "race#0/1/long#0": "abandoned"}


def test_an_async_step_cancelled_mid_attempt_ends_cancelled(make_runtime):
    """``asyncio.wait_for`` gives up on a slow step: its attempt ends ``cancelled`` (nothing
    recorded, so it runs again if called again), not left open."""
    import asyncio

    app, seen = Continuum(), Recorder()
    app.observe(seen)

    @app.step
    async def slow() -> str:
        await asyncio.sleep(30)
        return "late"

    @app.task(state=Empty)
    async def impatient(ctx: TaskContext[Empty]) -> str:
        try:
            return await asyncio.wait_for(slow(), timeout=0.05)
        except TimeoutError:
            return "gave up"

    summary = make_runtime(app).run("impatient", {})
    assert summary.status == "succeeded"
    (started,) = seen.of(StepStarted)
    (ended,) = seen.of(StepEnded)
    assert (ended.key, ended.attempt, ended.outcome) == (started.key, 1, "cancelled")
