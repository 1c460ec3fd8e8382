"""Async tasks and steps: awaited steps are journaled like sync ones, steps gathered together
run side by side and are keyed by call order, the ``_async`` waits and fan-out, and the end of
an async turn (its asyncio tasks awaited or stopped, one event loop per invocation).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, ContinuumError, StepError, TaskContext
from continuum._record.model import walk
from continuum.testing import TaskRunner


class Empty(BaseModel):
    pass


def keys_of(record: Any) -> list[str]:
    """Every key of the journal, with its child contexts' paths."""

    def visit(entries: list[Any], path: str) -> list[str]:
        out: list[str] = []
        for entry in entries:
            out.append(path + entry.key)
            if entry.children:
                out.extend(visit(entry.children, f"{path}{entry.key}/"))
        return out

    return visit(record.journal, "")


# -- gather: side by side live, keyed by call order, replayed whatever order they finished -------


def gather_app(events: list[str]) -> Continuum:
    app = Continuum()

    @app.step
    async def fetch(name: str, after: str | None) -> str:
        events.append(f"start {name}")
        while after is not None and f"end {after}" not in events:
            await asyncio.sleep(0.01)  # ends after ``after`` has, however loaded the machine
        events.append(f"end {name}")
        return name.upper()

    @app.task(state=Empty)
    async def research(ctx: TaskContext[Empty]) -> list[str] | None:
        # The first finishes last: completion order is the reverse of call order.
        found = await asyncio.gather(fetch("a", "b"), fetch("b", "c"), fetch("c", None))
        await ctx.wait_for_signal_async("go")
        return list(found)

    return app


def test_gathered_steps_run_side_by_side_and_are_keyed_by_call_order():
    events: list[str] = []
    app = gather_app(events)
    with TaskRunner(app) as runner:
        task = runner.start("research", {})
        runner.drive(task.task_id)
        assert task.status == "waiting"
        # All three started before any ended: they ran side by side.
        assert events[:3] == ["start a", "start b", "start c"], events
        assert events[3:] == ["end c", "end b", "end a"], events
        keys = keys_of(task.record)
        assert keys[:6] == [
            "fetch#0",
            "fetch#0/fetch#0",
            "fetch#1",
            "fetch#1/fetch#0",
            "fetch#2",
            "fetch#2/fetch#0",
        ], keys
        results = {
            key: entry.result
            for key, entry in zip(keys, walk(task.record.journal), strict=True)
            if entry.kind == "step"
        }
        assert results == {
            "fetch#0/fetch#0": "A",
            "fetch#1/fetch#0": "B",
            "fetch#2/fetch#0": "C",
        }
        task.signal("go", None)
        task.run_until_done()
        # The replay after the wait matched each step to its own entry, and ran none again.
        assert task.result == ["A", "B", "C"]
        assert events.count("start a") == 1
        assert task.counters.steps_executed == 3
        assert task.counters.steps_replayed == 3


def test_a_replay_meets_a_different_call_order_as_non_determinism():
    flip = {"on": False}
    app = Continuum()

    @app.step
    async def fetch(name: str) -> str:
        return name

    @app.task(state=Empty)
    async def research(ctx: TaskContext[Empty]) -> list[str] | None:
        names = ["b", "a"] if flip["on"] else ["a", "b"]
        calls = [fetch(n) if n == "a" else other(n) for n in names]
        found = await asyncio.gather(*calls)
        await ctx.wait_for_signal_async("go")
        return list(found)

    @app.step
    async def other(name: str) -> str:
        return name

    with TaskRunner(app) as runner:
        task = runner.start("research", {})
        runner.drive(task.task_id)
        flip["on"] = True
        task.signal("go", None)
        task.run_until_done()
        assert task.status == "failed"
        assert task.error is not None
        assert task.error.type == "NonDeterminismError", task.error


# -- unwinding: a wait or a suspension is not an Exception ----------------------------------------


def test_except_exception_cannot_swallow_an_async_wait():
    app = Continuum()
    caught: list[BaseException] = []

    @app.task(state=Empty)
    async def patient(ctx: TaskContext[Empty]) -> str:
        try:
            await ctx.wait_for_signal_async("go")
        except Exception as exc:  # must not see the wait
            caught.append(exc)
        return "slept"

    with TaskRunner(app) as runner:
        task = runner.start("patient", {})
        runner.drive(task.task_id)
        assert task.status == "waiting"
        task.signal("go", None)
        task.run_until_done()
        assert task.result == "slept"
    assert caught == []


def test_a_wait_inside_a_task_group_waits_the_task():
    app = Continuum()

    @app.step
    async def work(n: int) -> int:
        return n * 2

    @app.task(state=Empty)
    async def grouped(ctx: TaskContext[Empty]) -> list[int]:
        async def branch(n: int) -> int:
            value = await work(n)
            if n == 1:
                await ctx.wait_for_signal_async("nap")
            return value

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(branch(n)) for n in range(3)]
        return [t.result() for t in tasks]

    with TaskRunner(app) as runner:
        task = runner.start("grouped", {})
        runner.drive(task.task_id)
        assert task.status == "waiting", task.error
        assert [w.name for w in task.waiting_for] == ["nap"]
        task.signal("nap", None)
        task.run_until_done()
        assert task.result == [0, 2, 4]
        assert task.step_counts == {"work": 3}


# -- steps: sync steps in threads, retries, preemption, errors ------------------------------------


def test_a_sync_step_awaited_runs_in_a_thread_and_its_own_steps_are_its_work():
    app = Continuum()
    threads: dict[str, int] = {}

    @app.step
    def inner(x: int) -> int:
        threads["inner"] = threading.get_ident()
        return x + 1

    @app.step
    def outer(x: int) -> int:
        threads["outer"] = threading.get_ident()
        return inner(x) * 10

    @app.task(state=Empty)
    async def mixed(ctx: TaskContext[Empty]) -> int:
        threads["task"] = threading.get_ident()
        return await ctx.step_async(outer, 1)

    with TaskRunner(app) as runner:
        task = runner.run("mixed", {})
        assert task.result == 20
        assert task.step_counts == {"outer": 1}
    assert threads["outer"] != threads["task"]
    assert threads["inner"] == threads["outer"]


def test_an_async_step_retries_with_its_backoff_awaited():
    app = Continuum()
    attempts: list[int] = []

    @app.step(retries=2, backoff_s=0.01)
    async def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return "ok"

    @app.task(state=Empty)
    async def patient(ctx: TaskContext[Empty]) -> str:
        return await flaky()

    with TaskRunner(app) as runner:
        task = runner.run("patient", {})
        assert task.result == "ok"
    assert len(attempts) == 3


def test_a_failed_async_step_raises_step_error_live_and_on_replay():
    app = Continuum()
    runs: list[int] = []

    @app.step
    async def broken() -> str:
        runs.append(1)
        raise ValueError("no")

    @app.task(state=Empty)
    async def careful(ctx: TaskContext[Empty]) -> str:
        try:
            await broken()
        except StepError as exc:
            note = exc.error_type
        await ctx.sleep_async(60)
        return note

    with TaskRunner(app) as runner:
        task = runner.run("careful", {})
        assert task.result == "ValueError"
    assert runs == [1]


def test_a_preemptible_async_step_is_cancelled_at_its_limit_and_runs_again():
    app = Continuum()
    runs: list[str] = []

    @app.step(preemptible=True)
    async def think(n: int) -> int:
        runs.append("start")
        if len([r for r in runs if r == "start"]) == 1:
            await asyncio.sleep(30)  # longer than the invocation can give it
        runs.append("end")
        return n

    @app.task(state=Empty)
    async def slow(ctx: TaskContext[Empty]) -> int:
        return await think(7)

    with TaskRunner(app, budget_s=3.0, virtual_time=False) as runner:
        task = runner.run("slow", {})
        assert task.result == 7
        assert task.counters.preemptions == 1
    assert runs == ["start", "start", "end"]


# -- the end of a turn ----------------------------------------------------------------------------


def test_an_asyncio_task_left_running_is_awaited_at_the_turns_end():
    app = Continuum()
    done: list[str] = []

    @app.step
    async def note(what: str) -> str:
        await asyncio.sleep(0.05)
        done.append(what)
        return what

    @app.task(state=Empty)
    async def leaky(ctx: TaskContext[Empty]) -> str:
        asyncio.get_running_loop().create_task(note("background"))
        return "returned"

    with TaskRunner(app) as runner:
        task = runner.run("leaky", {})
        assert task.result == "returned"
    assert done == ["background"]


def test_one_event_loop_per_invocation_closed_when_it_ends():
    app = Continuum()
    loops: list[asyncio.AbstractEventLoop] = []

    class Count(BaseModel):
        n: int = 0

    @app.step
    async def tick() -> int:
        return 1

    @app.task(state=Count)
    async def turns(ctx: TaskContext[Count]) -> int | None:
        loops.append(asyncio.get_running_loop())
        ctx.state.n += await tick()
        return ctx.state.n if ctx.state.n == 3 else None

    with TaskRunner(app) as runner:
        task = runner.run("turns", {})
        assert task.result == 3
    assert len(loops) == 3
    assert len(set(map(id, loops))) == 1  # three turns, one invocation, one loop
    assert loops[0].is_closed()


# -- the async waits and fan-out -----------------------------------------------------------------


def test_the_async_waits():
    app = Continuum()
    submitted: list[str] = []

    @app.step
    async def probe(n: int) -> int:
        return n + 1

    @app.task(state=Empty)
    async def waits(ctx: TaskContext[Empty]) -> dict[str, Any]:
        async def submit(callback_id: str) -> None:
            submitted.append(callback_id)

        answer = await ctx.wait_for_callback_async(submit, name="ok", timeout=3600)
        signal = await ctx.wait_for_signal_async("go", timeout=3600)
        polled = await ctx.wait_for_condition_async(
            probe, initial=0, done=lambda n: n >= 3, delay_s=60, name="poll"
        )
        return {"answer": answer, "signal": signal.payload if signal else None, "polled": polled}

    with TaskRunner(app) as runner:
        task = runner.start("waits", {})
        runner.drive(task.task_id)
        task.callback("ok").complete({"yes": True})
        task.signal("go", {"now": 1})
        task.run_until_done()
        assert task.result == {"answer": {"yes": True}, "signal": {"now": 1}, "polled": 3}
    assert len(submitted) == 1


def test_async_map_parallel_and_child_context():
    app = Continuum()
    live: list[int] = []

    @app.step
    async def square(n: int) -> int:
        live.append(n)
        await asyncio.sleep(0.01 * (5 - n))
        return n * n

    async def item(ctx: TaskContext[Empty], n: int, index: int) -> int:
        value = await square(n)
        if index == 1:
            await ctx.wait_for_signal_async("item-nap")
        return value

    async def block(ctx: TaskContext[Empty], n: int) -> int:
        return await square(n) + 1

    async def left(ctx: TaskContext[Empty]) -> str:
        return "L"

    async def right(ctx: TaskContext[Empty]) -> str:
        return "R"

    @app.task(state=Empty)
    async def fan(ctx: TaskContext[Empty]) -> dict[str, Any]:
        mapped = await ctx.map_async([1, 2, 3, 4], item, max_concurrency=2)
        sides = await ctx.parallel_async({"l": left, "r": right})
        blocked = await ctx.child_context_async(block, 5, name="block")
        return {"mapped": mapped.values(), "sides": sides.values(), "block": blocked}

    with TaskRunner(app) as runner:
        task = runner.start("fan", {})
        runner.drive(task.task_id)
        assert task.status == "waiting"
        task.signal("item-nap", None)
        task.run_until_done()
        assert task.result == {"mapped": [1, 4, 9, 16], "sides": ["L", "R"], "block": 26}
    assert sorted(live) == [1, 2, 3, 4, 5]


def test_async_invoke_a_child_task():
    app = Continuum()

    class N(BaseModel):
        n: int

    @app.task(state=N)
    async def double(ctx: TaskContext[N]) -> int:
        return ctx.state.n * 2

    @app.task(state=Empty)
    async def parent(ctx: TaskContext[Empty]) -> list[int]:
        one = await ctx.invoke_async("double", {"n": 2})
        many = await ctx.map_tasks_async("double", [{"n": 3}, {"n": 4}])
        return [one, *many.values()]

    with TaskRunner(app) as runner:
        task = runner.run("parent", {})
        assert task.result == [4, 6, 8]


@pytest.mark.parametrize("where", ["gather", "create_task"])
def test_the_task_context_used_in_an_asyncio_task_journals_there(where):
    app = Continuum()

    @app.task(state=Empty)
    async def naps(ctx: TaskContext[Empty]) -> str:
        async def nap(n: int) -> int:
            await ctx.sleep_async(0.01 * n, name="nap")
            return n

        if where == "gather":
            await asyncio.gather(nap(1), nap(2))
        else:
            first = asyncio.get_running_loop().create_task(nap(1))
            second = asyncio.get_running_loop().create_task(nap(2))
            await first
            await second
        return "rested"

    with TaskRunner(app) as runner:
        task = runner.run("naps", {})
        assert task.result == "rested"


def test_check_replay_safe_runs_an_async_task_suspended_after_each_step():
    from continuum.testing import check_replay_safe

    app = Continuum()

    @app.step
    async def fetch(name: str, delay: float) -> str:
        await asyncio.sleep(delay)  # the event loop keeps real time on the virtual clock
        return name.upper()

    @app.task(state=Empty)
    async def research(ctx: TaskContext[Empty]) -> list[str]:
        found = await asyncio.gather(fetch("a", 0.03), fetch("b", 0.02), fetch("c", 0.01))
        more = await asyncio.gather(*(fetch(x, 0.01) for x in found))
        return [*found, *more]

    report = check_replay_safe(app, "research", {})
    assert report.result == ["A", "B", "C", "A", "B", "C"]
    assert len(report.runs) == 6
    # The stand-ins end side by side as the reference's steps did: after the 5th and the 6th
    # (the second gather's last two), no step is left to start, and the task ends there.
    assert [run.suspended for run in report.runs] == [True, True, True, True, False, False]


def test_an_async_function_where_a_sync_one_runs_is_a_clear_error():
    app = Continuum()

    @app.step
    async def fetch() -> str:
        return "x"

    async def item(ctx: TaskContext[Empty], n: int, index: int) -> int:
        return n

    @app.task(state=Empty)
    async def wrong_step(ctx: TaskContext[Empty]) -> str:
        return ctx.step(fetch)

    @app.task(state=Empty)
    async def wrong_map(ctx: TaskContext[Empty]) -> list[int]:
        return ctx.map([1], item).values()

    with TaskRunner(app) as runner:
        step = runner.run("wrong_step", {})
        assert step.status == "failed"
        assert "await" in step.error.message, step.error
        mapped = runner.run("wrong_map", {})
        assert mapped.status == "failed"
        assert "map_async" in mapped.error.message, mapped.error


# -- a worker's death inside gathered steps -------------------------------------------------------


class WorkerDied(BaseException):
    """Stands in for SIGKILL in-process: nothing in the framework catches it."""


def test_a_death_in_gathered_steps_reruns_only_what_was_not_recorded(aws):
    from datetime import timedelta

    from continuum import Status
    from tests.conftest import ScriptedContext, continuation, sqs_event
    from tests.support import LocalRuntime, utcnow

    app = Continuum(max_step_crashes=3)
    runs: list[str] = []
    deaths = {"left": 1}

    @app.step(effect=True)  # saved as soon as it is done
    async def quick(n: int) -> int:
        runs.append(f"quick {n}")
        return n

    @app.step
    async def poison(n: int) -> int:
        runs.append(f"poison {n}")
        await asyncio.sleep(0.02)  # after quick's save
        if deaths["left"]:
            deaths["left"] -= 1
            raise WorkerDied
        return n * 10

    @app.task(state=Empty)
    async def job(ctx: TaskContext[Empty]) -> list[int]:
        return list(await asyncio.gather(quick(1), poison(2), quick(3)))

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="poison-async")
    body = continuation(task_id, 0)
    with pytest.raises(WorkerDied):
        app.handler(sqs_event(body, message_ids=["m"]), ScriptedContext(None, executed=lambda: 0))
    record, etag = app.records.load(task_id)
    record.lease.expires_at = utcnow() - timedelta(seconds=1)  # the dead worker's deadline passes
    app.records.swap(record, revision=etag)
    app.handler(sqs_event(body, message_ids=["m2"]), ScriptedContext(None, executed=lambda: 0))
    runtime.drive(task_id)
    done = runtime.record(task_id)
    assert done.status == Status.SUCCEEDED, done.error
    assert done.result == [1, 20, 3]
    # The quick steps were saved before the death: not run again. Only poison ran twice.
    assert sorted(runs) == ["poison 2", "poison 2", "quick 1", "quick 3"], runs
    assert done.counters.recoveries == 1


def test_when_a_turn_unwinds_its_running_step_ends_and_the_rest_stops():
    app = Continuum()
    ran: list[str] = []

    @app.step
    async def slow() -> str:
        await asyncio.sleep(0.2)
        ran.append("slow")
        return "slow"

    @app.step
    async def after() -> str:
        ran.append("after")
        return "after"

    @app.task(state=Empty)
    async def unwinds(ctx: TaskContext[Empty]) -> str:
        async def busy() -> str:
            await slow()
            return await after()  # halted: the turn is ending

        async def stuck() -> None:
            await asyncio.Event().wait()  # never set: no step to wait for

        loop = asyncio.get_running_loop()
        first, _ = loop.create_task(busy()), loop.create_task(stuck())
        await asyncio.sleep(0.05)
        await ctx.wait_for_signal_async("go")
        return await first

    with TaskRunner(app, budget_s=600, virtual_time=False) as runner:
        task = runner.start("unwinds", {})
        runner.drive(task.task_id)
        assert task.status == "waiting"  # promptly: the stuck task did not hold the turn
        assert ran == ["slow"]  # the step running when it unwound ended and was kept
        assert task.counters.steps_executed == 1


def test_a_suspension_gather_hands_back_as_a_value_still_ends_the_turn():
    app = Continuum()
    runs: list[int] = []

    @app.step
    async def fetch(n: int) -> int:
        runs.append(n)
        return n

    @app.task(state=Empty)
    async def careless(ctx: TaskContext[Empty]) -> list[Any]:
        async def branch(n: int) -> int:
            if n == 1:
                await ctx.wait_for_signal_async("go")
            return await fetch(n)

        found = await asyncio.gather(branch(0), branch(1), return_exceptions=True)
        return [x if isinstance(x, int) else "lost" for x in found]

    with TaskRunner(app) as runner:
        task = runner.start("careless", {})
        runner.drive(task.task_id)
        assert task.status == "waiting"  # not succeeded with a "lost" item
        task.signal("go", None)
        task.run_until_done()
        assert task.result == [0, 1]
    assert runs == [0, 1]


def test_an_async_step_a_sync_task_forgets_to_await_fails_it_naming_the_step():
    app = Continuum()
    ran: list[int] = []

    @app.step
    async def fetch(x: int) -> int:
        ran.append(x)
        return x

    @app.task(state=Empty)
    def hasty(ctx: TaskContext[Empty]) -> int:
        return fetch(1) + 1  # type: ignore[operator]

    @app.task(state=Empty)
    def patient(ctx: TaskContext[Empty]) -> int:
        return asyncio.run(fetch(2)) + 1  # awaited on a loop of its own: fine, and journaled

    with TaskRunner(app) as runner:
        task = runner.run("hasty", {})
        assert task.status == "failed"
        assert "fetch" in task.error.message, task.error
        assert "await" in task.error.message, task.error
        assert runner.run("patient", {}).result == 3
    assert ran == [2]


def test_a_steps_duration_is_real_time_wherever_it_is_awaited():
    app = Continuum()

    @app.step
    async def fetch(x: int) -> int:
        await asyncio.sleep(0.05)
        return x

    @app.step
    def crunch(x: int) -> int:
        return x

    @app.task(state=Empty)
    def sync_task(ctx: TaskContext[Empty]) -> int:
        return sum(asyncio.run(fetch(i)) + crunch(i) for i in range(3))

    @app.task(state=Empty)
    async def async_task(ctx: TaskContext[Empty]) -> int:
        return sum([await fetch(i) + crunch(i) for i in range(3)])

    for task_name in ("sync_task", "async_task"):
        with TaskRunner(app) as runner:  # on the virtual clock
            task = runner.run(task_name, {})
            assert task.result == 6
            stats = task.record.step_stats
            assert 0.04 < stats["fetch"].max_s < 5, (task_name, stats["fetch"])
            assert 0 <= stats["crunch"].max_s < 5, (task_name, stats["crunch"])


def test_an_async_step_an_async_task_forgets_to_await_fails_it_naming_the_step():
    app = Continuum()
    ran: list[str] = []

    @app.step
    async def fetch(x: str) -> str:
        ran.append(x)
        return x

    @app.task(state=Empty)
    async def hasty(ctx: TaskContext[Empty]) -> str:
        fetch("forgotten")  # never awaited: it would never run
        return await fetch("awaited")

    @app.task(state=Empty)
    async def in_a_task(ctx: TaskContext[Empty]) -> str:
        async def helper() -> str:
            fetch("forgotten")
            return "done"

        return await asyncio.gather(helper()) and "done"

    @app.task(state=Empty)
    async def handed_on(ctx: TaskContext[Empty]) -> str:
        later = asyncio.create_task(fetch("handed"))  # made here, awaited at the turn's end
        return "done" if later else "?"

    with TaskRunner(app) as runner:
        for name in ("hasty", "in_a_task"):
            task = runner.run(name, {})
            assert task.status == "failed", name
            assert "'fetch' was called without await" in task.error.message, task.error
            assert task.error.step == "fetch"
        assert runner.run("handed_on", {}).result == "done"
    assert sorted(ran) == ["awaited", "handed"]


def test_a_runner_driven_from_inside_an_event_loop_refuses_before_it_takes_a_message():
    app = Continuum()

    @app.task(state=Empty)
    async def quick(ctx: TaskContext[Empty]) -> str:
        return "done"

    with TaskRunner(app) as runner:
        task = runner.start("quick", {})

        async def inside() -> None:
            with pytest.raises(ContinuumError, match="inside a running event loop") as raised:
                runner.drive(task.task_id)
            assert "asyncio.to_thread" in str(raised.value)

        asyncio.run(inside())
        assert task.status == "pending"  # untouched: the message is still there
        runner.drive(task.task_id)
        assert task.result == "done"


def test_steps_gathered_inside_asyncio_run_in_a_sync_task_are_refused_naming_the_fix():
    app = Continuum()
    ran: list[str] = []

    @app.step
    async def fetch(name: str) -> str:
        ran.append(name)
        await asyncio.sleep(0.01)
        return name

    @app.step
    async def outer(names: list[str]) -> list[str]:
        # Steps awaited inside a running step are its own work, side by side or not.
        return list(await asyncio.gather(*(fetch(n) for n in names)))

    async def together() -> list[str]:
        return list(await asyncio.gather(fetch("a"), fetch("b"), fetch("c")))

    @app.task(state=Empty)
    def side_by_side(ctx: TaskContext[Empty]) -> list[str]:
        return asyncio.run(together())

    @app.task(state=Empty)
    def one_at_a_time(ctx: TaskContext[Empty]) -> list[str]:
        return [asyncio.run(fetch(n)) for n in ("d", "e")] + asyncio.run(outer(["f", "g"]))

    with TaskRunner(app) as runner:
        task = runner.run("side_by_side", {})
        assert task.status == "failed"
        assert "side by side in one journal" in task.error.message, task.error
        assert task.error.step == "fetch"
        assert runner.run("one_at_a_time", {}).result == ["d", "e", "f", "g"]


@pytest.mark.parametrize("boom_first", [True, False, None])
def test_a_step_failing_beside_a_wait_fails_the_task_with_the_steps_error(boom_first):
    """None: the two end in one pass of the loop (gather raises the error, the wait is left)."""
    delays = {True: (0.01, 0.1), False: (0.1, 0.01), None: (0.05, 0.05)}[boom_first]
    app = Continuum()

    @app.step
    async def boom() -> str:
        await asyncio.sleep(delays[0])
        raise ValueError("boom")

    @app.task(state=Empty)
    async def race(ctx: TaskContext[Empty]) -> list[str]:
        async def nap() -> str:
            await asyncio.sleep(delays[1])
            await ctx.sleep_async(3600)
            return "rested"

        return list(await asyncio.gather(boom(), nap()))

    with TaskRunner(app) as runner:
        task = runner.run("race", {})
        task.run_until_done()
        assert task.status == "failed"
        assert task.error.type != "ControlFlowSwallowed", task.error
        assert "boom" in task.error.message, task.error
