"""Gathered steps keep the promises of one step at a time: a cancel reaches every gathered step
before it starts, a replay sees the failures in the order the live turn saw them, and what a
sibling still running does after the task returned never changes the task's outcome.

On both backends (``make_runtime``); the steps end in a set order by waiting for each other,
never by sleeps of different lengths.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from continuum import Continuum, StepError, TaskCancelledError, TaskContext
from continuum._record.model import walk
from continuum.testing import check_replay_safe
from tests.conftest import record_key
from tests.support import worker_logger


class Empty(BaseModel):
    pass


@pytest.fixture(autouse=True)
def _quiet_worker_logs() -> Iterator[None]:
    level = worker_logger.level
    worker_logger.setLevel("ERROR")
    yield
    worker_logger.setLevel(level)


async def ended(events: list[str], name: str) -> None:
    """Until ``name`` has ended: however loaded the machine, the order holds."""
    while f"end {name}" not in events:
        await asyncio.sleep(0.005)


# -- a cancel reaches every gathered step before it starts ----------------------------------------


def charging_app(shape: str) -> tuple[Continuum, list[str]]:
    app = Continuum()
    ran: list[str] = []

    @app.step
    async def charge(item: int) -> int:
        ran.append(f"charge {item}")
        return item

    @app.step
    async def refund(item: int) -> str:
        ran.append(f"refund {item}")
        return "refunded"

    @app.task(state=Empty)
    async def checkout(ctx: TaskContext[Empty]) -> str:
        try:
            if shape == "gather":
                await asyncio.gather(charge(1), charge(2), charge(3))
            elif shape == "task group":
                async with asyncio.TaskGroup() as group:
                    for item in (1, 2, 3):
                        group.create_task(charge(item))
            else:
                for item in (1, 2, 3):
                    await charge(item)
        except* TaskCancelledError:
            # Asyncio tasks made after the cancel was delivered are cleanup: they run.
            await asyncio.gather(refund(1), refund(2))
            raise
        return "charged"

    return app, ran


@pytest.mark.parametrize("shape", ["gather", "task group", "awaited loop"])
def test_a_task_cancelled_before_it_ran_starts_none_of_its_gathered_steps(make_runtime, shape):
    app, ran = charging_app(shape)
    runtime = make_runtime(app)
    with runtime.time.running():
        task_id = app.client().start("checkout", {})
        app.client().cancel(task_id, "the customer left")
        done = runtime.drive(task_id)
    assert done.status == "cancelled"
    # No charge ran: the cancel reached every one before it started; the refunds all ran.
    assert ran == ["refund 1", "refund 2"], ran


def test_a_cancel_that_comes_while_gathered_steps_run_stops_each_at_its_next_step(make_runtime):
    app = Continuum(inbox_poll_s=0.5)
    ran: list[str] = []
    sent = asyncio.Event()

    @app.step
    async def first(i: int) -> int:
        ran.append(f"first {i}")
        if i == 0:
            while "first 1" not in ran:  # both run when the cancel comes
                await asyncio.sleep(0.005)
            app.client().cancel(box["task_id"], "stop")
            runtime.time.advance(1)  # the inbox is due at the next step
            sent.set()
        else:
            await sent.wait()
        return i

    @app.step
    async def second(i: int) -> int:
        ran.append(f"second {i}")
        return i

    @app.step
    async def clean(i: int) -> int:
        ran.append(f"clean {i}")
        return i

    async def branch(i: int) -> int:
        await first(i)
        return await second(i)

    @app.task(state=Empty)
    async def work(ctx: TaskContext[Empty]) -> list[int]:
        try:
            return list(await asyncio.gather(branch(0), branch(1)))
        except TaskCancelledError:
            await clean(0)
            await ctx.sleep_async(3600)  # the turn replays after it, cancels and all
            await asyncio.gather(clean(1), clean(2))
            raise

    box: dict[str, str] = {}
    runtime = make_runtime(app)
    with runtime.time.running():
        box["task_id"] = task_id = app.client().start("work", {})
        done = runtime.drive(task_id)
    assert done.status == "cancelled", done.error
    # Each branch saw the cancel at its next step, live and on the replay after the sleep.
    assert sorted(ran) == ["clean 0", "clean 1", "clean 2", "first 0", "first 1"], ran


@pytest.mark.parametrize("delivered", ["in an item", "beside the batch"])
@pytest.mark.parametrize("inner", ["gathered", "awaited"])
@pytest.mark.parametrize("batch", ["map_async", "parallel_async"])
def test_a_cancel_that_comes_while_batch_items_run_reaches_each_of_their_steps_before_it_starts(
    make_runtime, batch, inner, delivered
):
    app = Continuum(inbox_poll_s=0.5)
    ran: list[str] = []
    sent = asyncio.Event()
    beside = delivered == "beside the batch"
    bases = (10, 20) if beside else (0, 10)  # the cancel is sent by the step of branch 0
    per_item = (0, 1) if inner == "gathered" else (0,)
    # Every branch's first step runs when the cancel comes.
    firsts = [base + k for base in bases for k in per_item] + ([0] if beside else [])

    @app.step
    async def first(i: int) -> int:
        ran.append(f"first {i}")
        if i == 0:
            while not all(f"first {j}" in ran for j in firsts):
                await asyncio.sleep(0.005)
            app.client().cancel(box["task_id"], "stop")
            runtime.time.advance(1)  # the inbox is due at the next step
            sent.set()
        else:
            await sent.wait()
        return i

    @app.step
    async def second(i: int) -> int:
        ran.append(f"second {i}")
        return i

    @app.step
    async def clean(i: int) -> int:
        ran.append(f"clean {i}")
        return i

    async def branch(i: int) -> int:
        await first(i)
        return await second(i)

    async def steps(base: int) -> list[int]:
        return list(await asyncio.gather(*(branch(base + k) for k in per_item)))

    async def item(c: TaskContext[Empty], base: int, index: int) -> list[int]:
        if inner == "gathered":
            return await steps(base)
        return [await branch(base)]

    async def low(c: TaskContext[Empty]) -> list[int]:
        return await item(c, bases[0], 0)

    async def high(c: TaskContext[Empty]) -> list[int]:
        return await item(c, bases[1], 1)

    @app.task(state=Empty)
    async def work(ctx: TaskContext[Empty]) -> list[object]:
        async def fan_out() -> list[object]:
            if batch == "map_async":
                return (await ctx.map_async(list(bases), item)).values()
            return (await ctx.parallel_async([low, high])).values()

        try:
            if beside:
                return list(await asyncio.gather(fan_out(), branch(0)))
            return await fan_out()
        except TaskCancelledError:
            await clean(0)
            await ctx.sleep_async(3600)  # the turn replays after it, cancels and all
            await asyncio.gather(clean(1), clean(2))
            raise

    box: dict[str, str] = {}
    runtime = make_runtime(app)
    with runtime.time.running():
        box["task_id"] = task_id = app.client().start("work", {})
        done = runtime.drive(task_id)
    assert done.status == "cancelled", done.error
    # Each step in each item saw the cancel at its next step, live and on the replay.
    started = [f"first {i}" for i in firsts]
    assert sorted(ran) == sorted(["clean 0", "clean 1", "clean 2", *started]), ran


# -- a replay sees the failures in the order the live turn saw them -------------------------------


def racing_app(events: list[str]) -> Continuum:
    app = Continuum()

    @app.step
    async def fails(name: str, after: str | None) -> str:
        events.append(f"start {name}")
        try:
            if after is not None:
                await ended(events, after)
            raise ValueError(name)
        finally:
            events.append(f"end {name}")

    @app.task(state=Empty)
    async def race(ctx: TaskContext[Empty]) -> str:
        try:
            # "slow" was made first and fails last: the live gather raises "fast".
            await asyncio.gather(fails("slow", "fast"), fails("fast", None))
        except StepError as exc:
            seen = exc.message
        else:
            seen = "nothing failed"
        await ctx.sleep_async(3600)  # the turn replays after it
        return seen

    return app


def test_a_replay_raises_the_failure_the_live_gather_raised(make_runtime):
    events: list[str] = []
    app = racing_app(events)
    runtime = make_runtime(app)
    with runtime.time.running():
        done = runtime.run("race", {})
    assert done.status == "succeeded", done.error
    assert events == ["start slow", "start fast", "end fast", "end slow"], events
    assert "ValueError: fast" in done.result, done.result  # as live, after the sleep's replay


def test_a_fork_at_a_checkpoint_replays_the_failure_the_live_gather_raised_there(make_runtime):
    events: list[str] = []
    app = racing_app(events)
    runtime = make_runtime(app)
    with runtime.time.running():
        task_id = app.client().start("race", {})
        runtime.invoke_once()
        assert runtime.record(task_id).status == "waiting"  # the gather's endings are saved
        app.client().fork(task_id, version="latest", new_id="what-if")
        forked = runtime.drive("what-if")
    assert forked.status == "succeeded", forked.error
    assert events == ["start slow", "start fast", "end fast", "end slow"], events  # replayed
    assert "ValueError: fast" in forked.result, forked.result


def test_a_replay_that_gathers_fewer_steps_fails_as_non_determinism_without_waiting(
    make_runtime,
):
    events: list[str] = []
    flip = {"on": False}
    app = Continuum()

    @app.step
    async def fetch(name: str, after: str | None) -> str:
        if after is not None:
            await ended(events, after)
        events.append(f"end {name}")
        return name

    @app.task(state=Empty)
    async def fewer(ctx: TaskContext[Empty]) -> list[str]:
        # Live "b" ends first; the replay makes only "a", which ended after it.
        calls = [fetch("a", "b")] + ([] if flip["on"] else [fetch("b", None)])
        found = await asyncio.gather(*calls)
        await ctx.wait_for_signal_async("go")
        return list(found)

    runtime = make_runtime(app)
    with runtime.time.running():
        task_id = app.client().start("fewer", {})
        runtime.invoke_once()
        flip["on"] = True
        app.client().signal(task_id, "go")
        done = runtime.drive(task_id)
    assert done.status == "failed"
    assert "NonDeterminismError" in str(runtime.record(task_id).error), done.error


def test_a_replay_after_a_retry_sees_the_asyncio_tasks_end_in_the_order_the_retried_turn_saw(
    make_runtime,
):
    app = Continuum()
    retried = {"on": False}
    events: list[str] = []
    seen: list[str] = []  # what each pass of the turn saw end first

    @app.step
    async def slow() -> str:
        if not retried["on"]:
            await asyncio.Event().wait()  # the failed run: still running when "fast" fails
        events.append("end slow")
        return "slow"

    @app.step
    async def fast() -> str:
        if not retried["on"]:
            raise ValueError("fast is down")  # the failed run: it ends first, failing
        await ended(events, "slow")  # the retried run: it ends last
        return "fast"

    @app.task(state=Empty)
    async def race(ctx: TaskContext[Empty]) -> str:
        tasks = [asyncio.create_task(slow()), asyncio.create_task(fast())]
        first = await next(asyncio.as_completed(tasks))
        seen.append(first)
        await asyncio.gather(*tasks)
        await ctx.sleep_async(3600)  # the turn replays after it
        return first

    runtime = make_runtime(app, budget_s=1.0)  # the failed turn's end waits out "slow"
    with runtime.time.running():
        task_id = app.client().start("race", {})
        assert runtime.drive(task_id).status == "failed"
        retried["on"] = True
        app.client().retry(task_id)
        done = runtime.drive(task_id)
    assert done.status == "succeeded", done.error
    # The retried turn saw "slow" end first, and so did every replay of it after the sleep.
    assert len(seen) >= 2, seen
    assert set(seen) == {"slow"}, seen
    assert done.result == "slow"


def test_a_retry_runs_again_the_failed_step_of_the_first_of_two_gathered_steps(make_runtime):
    app = Continuum()
    retried = {"on": False}

    @app.step
    async def first() -> str:
        if not retried["on"]:
            raise ValueError("first is down")
        return "first"

    @app.step
    async def second() -> str:
        if not retried["on"]:
            await asyncio.Event().wait()  # still running, made after "first", when it fails
        return "second"

    @app.task(state=Empty)
    async def both(ctx: TaskContext[Empty]) -> list[str]:
        return list(await asyncio.gather(first(), second()))

    runtime = make_runtime(app, budget_s=1.0)
    with runtime.time.running():
        task_id = app.client().start("both", {})
        assert runtime.drive(task_id).status == "failed"
        retried["on"] = True
        app.client().retry(task_id)
        done = runtime.drive(task_id)
    assert done.status == "succeeded", done.error
    assert done.result == ["first", "second"]


def test_a_retry_leaves_the_failure_the_task_caught_and_runs_again_the_one_it_did_not(
    make_runtime,
):
    app = Continuum()
    retried = {"on": False}
    runs: list[str] = []

    @app.step
    async def flaky(name: str) -> str:
        runs.append(name)
        if not retried["on"] or name == "caught":
            raise ValueError(f"{name} is down")
        return name

    @app.task(state=Empty)
    async def pair(ctx: TaskContext[Empty]) -> str:
        caught = asyncio.create_task(flaky("caught"))
        with contextlib.suppress(StepError):  # its failure is handled: the turn goes on
            await caught
        return await asyncio.create_task(flaky("uncaught"))

    runtime = make_runtime(app)
    with runtime.time.running():
        task_id = app.client().start("pair", {})
        assert runtime.drive(task_id).status == "failed"
        retried["on"] = True
        app.client().retry(task_id)
        done = runtime.drive(task_id)
    assert done.status == "succeeded", done.error
    assert done.result == "uncaught"
    assert runs.count("caught") == 1  # its recorded failure replayed, caught again


def test_a_retry_resumes_a_gathered_task_still_running_though_it_caught_a_failure(make_runtime):
    app = Continuum()
    retried = {"on": False}
    runs: list[str] = []

    @app.step
    async def flaky(name: str) -> str:
        runs.append(name)
        if not retried["on"] or name == "caught":
            raise ValueError(f"{name} is down")
        return name

    async def fails(caught: asyncio.Event) -> str:
        if not retried["on"]:
            await caught.wait()  # the failed run: it fails after the other caught its failure
        return await flaky("fails")

    async def catches(caught: asyncio.Event) -> str:
        with contextlib.suppress(StepError):
            await flaky("caught")
        caught.set()
        if not retried["on"]:
            await asyncio.Event().wait()  # the failed run: still running when the turn fails
        return "caught"

    @app.task(state=Empty)
    async def pair(ctx: TaskContext[Empty]) -> list[str]:
        caught = asyncio.Event()
        return list(await asyncio.gather(fails(caught), catches(caught)))

    runtime = make_runtime(app, budget_s=1.0)
    with runtime.time.running():
        task_id = app.client().start("pair", {})
        assert runtime.drive(task_id).status == "failed"
        retried["on"] = True
        app.client().retry(task_id)
        done = runtime.drive(task_id)
    assert done.status == "succeeded", done.error
    assert done.result == ["fails", "caught"]
    assert runs.count("caught") == 1  # its recorded failure replayed, caught again


def without_ended(entries: list[dict]) -> list[dict]:
    return [
        {k: without_ended(v) if k == "children" and v else v for k, v in e.items() if k != "ended"}
        for e in entries
    ]


def test_a_record_from_before_the_ending_order_still_replays(make_runtime):
    events: list[str] = []
    app = racing_app(events)
    runtime = make_runtime(app)
    with runtime.time.running():
        task_id = app.client().start("race", {})
        runtime.invoke_once()
        record = runtime.record(task_id)
        assert record.status == "waiting"
        ordered = [entry for entry in walk(record.journal) if entry.ended is not None]
        assert len(ordered) == 2
        key = record_key(task_id)
        raw = json.loads(runtime.observer_store.get(key).body)
        raw["journal"] = without_ended(raw["journal"])  # as an older worker wrote it
        runtime.observer_store.put(key, json.dumps(raw).encode())
        done = runtime.drive(task_id)
    assert done.status == "succeeded", done.error
    assert events.count("start fast") == 1  # replayed, not run again


def test_check_replay_safe_finds_gathered_failures_replay_safe():
    events: list[str] = []
    report = check_replay_safe(racing_app(events), "race", {})
    assert "ValueError: fast" in report.result, report.result


# -- a sibling still running when the task returns ------------------------------------------------


def handled_app(events: list[str], late_fails: str) -> Continuum:
    app = Continuum()

    @app.step
    async def work(name: str, after: str | None, fail: bool) -> str:
        events.append(f"start {name}")
        try:
            if after is not None:
                await ended(events, after)
            if fail:
                raise ValueError(name)
            return name
        finally:
            events.append(f"end {name}")

    @app.task(state=Empty)
    async def handled(ctx: TaskContext[Empty]) -> str:
        # "late" fails once "early" has, either before the task returns (its one more step
        # waits for it) or after it returned.
        late_waits_for = "early" if late_fails == "before the return" else "return"
        try:
            await asyncio.gather(work("late", late_waits_for, True), work("early", None, True))
        except StepError as exc:
            if late_fails == "before the return":
                await work("one more", "late", False)
            events.append("end return")
            return f"handled {exc.message}"
        return "nothing failed"

    return app


@pytest.mark.parametrize("late_fails", ["before the return", "after the return"])
def test_an_error_the_task_handled_never_fails_it_whatever_a_sibling_does_later(
    make_runtime, late_fails
):
    events: list[str] = []
    app = handled_app(events, late_fails)
    runtime = make_runtime(app)
    with runtime.time.running():
        done = runtime.run("handled", {})
    assert done.status == "succeeded", done.error
    assert done.result == "handled step raised ValueError: early"
    assert events.index("end late") > events.index("start late"), events
