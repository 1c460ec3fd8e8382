"""What a step may be, and where it may be called from.

The cases: steps called from threads (refused, never run outside the journal), generator and
async functions as tasks or steps, and ``functools.partial`` and callable objects as steps (a
name with a memory address, a side effect before a serialisation error).
"""

from __future__ import annotations

import contextvars
import functools
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import ConfigurationError, Continuum, Status, TaskContext
from tests.conftest import ScriptedContext, drain, raw_record
from tests.support import LocalRuntime


class Empty(BaseModel):
    n: int = 0


def run(
    backend: str,
    app: Continuum,
    task: str,
    live: list,
    plan: list[int],
    task_id: str = "callables-1",
):
    """Start ``task`` on ``backend``; invocation i may run plan[i] live step calls (then any).

    Returns the public status and the raw record.json of each suspension."""
    runtime = LocalRuntime(app, budget_s=900, backend=backend)
    app.client().start(task, {}, task_id=task_id)
    suspended: list[dict] = []

    def context(i: int) -> ScriptedContext:
        if app.client().status(task_id).status == Status.SUSPENDED:
            suspended.append(raw_record(runtime, task_id))
        return ScriptedContext(plan[i] if i < len(plan) else None, executed=lambda: len(live))

    drain(runtime, task_id, context)
    return app.client().status(task_id), suspended


def journal_keys(raw: Any) -> list[str]:
    """The key and name of every journal entry (a dict with ``key`` and ``name``)."""
    found: list[str] = []
    if isinstance(raw, dict):
        if isinstance(raw.get("key"), str) and "name" in raw:
            found += [raw["key"], str(raw["name"])]
        for value in raw.values():
            found += journal_keys(value)
    elif isinstance(raw, list):
        for value in raw:
            found += journal_keys(value)
    return found


THREAD = re.compile(r"(?i)thread")


# -- case 7: steps called from threads -------------------------------------------------------


def test_an_effect_step_called_from_a_thread_pool_fails_the_task_at_the_call(aws):
    app = Continuum()
    charged: list[int] = []

    @app.step(effect=True)
    def charge(cents: int) -> str:
        charged.append(cents)
        return f"charged {cents}"

    @app.task(state=Empty)
    def pool(ctx: TaskContext[Empty]) -> list[str]:
        with ThreadPoolExecutor(max_workers=2) as executor:
            return list(executor.map(charge, [100, 250]))

    status, _ = run(aws, app, "pool", charged, [])

    assert charged == [], "the effect ran outside the journal"
    assert status.status == Status.FAILED, f"{status.status}: {status.result}"
    assert THREAD.search(status.error.message), status.error.message
    assert "charge" in f"{status.error.step} {status.error.message}"


def test_overlapping_step_calls_from_threads_with_a_copied_context_fail_the_task(aws):
    app = Continuum()
    fetched: list[int] = []
    inside, release = threading.Event(), threading.Event()

    @app.step
    def fetch(i: int) -> int:
        fetched.append(i)
        if i == 1:
            inside.set()
            release.wait(timeout=5)  # still running when the second call starts
        return i

    @app.task(state=Empty)
    def overlap(ctx: TaskContext[Empty]) -> list[int]:
        results: dict[int, int] = {}
        errors: list[Exception] = []

        def call(i: int) -> None:
            try:
                results[i] = fetch(i)
            except Exception as exc:
                errors.append(exc)
            finally:
                inside.set()

        first = threading.Thread(target=contextvars.copy_context().run, args=(call, 1))
        first.start()
        inside.wait(timeout=5)
        second = threading.Thread(target=contextvars.copy_context().run, args=(call, 2))
        second.start()
        second.join(timeout=5)
        release.set()
        first.join(timeout=5)
        if errors:
            raise errors[0]
        return [results[1], results[2]]

    status, _ = run(aws, app, "overlap", fetched, [])

    assert 2 not in fetched, "the overlapping call ran as a nested step, outside the journal"
    assert status.status == Status.FAILED, f"{status.status}: {status.result}"
    assert THREAD.search(status.error.message), status.error.message
    assert "fetch" in f"{status.error.step} {status.error.message}"


# -- case 8: generator functions (sync or async) are refused at registration; async ones are not


def generator_fn(ctx: Any) -> Any:
    yield 1


async def async_fn(ctx: Any) -> Any:
    return 1


async def async_generator_fn(ctx: Any) -> Any:
    yield 1


KINDS = pytest.mark.parametrize(
    ("fn", "words"),
    [
        (generator_fn, "generator"),
        (async_generator_fn, "async generator"),
    ],
    ids=["generator", "async-generator"],
)


def test_an_async_task_and_step_are_accepted():
    from continuum._define.steps import AsyncStep

    app = Continuum()
    app.task(state=Empty)(async_fn)
    assert app.tasks["async_fn"].is_async
    assert isinstance(app.step(async_fn), AsyncStep)


@KINDS
def test_a_generator_or_async_task_is_refused_at_registration(fn, words):
    app = Continuum()
    with pytest.raises(ConfigurationError, match=f"(?i){words}"):
        app.task(state=Empty)(fn)
    assert app.tasks == {}


@KINDS
def test_a_generator_or_async_step_is_refused_at_registration(fn, words):
    app = Continuum()
    with pytest.raises(ConfigurationError, match=f"(?i){words}"):
        app.step(fn)
    with pytest.raises(ConfigurationError, match=f"(?i){words}"):
        app.step(name="with_options", effect=True)(fn)


# -- case 9: functools.partial and callable objects as steps ---------------------------------


class Pricer:
    """A callable object with an annotated ``__call__``."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def __call__(self, sku: str) -> dict[str, int]:
        self.calls.append(sku)
        return {"price": 10 * len(sku)}


def make_charge(calls: list[str]):
    def charge(order: int, cents: int) -> dict[str, int]:
        calls.append(f"order {order}")
        return {"order": order, "cents": cents}

    return charge


@pytest.mark.parametrize("kind", ["partial", "callable-object"])
def test_a_partial_or_callable_object_step_has_a_stable_name_and_runs_once(aws, kind):
    app = Continuum()
    effects: list[str] = []
    marks: list[str] = []  # one per step call, live or replayed: places the suspension

    @app.step
    def after() -> int:
        return 1

    @app.task(state=Empty)
    def shop(ctx: TaskContext[Empty]) -> Any:
        if kind == "partial":
            value = ctx.step(functools.partial(make_charge(effects), 7), 250)
        else:
            value = ctx.step(Pricer(effects), "sku-1")
        marks.append("step")
        after()
        marks.append("after")
        return value

    status, suspended = run(aws, app, "shop", marks, [1])  # suspended right after the step

    assert status.status == Status.SUCCEEDED, status.error
    expected = {"order": 7, "cents": 250} if kind == "partial" else {"price": 50}
    assert status.result == expected
    assert len(effects) == 1, effects
    assert suspended, "the task should have suspended right after the step"
    keys = journal_keys(suspended[0])
    assert keys
    assert not [k for k in keys if "0x" in k], keys
