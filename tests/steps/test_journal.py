"""The journal: keys, replay of recorded results, and the non-determinism error.

The tests of whole turns run in both flavours (``tests/flavours.py``): an async task's
awaited steps take the same keys, by call order, as the sync task's calls, and steps it
gathers are keyed by the order of the gather's arguments, whatever order they finish in.
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from continuum import Continuum, NonDeterminismError, Settings, StepError, TaskContext
from tests.flavours import FLAVOURS
from tests.support import Budget, Failed, Journal, JournalEntry, Returned, TaskRecord, TurnLoop


def entry(key: str, name: str, result: object) -> JournalEntry:
    return JournalEntry(key=key, name=name, result=result)


def test_keys_are_name_and_ordinal_unless_given():
    journal = Journal([], task_id="t", turn=0)
    assert journal.key_for("search", None) == "search#0"
    journal.append(entry("search#0", "search", 1))
    assert journal.key_for("fetch", None) == "fetch#1"
    assert journal.key_for("fetch", "page-7") == "page-7"


def test_replay_returns_recorded_entries_in_order_then_runs_live():
    journal = Journal([entry("a#0", "a", 1), entry("b#1", "b", 2)], task_id="t", turn=3)
    assert journal.replay("a", "a#0").result == 1
    assert journal.replay("b", "b#1").result == 2
    assert journal.replay("c", "c#2") is None
    journal.check_complete()


def test_a_different_step_on_replay_fails_loudly():
    journal = Journal([entry("search#0", "search", "x")], task_id="task-9", turn=4)
    with pytest.raises(NonDeterminismError) as info:
        journal.replay("fetch", "fetch#0")
    err = info.value
    assert err.task_id == "task-9"
    assert err.step == "fetch#0"
    assert "turn 4" in str(err)
    assert "'search#0'" in str(err)
    assert "deterministic" in str(err)


def test_a_turn_that_stops_calling_recorded_steps_fails_loudly():
    journal = Journal([entry("a#0", "a", 1), entry("b#1", "b", 2)], task_id="t", turn=0)
    journal.replay("a", "a#0")
    with pytest.raises(NonDeterminismError, match="'b#1' was not called again"):
        journal.check_complete()


class Flip(BaseModel):
    flipped: bool = False


class Page(BaseModel):
    url: str
    size: int


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_replayed_steps_return_recorded_results_without_running(flavour):
    app = Continuum(bucket="unused", queue_url="unused")
    runs: list[str] = []

    def page(url: str) -> Page:
        runs.append(url)
        return Page(url=url, size=len(url))

    if flavour == "sync":

        @app.step
        def fetch(url: str) -> Page:
            return page(url)

        @app.task(state=Flip)
        def crawl(ctx: TaskContext[Flip]) -> int:
            a = fetch("a")
            b = fetch("bb")
            assert isinstance(a, Page)  # replayed results come back as the annotated type
            return a.size + b.size

    else:

        @app.step
        async def fetch(url: str) -> Page:
            return page(url)

        @app.task(state=Flip)
        async def crawl(ctx: TaskContext[Flip]) -> int:
            a = await fetch("a")
            b = await fetch("bb")
            assert isinstance(a, Page)  # replayed results come back as the annotated type
            return a.size + b.size

    record = TaskRecord(task_id="t", task_name="crawl", state={})
    record.journal = [
        entry("fetch#0", "fetch", {"url": "a", "size": 100}),  # recorded by a past worker
    ]
    loop = TurnLoop(
        app.tasks["crawl"],
        record,
        Budget(remaining=lambda: 60),
        lambda: None,
        Settings(persist_every_s=60),
    )
    assert isinstance(loop.run(), Returned)
    assert record.result == 102
    assert runs == ["bb"]
    assert record.counters.steps_replayed == 1


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_non_determinism_fails_the_task_with_a_clear_error(flavour):
    app = Continuum(bucket="unused", queue_url="unused")

    if flavour == "sync":

        @app.step
        def search(q: str) -> str:
            return q

        @app.step
        def fetch(q: str) -> str:
            return q

        @app.task(state=Flip)
        def wobbly(ctx: TaskContext[Flip]) -> str:
            return fetch("x")  # the journal says this turn began with search

    else:

        @app.step
        async def search(q: str) -> str:
            return q

        @app.step
        async def fetch(q: str) -> str:
            return q

        @app.task(state=Flip)
        async def wobbly(ctx: TaskContext[Flip]) -> str:
            return await fetch("x")  # the journal says this turn began with search

    record = TaskRecord(task_id="wobbly-1", task_name="wobbly", state={})
    record.journal = [entry("search#0", "search", "x")]
    outcome = TurnLoop(
        app.tasks["wobbly"],
        record,
        Budget(remaining=lambda: 60),
        lambda: None,
        Settings(persist_every_s=60),
    ).run()
    assert isinstance(outcome, Failed)
    assert outcome.error.type == "NonDeterminismError"
    assert outcome.error.step == "fetch#0"
    assert "journal recorded 'search#0'" in outcome.error.message


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_failed_step_is_recorded_and_raises_the_same_error_on_replay(flavour):
    app = Continuum(bucket="unused", queue_url="unused")
    runs: list[int] = []

    if flavour == "sync":

        @app.step
        def flaky() -> int:
            runs.append(1)
            raise ValueError("upstream said no")

        @app.task(state=Flip)
        def careful(ctx: TaskContext[Flip]) -> str:
            try:
                flaky()
            except StepError as exc:
                return f"handled {exc.error_type}"
            return "unreachable"

    else:

        @app.step
        async def flaky() -> int:
            runs.append(1)
            raise ValueError("upstream said no")

        @app.task(state=Flip)
        async def careful(ctx: TaskContext[Flip]) -> str:
            try:
                await flaky()
            except StepError as exc:
                return f"handled {exc.error_type}"
            return "unreachable"

    record = TaskRecord(task_id="t", task_name="careful", state={})
    loop = TurnLoop(
        app.tasks["careful"],
        record,
        Budget(remaining=lambda: 60),
        lambda: None,
        Settings(persist_every_s=60),
    )
    # Run the turn live, then replay the same journal in a fresh loop.
    assert isinstance(loop.run(), Returned)
    journal = list(record.journal)
    assert journal[0].ok is False
    assert journal[0].error.type == "ValueError"
    replay = TaskRecord(task_id="t", task_name="careful", state={}, journal=journal)
    loop = TurnLoop(
        app.tasks["careful"],
        replay,
        Budget(remaining=lambda: 60),
        lambda: None,
        Settings(persist_every_s=60),
    )
    assert isinstance(loop.run(), Returned)
    assert replay.result == record.result == "handled ValueError"
    assert runs == [1]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_step_retries_keep_one_idempotency_key(flavour):
    app = Continuum(bucket="unused", queue_url="unused")
    keys: list[str] = []
    ctx_box: list[TaskContext[Flip]] = []

    def attempt() -> str:
        keys.append(ctx_box[0].idempotency_key)
        if len(keys) < 3:
            raise ConnectionError("try again")
        return "charged"

    if flavour == "sync":

        @app.step(retries=2, backoff_s=0)
        def charge() -> str:
            return attempt()

        @app.task(state=Flip)
        def billing(ctx: TaskContext[Flip]) -> str:
            ctx_box.append(ctx)
            return charge()

    else:

        @app.step(retries=2, backoff_s=0)
        async def charge() -> str:
            return attempt()

        @app.task(state=Flip)
        async def billing(ctx: TaskContext[Flip]) -> str:
            ctx_box.append(ctx)
            return await charge()

    record = TaskRecord(task_id="bill-1", task_name="billing", state={})
    loop = TurnLoop(
        app.tasks["billing"],
        record,
        Budget(remaining=lambda: 60),
        lambda: None,
        Settings(persist_every_s=60),
    )
    assert isinstance(loop.run(), Returned)
    assert keys == ["bill-1/0/charge#0"] * 3
    assert record.result == "charged"
    assert [(e.key, e.attempts) for e in record.journal] == [("charge#0", 3)]


def test_gathered_steps_are_keyed_by_call_order_live_and_on_replay():
    """``gather(fetch(a), fetch(b), fetch(c))``, the first finishing last: each call is an
    asyncio task journaled in its own child context, in call order; a replay of that journal
    runs none of them again and gives each its own result."""
    app = Continuum(bucket="unused", queue_url="unused")
    runs: list[str] = []

    @app.step
    async def fetch(url: str, after: str | None) -> Page:
        while after is not None and after not in runs:
            await asyncio.sleep(0.001)  # ends after ``after`` has, however loaded the machine
        runs.append(url)
        return Page(url=url, size=len(url))

    @app.task(state=Flip)
    async def crawl(ctx: TaskContext[Flip]) -> list[str]:
        pages = await asyncio.gather(fetch("a", "bb"), fetch("bb", "ccc"), fetch("ccc", None))
        last = await fetch("dddd", None)
        return [f"{page.url}:{page.size}" for page in (*pages, last)]

    record = TaskRecord(task_id="t", task_name="crawl", state={})
    loop = TurnLoop(
        app.tasks["crawl"],
        record,
        Budget(remaining=lambda: 60),
        lambda: None,
        Settings(persist_every_s=60),
    )
    assert isinstance(loop.run(), Returned)
    assert runs == ["ccc", "bb", "a", "dddd"]  # finished in the reverse of call order
    keys = [(e.key, [c.key for c in e.children or []]) for e in record.journal]
    assert keys == [
        ("fetch#0", ["fetch#0"]),
        ("fetch#1", ["fetch#0"]),
        ("fetch#2", ["fetch#0"]),
        ("fetch#3", []),
    ]
    assert [e.children[0].result["url"] for e in record.journal[:3]] == ["a", "bb", "ccc"]
    replay = TaskRecord(task_id="t", task_name="crawl", state={}, journal=list(record.journal))
    loop = TurnLoop(
        app.tasks["crawl"],
        replay,
        Budget(remaining=lambda: 60),
        lambda: None,
        Settings(persist_every_s=60),
    )
    assert isinstance(loop.run(), Returned)
    assert replay.result == record.result == ["a:1", "bb:2", "ccc:3", "dddd:4"]
    assert runs == ["ccc", "bb", "a", "dddd"]  # nothing ran again
    assert replay.counters.steps_replayed == 4
