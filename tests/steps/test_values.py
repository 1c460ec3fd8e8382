"""Values through the journal and the snapshot: what a replayed turn sees is what the live turn
saw (a guarantee), and values JSON cannot hold fail once, clearly.

The cases: a snapshot that must not share objects with the live state, NaN and infinity, live
and replayed results that must not differ in type, and Annotated serializers.

Every test runs in both flavours (``tests/flavours.py``): the async twins await ``async def``
steps (``ctx.step_async`` for a library function), and gather a turn's last two steps where
the sync task calls them one after the other.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, BeforeValidator, Field, PlainSerializer

from continuum import Continuum, Status, StepError, TaskContext
from tests.conftest import (
    ScriptedContext,
    drain,
    on_backend,
    raw_record,
    record_key,
    set_visibility_timeout,
)
from tests.flavours import FLAVOURS
from tests.support import LocalRuntime

# -- helpers -------------------------------------------------------------------------------


class Empty(BaseModel):
    n: int = 0


def run_plan(
    backend: str, app: Continuum, live: list, task: str, plan: list[int], state: Any = None
):
    """Run ``task`` on a fresh bucket of ``backend``; invocation i may run plan[i] live steps,
    then any.

    Returns the public status of the finished task and the raw record.json of every
    suspension (as parsed JSON), in order.
    """
    suspended: list[dict] = []
    with on_backend(backend):
        runtime = LocalRuntime(app, budget_s=900, backend=backend)
        task_id = app.client().start(task, state or {}, task_id="values-1")

        def context(i: int) -> ScriptedContext:
            if app.client().status(task_id).status == Status.SUSPENDED:
                suspended.append(raw_record(runtime, task_id))
            allowed = plan[i] if i < len(plan) else None
            return ScriptedContext(allowed, executed=lambda: len(live))

        drain(runtime, task_id, context)
        status = app.client().status(task_id)
    return status, suspended


def journal_entries(raw: Any) -> list[dict]:
    """Every journal entry (a dict with a ``key`` and a ``name``) anywhere in a raw record."""
    found: list[dict] = []
    if isinstance(raw, dict):
        if isinstance(raw.get("key"), str) and "name" in raw:
            found.append(raw)
        for value in raw.values():
            found.extend(journal_entries(value))
    elif isinstance(raw, list):
        for value in raw:
            found.extend(journal_entries(value))
    return found


# -- case 2: the snapshot must not share objects with the live state -------------------------

TURNS = 3
STEPS_PER_TURN = 3


def _first_message() -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


class Chat(BaseModel):
    messages: list[dict[str, Any]] = Field(default_factory=_first_message)
    notes: list[dict] = []
    meta: dict[str, Any] = Field(default_factory=lambda: {"tags": []})
    turns: int = 0


def chat_app(flavour: str = "sync") -> tuple[Continuum, list[str]]:
    """An agent-like task that edits nested message content in place, and edits the dicts
    its steps return in place too."""
    app = Continuum()
    live: list[str] = []

    def answer(turn: int) -> dict[str, Any]:
        live.append(f"think {turn}")
        return {
            "role": "assistant",
            "content": [{"type": "text", "text": f"answer {turn}"}],
            "usage": {"tokens": [turn]},
        }

    def use(turn: int, which: str) -> str:
        live.append(f"tool {which} {turn}")
        return f"{which}@{turn}"

    def begin(s: Chat) -> None:
        s.messages[0]["content"].append({"type": "text", "text": f"turn {s.turns} begins"})
        s.meta["tags"].append(s.turns)

    def replied(s: Chat, reply: dict[str, Any]) -> None:
        reply["content"].append({"type": "note", "text": "seen"})  # the step's dict, in place
        reply["usage"]["tokens"].append(-1)
        s.messages.append(reply)

    def used(s: Chat, a: str) -> None:
        s.messages[-1]["content"].append({"type": "tool", "text": a})
        s.notes.append({"turn": s.turns, "log": [a]})

    def end(s: Chat, b: str) -> dict[str, Any] | None:
        s.notes[-1]["log"].append(b)
        s.turns += 1
        return s.model_dump(mode="json") if s.turns >= TURNS else None

    if flavour == "sync":

        @app.step
        def think(turn: int) -> dict[str, Any]:
            return answer(turn)

        @app.step
        def tool(turn: int, which: str) -> str:
            return use(turn, which)

        @app.task(state=Chat)
        def chat(ctx: TaskContext[Chat]) -> dict[str, Any] | None:
            s = ctx.state
            begin(s)
            replied(s, think(s.turns))
            used(s, tool(s.turns, "a"))
            return end(s, tool(s.turns, "b"))

    else:

        @app.step
        async def think(turn: int) -> dict[str, Any]:
            return answer(turn)

        @app.step
        async def tool(turn: int, which: str) -> str:
            return use(turn, which)

        @app.task(state=Chat)
        async def chat(ctx: TaskContext[Chat]) -> dict[str, Any] | None:
            s = ctx.state
            begin(s)
            replied(s, await think(s.turns))
            a, b = await asyncio.gather(tool(s.turns, "a"), tool(s.turns, "b"))
            used(s, a)
            return end(s, b)

    return app, live


class Sizes(BaseModel):
    sizes: list[int] = []


def step_result_app(flavour: str = "sync") -> tuple[Continuum, list[str]]:
    """A task that mutates the dict a step returned; only a number derived from it is kept."""
    app = Continuum()
    live: list[str] = []

    def page_of(turn: int) -> dict[str, Any]:
        live.append(f"fetch {turn}")
        return {"items": [1, 2], "page": {"seen": []}}

    def item(turn: int, i: int) -> int:
        live.append(f"work {turn} {i}")
        return i

    def edit(ctx: TaskContext[Sizes], page: dict[str, Any]) -> None:
        page["items"].append(99)
        page["page"]["seen"].append(len(ctx.state.sizes))

    def keep(ctx: TaskContext[Sizes], page: dict[str, Any]) -> list[int] | None:
        ctx.state.sizes.append(len(page["items"]) * 10 + len(page["page"]["seen"]))
        return ctx.state.sizes if len(ctx.state.sizes) >= TURNS else None

    if flavour == "sync":

        @app.step
        def fetch(turn: int) -> dict[str, Any]:
            return page_of(turn)

        @app.step
        def work(turn: int, i: int) -> int:
            return item(turn, i)

        @app.task(state=Sizes)
        def sizes(ctx: TaskContext[Sizes]) -> list[int] | None:
            page = fetch(len(ctx.state.sizes))
            edit(ctx, page)
            work(len(ctx.state.sizes), 0)
            work(len(ctx.state.sizes), 1)
            return keep(ctx, page)

    else:

        @app.step
        async def fetch(turn: int) -> dict[str, Any]:
            return page_of(turn)

        @app.step
        async def work(turn: int, i: int) -> int:
            return item(turn, i)

        @app.task(state=Sizes)
        async def sizes(ctx: TaskContext[Sizes]) -> list[int] | None:
            page = await fetch(len(ctx.state.sizes))
            edit(ctx, page)
            n = len(ctx.state.sizes)
            await asyncio.gather(work(n, 0), work(n, 1))
            return keep(ctx, page)

    return app, live


PLANS = [[k] for k in range(TURNS * STEPS_PER_TURN + 1)] + [[1] * 12, [2] * 8]
PLAN_IDS = [f"suspend-after-{p[0]}" for p in PLANS[:-2]] + ["after-every-step", "every-2"]


@pytest.fixture(scope="module")
def chat_uninterrupted():
    """The result of a run that never stopped (on the fakes: it is the same on moto); the
    same for both flavours."""
    results = []
    for flavour in FLAVOURS:
        status, _ = run_plan("memory", *chat_app(flavour), "chat", [])
        assert status.status == Status.SUCCEEDED
        results.append(status.result)
    assert results[0] == results[1]
    return results[0]


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("plan", PLANS, ids=PLAN_IDS)
def test_in_place_edits_of_nested_state_give_the_uninterrupted_result(
    backend, chat_uninterrupted, plan, flavour
):
    app, live = chat_app(flavour)
    status, _ = run_plan(backend, app, live, "chat", plan)

    assert status.status == Status.SUCCEEDED, status.error
    assert status.result == chat_uninterrupted
    assert len(live) == len(set(live)) == TURNS * STEPS_PER_TURN  # nothing recorded ran again


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("plan", PLANS, ids=PLAN_IDS)
def test_in_place_edits_of_a_step_result_give_the_uninterrupted_result(backend, plan, flavour):
    app, live = step_result_app(flavour)
    status, _ = run_plan(backend, app, live, "sizes", plan)

    assert status.status == Status.SUCCEEDED, status.error
    # Each turn: [1, 2] plus 99 is 3 items; one "seen" mark. Never 4 items, never 2 marks.
    assert status.result == [31] * TURNS
    assert len(live) == len(set(live)) == TURNS * STEPS_PER_TURN


# -- case 4: NaN and infinity ----------------------------------------------------------------


def pass_the_deadline(runtime: LocalRuntime, task_id: str) -> None:
    """A worker that gave its message back without finishing died by its deadline: what the
    passing of that deadline does to the record's lease."""
    store, key = runtime.observer_store, record_key(task_id)
    stored = store.get(key)
    raw = json.loads(stored.body)
    if raw.get("status") == "running" and raw.get("lease"):
        raw["lease"]["expires_at"] = "2000-01-01T00:00:00Z"
        store.put(key, json.dumps(raw, indent=1).encode(), if_match=stored.etag)


def deliver_until_finished(backend: str, app: Continuum, task_id: str, most: int = 12) -> int:
    """Redeliver the task's message the way SQS would (a visibility timeout of 0: a message
    the handler did not acknowledge comes straight back, after its worker's deadline);
    return the number of handler invocations."""
    runtime = LocalRuntime(app, budget_s=900, backend=backend)
    set_visibility_timeout(runtime, 0)
    app.client().start("measured", {}, task_id=task_id)
    for invocation in range(most):
        if app.client().status(task_id).status.finished:
            return invocation
        if runtime.invoke_once(ScriptedContext(None, executed=lambda: 0)) is None:
            return invocation
        pass_the_deadline(runtime, task_id)
    return most


NOT_JSON = re.compile(r"(?i)\bnan\b|infinit|\binf\b|not (valid )?json")


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("effect", [False, True], ids=["plain", "effect"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_nan_or_infinite_step_result_fails_the_task_once_naming_the_step(
    aws, effect, value, flavour
):
    app = Continuum(visibility_margin_s=None)
    runs: list[int] = []

    if flavour == "sync":

        @app.step(effect=effect)
        def measure() -> float:
            runs.append(1)
            return value

        @app.task(state=Empty)
        def measured(ctx: TaskContext[Empty]) -> str:
            measure()
            return "done"

    else:

        @app.step(effect=effect)
        async def measure() -> float:
            runs.append(1)
            return value

        @app.task(state=Empty)
        async def measured(ctx: TaskContext[Empty]) -> str:
            await measure()
            return "done"

    invocations = deliver_until_finished(aws, app, "nan-step")

    status = app.client().status("nan-step")
    seen = f"{status.status} after {invocations} invocations, step ran {len(runs)}x: {status.error}"
    assert status.status == Status.FAILED, seen
    assert NOT_JSON.search(status.error.message), seen
    assert "measure" in f"{status.error.step} {status.error.message}"
    assert len(runs) == 1  # no retry storm of the step
    assert invocations <= 2
    assert status.error.type != "StepCrashedWorker"  # no worker died


class Scored(BaseModel):
    score: float = 0.0
    rounds: int = 0


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_nan_in_the_state_fails_the_task_once_naming_the_field(aws, value, flavour):
    app = Continuum(visibility_margin_s=None)

    def measure(ctx: TaskContext[Scored]) -> str | None:
        if ctx.state.rounds == 1:
            return "done"
        ctx.state.score = value  # the end of this turn saves it in the snapshot
        ctx.state.rounds += 1
        return None

    if flavour == "sync":

        @app.task(state=Scored)
        def measured(ctx: TaskContext[Scored]) -> str | None:
            return measure(ctx)

    else:

        @app.task(state=Scored)
        async def measured(ctx: TaskContext[Scored]) -> str | None:
            return measure(ctx)

    invocations = deliver_until_finished(aws, app, "nan-state")

    status = app.client().status("nan-state")
    assert status.status == Status.FAILED, f"{status.status} after {invocations} invocations"
    assert NOT_JSON.search(status.error.message), status.error.message
    assert "score" in status.error.message
    assert invocations <= 2


# -- case 5: live and replayed results have the same type ------------------------------------


def unannotated_app(fn: Any, flavour: str = "sync") -> tuple[Continuum, list[str]]:
    """A task that calls ``ctx.step(fn)`` (a library function with no return annotation),
    then one more step, and returns the type name of what ``fn`` gave it."""
    app = Continuum()
    marks: list[str] = []  # one per step call, live or replayed: places the suspension

    if flavour == "sync":

        @app.step
        def after() -> int:
            return 1

        @app.task(state=Empty)
        def typed(ctx: TaskContext[Empty]) -> str:
            value = ctx.step(fn)
            marks.append("fn")
            after()
            marks.append("after")
            return type(value).__name__

    else:

        @app.step
        async def after() -> int:
            return 1

        @app.task(state=Empty)
        async def typed(ctx: TaskContext[Empty]) -> str:
            value = await ctx.step_async(fn)
            marks.append("fn")
            await after()
            marks.append("after")
            return type(value).__name__

    return app, marks


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("fn", [datetime.now, uuid.uuid4], ids=["datetime.now", "uuid.uuid4"])
def test_an_unannotated_step_gives_one_type_wherever_the_task_suspends(backend, fn, flavour):
    outcomes = []
    for plan in ([], [1]):  # never suspended; suspended right after the step
        app, marks = unannotated_app(fn, flavour)
        status, _ = run_plan(backend, app, marks, "typed", plan)
        outcomes.append(status)

    if all(o.status == Status.FAILED for o in outcomes):
        # A clear error at the first call, whatever the plan: no return type to replay with.
        for o in outcomes:
            assert re.search(r"(?i)return (type|annotation)|annotat|unknown type", o.error.message)
            assert fn.__name__ in f"{o.error.step} {o.error.message}"
    else:
        assert [o.status for o in outcomes] == [Status.SUCCEEDED] * 2, [o.error for o in outcomes]
        assert outcomes[0].result == outcomes[1].result, "live and replayed types differ"


FIXED = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_annotated_datetime_step_gives_a_datetime_live_and_replayed(backend, flavour):
    results = []
    for plan in ([], [1]):
        app = Continuum()
        marks: list[str] = []

        def seen(value: datetime) -> str:
            return f"{type(value).__name__} {value == FIXED}"

        if flavour == "sync":

            @app.step
            def now() -> datetime:
                return FIXED

            @app.step
            def after() -> int:
                return 1

            @app.task(state=Empty)
            def typed(ctx: TaskContext[Empty]) -> str:
                value = now()
                marks.append("now")
                after()
                marks.append("after")
                return seen(value)

        else:

            @app.step
            async def now() -> datetime:
                return FIXED

            @app.step
            async def after() -> int:
                return 1

            @app.task(state=Empty)
            async def typed(ctx: TaskContext[Empty]) -> str:
                value = await now()
                marks.append("now")
                await after()
                marks.append("after")
                return seen(value)

        status, _ = run_plan(backend, app, marks, "typed", plan)
        assert status.status == Status.SUCCEEDED, status.error
        results.append(status.result)
    assert results == ["datetime True", "datetime True"]


Short = Annotated[str, Field(max_length=3)]


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (int, 7, "int 7"),
        (int | None, None, "NoneType None"),
        (int, True, "int 1"),  # pydantic takes a bool for an int, as a replay would
        (float, 2, "float 2.0"),
        (Short, "abcdef", "failed"),  # refused live, as a replay would refuse it
    ],
    ids=["int", "optional-none", "bool-as-int", "int-as-float", "too-long"],
)
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_scalar_result_is_what_its_annotation_makes_of_it_live_and_replayed(
    backend, annotation, value, expected, flavour
):
    """A scalar the annotation takes as it is skips the JSON round trip (the fast path);
    anything the annotation coerces or constrains still gets it, live as on replay."""
    results = []
    for plan in ([], [1]):  # never suspended; suspended right after the step
        app = Continuum()
        marks: list[str] = []

        def shown(got: Any) -> str:
            if got is None and value is not None:
                return "failed"
            return f"{type(got).__name__} {got!r}"

        if flavour == "sync":

            def produce():
                marks.append("produce")
                return value

            produce.__annotations__["return"] = annotation
            step = app.step(produce)

            @app.step
            def after() -> int:
                return 1

            @app.task(state=Empty)
            def scalar(ctx: TaskContext[Empty]) -> str:
                try:
                    got: Any = step()
                except Exception:
                    got = None
                after()  # a suspension here replays the step's recorded result, or its refusal
                return shown(got)

        else:

            async def produce():
                marks.append("produce")
                return value

            produce.__annotations__["return"] = annotation
            step = app.step(produce)

            @app.step
            async def after() -> int:
                return 1

            @app.task(state=Empty)
            async def scalar(ctx: TaskContext[Empty]) -> str:
                try:
                    got: Any = await step()
                except Exception:
                    got = None
                await after()  # replays the step's recorded result, or its refusal
                return shown(got)

        status, _ = run_plan(backend, app, marks, "scalar", plan)
        assert status.status == Status.SUCCEEDED, status.error
        assert marks.count("produce") == 1, "the step ran again"
        results.append(status.result)
    assert results == [expected, expected]


# -- case 14: Annotated return types keep their serializers ----------------------------------


def _parse_ticket(value: Any) -> Any:
    return int(value.removeprefix("#")) if isinstance(value, str) else value


Ticket = Annotated[
    int,
    PlainSerializer(lambda v: f"#{v}", return_type=str),
    BeforeValidator(_parse_ticket),
]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_annotated_serializer_writes_the_journal_and_replay_round_trips(backend, flavour):
    app = Continuum()
    marks: list[str] = []

    if flavour == "sync":

        @app.step
        def open_ticket() -> Ticket:
            return 42

        @app.step
        def after() -> int:
            return 1

        @app.task(state=Empty)
        def ticketing(ctx: TaskContext[Empty]) -> str:
            ticket = open_ticket()
            marks.append("open")
            after()
            marks.append("after")
            return f"{type(ticket).__name__} {ticket!r}"

    else:

        @app.step
        async def open_ticket() -> Ticket:
            return 42

        @app.step
        async def after() -> int:
            return 1

        @app.task(state=Empty)
        async def ticketing(ctx: TaskContext[Empty]) -> str:
            ticket = await open_ticket()
            marks.append("open")
            await after()
            marks.append("after")
            return f"{type(ticket).__name__} {ticket!r}"

    status, suspended = run_plan(backend, app, marks, "ticketing", [1])  # suspended right after it

    entries = [e for e in journal_entries(suspended[0]) if e["key"].startswith("open_ticket")]
    assert len(entries) == 1
    assert "#42" in entries[0].values(), entries[0]  # the serializer's output, not 42
    assert status.status == Status.SUCCEEDED, status.error
    assert status.result == "int 42"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_result_its_declared_type_would_not_take_back_fails_where_it_is_recorded(
    make_runtime, flavour
):
    """A step declared ``-> dict`` that returns a list, or a task that does: the JSON written
    would not validate on replay (a replay would see an error where the live turn saw a
    value), so the step fails (once, naming it and both types), and the task likewise; a
    value the type takes back (a tuple for a list) is recorded as before."""
    app = Continuum()
    runs: list[int] = []
    refused: list[str] = []

    if flavour == "sync":

        @app.step
        def shaped() -> dict[str, int]:
            runs.append(1)
            return [1, 2]  # type: ignore[return-value]

        @app.step
        def pair() -> list[int]:
            return (1, 2)  # type: ignore[return-value]

        @app.task(state=Empty)
        def steps(ctx: TaskContext[Empty]) -> list[int]:
            try:
                shaped()
            except StepError as exc:
                refused.append(str(exc))
            return pair()

        @app.task(state=Empty)
        def whole(ctx: TaskContext[Empty]) -> dict[str, int]:
            return [1, 2]  # type: ignore[return-value]

    else:

        @app.step
        async def shaped() -> dict[str, int]:
            runs.append(1)
            return [1, 2]  # type: ignore[return-value]

        @app.step
        async def pair() -> list[int]:
            return (1, 2)  # type: ignore[return-value]

        @app.task(state=Empty)
        async def steps(ctx: TaskContext[Empty]) -> list[int]:
            try:
                await shaped()
            except StepError as exc:
                refused.append(str(exc))
            return await pair()

        @app.task(state=Empty)
        async def whole(ctx: TaskContext[Empty]) -> dict[str, int]:
            return [1, 2]  # type: ignore[return-value]

    runtime = make_runtime(app)
    summary = runtime.run("steps", {})
    assert (summary.status, runtime.record(summary.task_id).result) == ("succeeded", [1, 2])
    assert runs == [1]
    (message,) = refused
    assert "shaped#0" in message
    assert "dict" in message
    failed = runtime.run("whole", {})
    assert failed.status == "failed"
    error = runtime.record(failed.task_id).error
    assert error is not None
    assert "the task's result" in error.message
    assert "list" in error.message
    assert "dict" in error.message
