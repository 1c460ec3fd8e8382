"""Control flow around steps: retries, suspension signals, explicit keys and nested steps.

The cases: retry attempts that must not restart after a suspension, a bare ``except`` that
swallows the suspension (the task fails saying so), two calls with one explicit key, and a
step inside a step that keeps its own retries.

Every test runs in both flavours (``tests/flavours.py``): the async twins await ``async def``
steps (``ctx.step_async`` with an explicit key), and catch around an awaited step. Async
only: a suspension caught inside an asyncio task still ends the turn.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.conftest import ScriptedContext, drain
from tests.flavours import FLAVOURS
from tests.support import LocalRuntime


class Empty(BaseModel):
    n: int = 0


def run(
    backend: str, app: Continuum, task: str, live: list, plan: list[int], task_id: str = "flow-1"
):
    """Start ``task`` on ``backend``; invocation i may run plan[i] live step calls (then any);
    the status."""
    runtime = LocalRuntime(app, budget_s=900, backend=backend)
    app.client().start(task, {}, task_id=task_id)

    def context(i: int) -> ScriptedContext:
        return ScriptedContext(plan[i] if i < len(plan) else None, executed=lambda: len(live))

    drain(runtime, task_id, context)
    return app.client().status(task_id)


# -- case 13: retries count across invocations -----------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_step_with_one_retry_runs_twice_in_all_when_a_suspension_falls_between_attempts(
    aws, flavour
):
    app = Continuum()
    live: list[str] = []

    def attempt() -> str:
        live.append("upload")
        raise ConnectionError("the upload always breaks")

    if flavour == "sync":

        @app.step
        def prepare() -> int:
            live.append("prepare")
            return 1

        @app.step(retries=1, backoff_s=0)
        def flaky_upload() -> str:
            return attempt()

        @app.task(state=Empty)
        def upload(ctx: TaskContext[Empty]) -> str:
            prepare()
            return flaky_upload()

    else:

        @app.step
        async def prepare() -> int:
            live.append("prepare")
            return 1

        @app.step(retries=1, backoff_s=0)
        async def flaky_upload() -> str:
            return attempt()

        @app.task(state=Empty)
        async def upload(ctx: TaskContext[Empty]) -> str:
            await prepare()
            return await flaky_upload()

    # The first invocation has time for prepare and the first attempt only: the budget check
    # before the retry suspends the task.
    status = run(aws, app, "upload", live, [2])

    assert live.count("upload") == 2, f"{live.count('upload')} attempts for retries=1"
    assert status.status == Status.FAILED
    assert "flaky_upload" in f"{status.error.step} {status.error.message}"
    assert "the upload always breaks" in status.error.message


# -- surprise a: a bare except must not swallow the suspension --------------------------------


def careless_app(catch_all: str, flavour: str = "sync") -> tuple[Continuum, list[str]]:
    app = Continuum()
    live: list[str] = []

    def ran(name: str) -> str:
        live.append(name)
        return name

    if flavour == "async":

        @app.step
        async def first_async() -> str:
            return ran("first")

        @app.step
        async def second_async() -> str:
            return ran("second")

        if catch_all == "bare":

            @app.task(state=Empty, name="careless")
            async def careless_bare(ctx: TaskContext[Empty]) -> str:
                await first_async()
                try:
                    value = await second_async()
                except:  # noqa: E722 - the point of the test
                    value = "fallback"
                return value

        else:

            @app.task(state=Empty, name="careless")
            async def careless_base(ctx: TaskContext[Empty]) -> str:
                await first_async()
                try:
                    value = await second_async()
                except BaseException:
                    value = "fallback"
                return value

        return app, live

    @app.step
    def first() -> str:
        return ran("first")

    @app.step
    def second() -> str:
        return ran("second")

    if catch_all == "bare":

        @app.task(state=Empty)
        def careless(ctx: TaskContext[Empty]) -> str:
            first()
            try:
                value = second()
            except:  # noqa: E722 - the point of the test
                value = "fallback"
            return value

    else:

        @app.task(state=Empty)
        def careless(ctx: TaskContext[Empty]) -> str:
            first()
            try:
                value = second()
            except BaseException:
                value = "fallback"
            return value

    return app, live


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("catch_all", ["bare", "BaseException"])
def test_a_task_that_swallows_the_suspension_fails_saying_so(aws, catch_all, flavour):
    app, live = careless_app(catch_all, flavour)

    status = run(aws, app, "careless", live, [1])  # suspends before `second`, inside the try

    assert status.result != "fallback", "the suspension was swallowed and the fallback saved"
    assert status.status == Status.FAILED
    message = status.error.message
    assert re.search(r"(?i)suspen", message), message
    assert re.search(r"(?i)caught|swallow", message), message


def test_a_suspension_caught_inside_an_asyncio_task_still_ends_the_turn(aws):
    """Async only: code in an asyncio task may keep what it caught to raise in another task (a
    library's task wrapper does), so a suspension caught there ends the turn as it would have,
    and the step runs in the next invocation."""
    app = Continuum()
    live: list[str] = []
    caught: list[BaseException] = []

    @app.step
    async def first() -> str:
        live.append("first")
        return "first"

    @app.step
    async def second() -> str:
        live.append("second")
        return "second"

    @app.task(state=Empty)
    async def keeper(ctx: TaskContext[Empty]) -> str:
        async def kept() -> str:
            try:
                return await second()
            except BaseException as exc:  # kept, as a task wrapper keeps it
                caught.append(exc)
                return "fallback"

        await first()
        [value] = await asyncio.gather(kept())
        return value

    status = run(aws, app, "keeper", live, [1])  # suspends before `second`, inside the try

    assert status.status == Status.SUCCEEDED, status.error
    assert status.result == "second"
    assert live == ["first", "second"]
    assert len(caught) == 1
    assert status.counters.continuations == 1


# -- surprise b: one explicit key, two calls --------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_two_step_calls_with_the_same_explicit_key_fail_the_task_naming_the_key(aws, flavour):
    app = Continuum()
    charged: list[int] = []

    if flavour == "sync":

        @app.step(effect=True)
        def charge(cents: int) -> int:
            charged.append(cents)
            return cents

        @app.task(state=Empty)
        def checkout(ctx: TaskContext[Empty]) -> int:
            a = ctx.step(charge, 100, key="order-7")
            b = ctx.step(charge, 250, key="order-7")
            return a + b

    else:

        @app.step(effect=True)
        async def charge(cents: int) -> int:
            charged.append(cents)
            return cents

        @app.task(state=Empty)
        async def checkout(ctx: TaskContext[Empty]) -> int:
            a = await ctx.step_async(charge, 100, key="order-7")
            b = await ctx.step_async(charge, 250, key="order-7")
            return a + b

    status = run(aws, app, "checkout", charged, [])

    assert status.status == Status.FAILED, f"{status.status} with result {status.result}"
    assert "order-7" in f"{status.error.step} {status.error.message}"
    assert charged == [100]  # the second call never ran


# -- surprise c: a step inside a step keeps its own retries -----------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_step_called_inside_a_step_applies_its_own_retries(aws, flavour):
    app = Continuum()
    attempts: list[int] = []

    def attempt() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("reset by peer")
        return "inner ok"

    if flavour == "sync":

        @app.step(retries=2, backoff_s=0, retry_on=(ConnectionError,))
        def inner() -> str:
            return attempt()

        @app.step
        def outer() -> str:
            return "outer: " + inner()

        @app.task(state=Empty)
        def nested(ctx: TaskContext[Empty]) -> str:
            return outer()

    else:

        @app.step(retries=2, backoff_s=0, retry_on=(ConnectionError,))
        async def inner() -> str:
            return attempt()

        @app.step
        async def outer() -> str:
            return "outer: " + await inner()

        @app.task(state=Empty)
        async def nested(ctx: TaskContext[Empty]) -> str:
            return await outer()

    status = run(aws, app, "nested", attempts, [])

    assert status.status == Status.SUCCEEDED, status.error
    assert status.result == "outer: inner ok"
    assert len(attempts) == 3
