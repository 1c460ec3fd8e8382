"""Names continuum derives for waits are always valid; names a user gives are still checked.

Every test runs in both flavours (``tests/waits/flavours.py``): the task ``def`` with
``ctx.wait_for_condition``, and ``async def`` with ``await ctx.wait_for_condition_async`` (its
check a sync function, as a sync step awaited in a thread) and ``await ctx.sleep_async``.
"""

from __future__ import annotations

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from tests.waits.flavours import Flavour


class Count(BaseModel):
    limit: int = 3
    name: str | None = None
    sleep_name: str | None = None


def polling_app(flavour: Flavour) -> Continuum:
    app = Continuum()

    def _increment() -> object:
        def increment(n: int) -> int:  # nested: its qualified name holds "<locals>"
            return n + 1

        return increment

    check = _increment()

    def poll(ctx: TaskContext[Count]) -> int:
        if ctx.state.sleep_name is not None:
            ctx.sleep(2, name=ctx.state.sleep_name)
        return ctx.wait_for_condition(
            check,  # type: ignore[arg-type]
            initial=0,
            done=lambda n: n >= ctx.state.limit,
            delay_s=30,
            name=ctx.state.name,
        )

    async def poll_async(ctx: TaskContext[Count]) -> int:
        if ctx.state.sleep_name is not None:
            await ctx.sleep_async(2, name=ctx.state.sleep_name)
        return await ctx.wait_for_condition_async(
            check,  # type: ignore[arg-type]
            initial=0,
            done=lambda n: n >= ctx.state.limit,
            delay_s=30,
            name=ctx.state.name,
        )

    flavour.task(app, poll, poll_async, state=Count)
    return app


def test_wait_for_condition_with_a_nested_check_function_polls_to_its_end(make_runtime, flavour):
    app = polling_app(flavour)
    runtime = make_runtime(app)
    done = runtime.run("poll", {})
    assert done.status == "succeeded", done.error
    assert done.result == 3
    assert done.invocations > 1, "the checks did not wait between polls"


def test_a_long_condition_name_still_gives_a_valid_delay_name(make_runtime, flavour):
    app = polling_app(flavour)
    runtime = make_runtime(app)
    done = runtime.run("poll", {"limit": 2, "name": "c" * 128})
    assert done.status == "succeeded", done.error
    assert done.result == 2


def test_an_invalid_sleep_name_given_by_the_user_still_fails_naming_it(make_runtime, flavour):
    app = polling_app(flavour)
    runtime = make_runtime(app)
    done = runtime.run("poll", {"sleep_name": "not a name"})
    assert done.status == "failed"
    assert "'not a name' is not a valid name" in (done.error or "")
