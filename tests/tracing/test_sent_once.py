"""Each span is sent once, whatever replays, retries and forks the task went through."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from continuum import Status, TaskContext
from tests.support import LocalRuntime
from tests.tracing.conftest import doubled, named, spans_of


class Plan(BaseModel):
    city: str = "Oslo"


def test_a_retried_task_sends_one_root_per_run_not_one_root_twice(traced, exporter, naming, aws):
    app = traced(naming)
    calls: list[int] = []

    @app.step
    def book(city: str) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("the booking site is down")
        return f"booked {city}"

    @app.task(state=Plan)
    def trip(ctx: TaskContext[Plan]) -> str:
        return book(ctx.state.city)

    with_backend = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    with_backend.drive(app.client().start("trip", {}, task_id="trip-retried"))
    assert with_backend.record("trip-retried").status == Status.FAILED
    app.client().retry("trip-retried")
    with_backend.drive("trip-retried")
    assert with_backend.record("trip-retried").status == Status.SUCCEEDED
    spans = spans_of(exporter)
    assert doubled(spans) == []
    roots = sorted((s for s in spans if s.parent is None), key=lambda s: s.start_time or 0)
    assert [r.status.status_code for r in roots] == [StatusCode.ERROR, StatusCode.OK]
    assert len({s.context.trace_id for s in spans}) == 1, "a retry stays in the task's trace"
    assert [link.context.span_id for link in roots[1].links] == [roots[0].context.span_id]


def test_an_async_tasks_contexts_replayed_after_a_wait_send_nothing_again(
    traced, exporter, naming, aws
):
    app = traced(naming)

    @app.step
    async def look(part: str) -> str:
        return part

    async def tool(part: str) -> str:
        return await look(part)

    @app.task(state=Plan)
    async def agent(ctx: TaskContext[Plan]) -> list[str]:
        found = []
        for round_ in range(3):
            found += await asyncio.gather(tool(f"a{round_}"), tool(f"b{round_}"))
            await ctx.sleep_async(60, name=f"think{round_}")
        return found

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("agent", {}, task_id="agent-1"))
    record = runtime.record("agent-1")
    assert record.status == Status.SUCCEEDED
    assert record.counters.invocations == 4
    spans = spans_of(exporter)
    assert doubled(spans) == []
    assert len([s for s in named(spans, "look") if s.status.status_code == StatusCode.OK]) == 6
    assert len(named(spans, "tool")) == 6, "one span per asyncio task, sent when it ends"
    # each wait: open in the invocation that reached it, then answered, once each
    waits = named(spans, "think2" if naming == "aws" else "wait think2")
    assert sorted(s.status.status_code.name for s in waits) == ["OK", "UNSET"]


def test_a_condition_whose_check_raises_sends_its_wait_with_the_error(
    traced, exporter, naming, aws
):
    app = traced(naming)

    def check(seen: int) -> int:
        if seen >= 1:
            raise LookupError("the order vanished")
        return seen + 1

    @app.task(state=Plan)
    def watch(ctx: TaskContext[Plan]) -> int:
        return ctx.wait_for_condition(
            check, initial=0, done=lambda n: n >= 5, delay_s=60, name="shipped"
        )

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("watch", {}, task_id="watch-1"))
    assert runtime.record("watch-1").status == Status.FAILED
    spans = spans_of(exporter)
    assert doubled(spans) == []
    kind = "durable.operation.subtype" if naming == "aws" else "continuum.wait.kind"
    conditions = [
        s
        for s in spans
        if (s.attributes or {}).get(kind) in ("condition", "WaitForCondition")
        and s.status.status_code != StatusCode.UNSET
    ]
    [condition] = [s for s in conditions if not s.name.startswith("shipped attempt")]
    assert condition.status.status_code == StatusCode.ERROR
    assert "the order vanished" in (condition.status.description or "")


class Leg(BaseModel):
    city: str


def test_forked_branches_and_child_tasks_are_in_the_parents_trace_each_sent_once(
    traced, exporter, naming, aws
):
    app = traced(naming)

    @app.step
    def note(text: str) -> str:
        return text

    @app.task(state=Leg)
    def leg(ctx: TaskContext[Leg]) -> str:
        ctx.sleep(60, name="drive")
        return note(f"at {ctx.state.city}")

    def branch(ctx: TaskContext[Plan]) -> str:
        ctx.sleep(30, name="pack")
        return note("packed")

    @app.task(state=Plan)
    def tour(ctx: TaskContext[Plan]) -> list[str]:
        packed = ctx.parallel([branch, branch], name="packing").values()
        legs = ctx.map_tasks("leg", [{"city": "Bergen"}, {"city": "Trondheim"}], name="legs")
        return [*packed, *legs.values()]

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("tour", {}, task_id="tour-1"))
    assert runtime.record("tour-1").status == Status.SUCCEEDED
    spans = spans_of(exporter)
    assert doubled(spans) == []
    assert len({s.context.trace_id for s in spans}) == 1, "the children are in the trace"
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1
    child_roots = named(spans, "Workflow" if naming == "aws" else "task leg")
    child_roots = [s for s in child_roots if s is not roots[0]]
    assert len(child_roots) == 2
    holders = {s.parent.span_id for s in child_roots if s.parent is not None}
    [holder] = [s for s in spans if s.context.span_id in holders]
    assert holder.name == ("legs" if naming == "aws" else "wait legs")
    assert len([s for s in named(spans, "note") if s.status.status_code == StatusCode.OK]) == 4


def test_a_crashed_invocation_is_sent_once_by_the_next_with_status_error(
    traced, exporter, naming, aws
):
    from tests.integrations.conftest import WorkerDied, drive_through_deaths

    app = traced(naming)
    deaths: list[int] = []

    @app.step
    def fragile() -> str:
        if not deaths:
            deaths.append(1)
            raise WorkerDied
        return "survived"

    @app.task(state=Plan)
    def crashy(ctx: TaskContext[Plan]) -> str:
        return fragile()

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    assert drive_through_deaths(runtime, app.client().start("crashy", {}, task_id="c-1")) == 1
    spans = spans_of(exporter)
    assert doubled(spans) == []
    invocations = named(spans, "Invocation" if naming == "aws" else "invocation")
    statuses = sorted(s.status.status_code.name for s in invocations)
    assert statuses == ["ERROR", "OK"]
    assert len(named(spans, "fragile")) == 1  # the dead attempt was never reported


RETRIED_SHAPES = ("asyncio task", "child context", "async child context", "wait_for_callback")


@pytest.mark.parametrize("shape", RETRIED_SHAPES)
def test_a_retried_run_sends_its_contexts_and_operations_under_ids_of_its_own(
    traced, exporter, naming, shape, aws
):
    app = traced(naming)
    calls: list[str] = []

    def booked(city: str) -> str:
        calls.append("book")
        if calls.count("book") == 1:
            raise ConnectionError("the booking site is down")
        return f"booked {city}"

    @app.step
    def book(city: str) -> str:
        return booked(city)

    @app.step
    async def book_async(city: str) -> str:
        return booked(city)

    @app.step
    async def look(city: str) -> str:
        return city

    async def block(c: TaskContext[Plan]) -> str:
        return await book_async(c.state.city)

    async def submit(callback_id: str) -> None:
        calls.append("submit")
        if calls.count("submit") == 1:
            raise ConnectionError("the approval desk is down")

    if shape == "child context":

        @app.task(state=Plan)
        def trip(ctx: TaskContext[Plan]) -> str:
            return ctx.child_context(lambda c: book(c.state.city), name="booking")

    else:

        @app.task(state=Plan)
        async def trip(ctx: TaskContext[Plan]) -> str:
            if shape == "asyncio task":
                _, booked = await asyncio.gather(look(ctx.state.city), block(ctx))
                return booked
            if shape == "async child context":
                return await ctx.child_context_async(block, name="booking")
            return str(await ctx.wait_for_callback_async(submit, name="approve", timeout=3600))

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("trip", {}, task_id="trip-retried"))
    assert runtime.record("trip-retried").status == Status.FAILED
    app.client().retry("trip-retried")
    if shape == "wait_for_callback":
        runtime.invoke_once()
        for token in runtime.record("trip-retried").callbacks:
            app.client().complete_callback(f"trip-retried.{token}", "yes")
    runtime.drive("trip-retried")
    record = runtime.record("trip-retried")
    assert record.status == Status.SUCCEEDED, record.error
    spans = spans_of(exporter)
    assert doubled(spans) == []
    roots = sorted((s for s in spans if s.parent is None), key=lambda s: s.start_time or 0)
    assert len(roots) == 2, "one root a run"


def test_a_fork_of_a_waiting_task_sends_its_spans_under_ids_of_its_own(
    traced, exporter, naming, aws
):
    app = traced(naming)

    @app.step
    def book(city: str) -> str:
        return f"booked {city}"

    @app.task(state=Plan)
    def trip(ctx: TaskContext[Plan]) -> str:
        ctx.sleep(60, name="think")
        return ctx.child_context(lambda c: book(c.state.city), name="booking")

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    app.client().start("trip", {}, task_id="trip-1")
    runtime.invoke_once()
    assert runtime.record("trip-1").status == Status.WAITING
    app.client().fork("trip-1", version="latest", new_id="trip-forked")
    runtime.drive("trip-1")
    runtime.drive("trip-forked")
    assert runtime.record("trip-1").status == Status.SUCCEEDED
    assert runtime.record("trip-forked").status == Status.SUCCEEDED
    spans = spans_of(exporter)
    assert doubled(spans) == []
    assert len({s.context.trace_id for s in spans}) == 2, "a fork is a task of its own"
    assert len(named(spans, "booking")) == 2


@pytest.mark.parametrize("within", ["the turn", "a virtual context"])
def test_a_gathered_virtual_context_that_waited_is_sent_once_whatever_replays_it(
    traced, exporter, naming, within, aws
):
    app = traced(naming)

    @app.step
    async def look(part: str) -> str:
        return part

    async def inner(c: TaskContext[Plan]) -> str:
        await c.sleep_async(60, name="rest")
        return await look("in")

    async def gathered(c: TaskContext[Plan]) -> str:
        a, b = await asyncio.gather(
            look("a"), c.child_context_async(inner, name="inner", virtual=True)
        )
        await c.sleep_async(30, name="after")  # a replay of it all, after the context ended
        return a + b

    @app.task(state=Plan)
    async def trip(ctx: TaskContext[Plan]) -> str:
        if within == "the turn":
            return await gathered(ctx)
        return await ctx.child_context_async(gathered, name="outer", virtual=True)

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("trip", {}, task_id="trip-gathered"))
    record = runtime.record("trip-gathered")
    assert record.status == Status.SUCCEEDED, record.error
    spans = spans_of(exporter)
    assert doubled(spans) == []
    assert len(named(spans, "inner")) == 1
