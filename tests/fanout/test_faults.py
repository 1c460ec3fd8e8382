"""Faults in fan-out that once failed or stranded a parent, found by the fault run's ``fanmap``
kind (``make chaos``), each reduced to a small reproducer: a batch item suspended before its
first step, a cancel of a parent waiting for its children, a fault starting or cancelling a
child.

In both flavours (``tests/flavours.py``) where the task body is the fan-out; the parent of
the cancel-again one is cancelled by the client whatever it runs. A refused child start
pauses the parent, as a backoff does: those runtimes run on virtual time, which ``drain``
moves to the pause's end.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskCancelledError, TaskContext
from continuum._fanout.child_tasks import (
    MAX_REFUSED_STARTS,
    REFUSED_START_MAX_PAUSE_S,
    REFUSED_START_PAUSE_S,
)
from continuum.backends.queue import QueueError
from continuum.backends.store import StoreError, TransientStoreError
from tests.conftest import (
    ScriptedContext,
    StoreFaults,
    drain,
    raw_record,
    set_visibility_timeout,
)
from tests.fanout.test_ids import One, Squat, squat_app
from tests.flavours import FLAVOURS
from tests.support import LocalRuntime


class Items(BaseModel):
    n: int = 2


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_batch_item_suspended_before_its_first_step_resumes(flavour):
    """A ``ctx.map`` item that was entered but suspended before its first step (the budget
    ran out right after the claim) was saved with no journal of its own; the stored record
    lost the empty list (``children: []`` became None), and the next invocation failed the
    task with a bare AssertionError instead of running the item."""
    app = Continuum(visibility_margin_s=None)
    runs: list[int] = []

    if flavour == "sync":

        @app.step
        def piece(x: int) -> int:
            runs.append(x)
            return x * 10

        @app.task(state=Items)
        def fan(ctx: TaskContext[Items]) -> list[int]:
            return ctx.map(range(ctx.state.n), lambda child, x, i: piece(x), name="items").values()

    else:

        @app.step
        async def piece(x: int) -> int:
            runs.append(x)
            return x * 10

        async def item(child: TaskContext[Items], x: int, i: int) -> int:
            return await piece(x)

        @app.task(state=Items)
        async def fan(ctx: TaskContext[Items]) -> list[int]:
            return (await ctx.map_async(range(ctx.state.n), item, name="items")).values()

    runtime = LocalRuntime(app, budget_s=900, backend="memory")
    task_id = app.client().start("fan", {})
    runtime.invoke_once(ScriptedContext(0, lambda: len(runs)))
    stored = raw_record(runtime, task_id)
    assert stored["status"] == "suspended"
    assert [item["partial"] for item in stored["journal"][0]["children"]] == [True, True]
    app.update_settings()  # another execution environment: it reads the record from the store
    record = drain(runtime, task_id, lambda i: ScriptedContext(None, lambda: len(runs)))
    assert record.status == Status.SUCCEEDED, record.error
    assert record.result == [0, 10]
    assert sorted(runs) == [0, 1]


class Held(BaseModel):
    fan: int = 0


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("fan", [0, 2])
def test_a_cancel_delivered_to_a_parent_waiting_for_children_survives_a_suspension(fan, flavour):
    """A parent waiting for its child tasks (``ctx.map_tasks``) is woken by a cancel: the
    TaskCancelledError is raised where it waits, and its handler runs a cleanup step. If the
    invocation suspended before that step, the replay went back to waiting for the children:
    the cancel had been journaled after the unfinished batch instead of in its place, so the
    replay never met it, and parent and children waited for ever (a plain wait was fine)."""
    app = Continuum(visibility_margin_s=None)
    runs: list[str] = []

    if flavour == "sync":

        @app.step
        def cleanup(who: str) -> str:
            runs.append(who)
            return who

        @app.task(state=Held)
        def leaf(ctx: TaskContext[Held]) -> Any:
            ctx.wait_for_signal("never")

        @app.task(state=Held)
        def parent(ctx: TaskContext[Held]) -> Any:
            try:
                if ctx.state.fan:
                    ctx.map_tasks("leaf", [{} for _ in range(ctx.state.fan)], name="held")
                ctx.wait_for_signal("never")
            except TaskCancelledError:
                cleanup("parent")
                raise

    else:

        @app.step
        async def cleanup(who: str) -> str:
            runs.append(who)
            return who

        @app.task(state=Held)
        async def leaf(ctx: TaskContext[Held]) -> Any:
            await ctx.wait_for_signal_async("never")

        @app.task(state=Held)
        async def parent(ctx: TaskContext[Held]) -> Any:
            try:
                if ctx.state.fan:
                    inputs = [{} for _ in range(ctx.state.fan)]
                    await ctx.map_tasks_async("leaf", inputs, name="held")
                await ctx.wait_for_signal_async("never")
            except TaskCancelledError:
                await cleanup("parent")
                raise

    runtime = LocalRuntime(app, budget_s=900, backend="memory")
    client = app.client()
    task_id = client.start("parent", {"fan": fan})
    for _ in range(6):
        runtime.invoke_once()
    assert runtime.record(task_id).status == Status.WAITING
    client.cancel(task_id, "stop")
    # the wake: TaskCancelledError is raised into the wait; the cleanup step does not fit
    runtime.invoke_once(ScriptedContext(0, lambda: len(runs)))
    record = drain(runtime, task_id, lambda i: ScriptedContext(None, lambda: len(runs)), limit=50)
    assert record.status == Status.CANCELLED
    assert runs == ["parent"]
    while runtime.invoke_once() is not None:  # the cancels of its children
        pass
    children = [child for batch in record.children for child in batch.ids()]
    assert len(children) == fan
    assert {runtime.record(child).status for child in children} <= {Status.CANCELLED}


class Leaves(BaseModel):
    n: int = 2


def leaves_app(flavour: str = "sync") -> Continuum:
    app = Continuum(visibility_margin_s=None)

    if flavour == "sync":

        @app.task(state=Leaves)
        def leaf(ctx: TaskContext[Leaves]) -> int:
            return ctx.state.n

        @app.task(state=Leaves)
        def fan(ctx: TaskContext[Leaves]) -> list[Any]:
            batch = ctx.map_tasks("leaf", [{"n": i} for i in range(ctx.state.n)], name="leaves")
            return batch.values()

        @app.task(state=Leaves)
        def calls(ctx: TaskContext[Leaves]) -> list[Any]:
            return [ctx.invoke("leaf", {"n": i}, name=f"call{i}") for i in range(ctx.state.n)]

    else:

        @app.task(state=Leaves)
        async def leaf(ctx: TaskContext[Leaves]) -> int:
            return ctx.state.n

        @app.task(state=Leaves)
        async def fan(ctx: TaskContext[Leaves]) -> list[Any]:
            inputs = [{"n": i} for i in range(ctx.state.n)]
            return (await ctx.map_tasks_async("leaf", inputs, name="leaves")).values()

        @app.task(state=Leaves)
        async def calls(ctx: TaskContext[Leaves]) -> list[Any]:
            n = ctx.state.n
            return [await ctx.invoke_async("leaf", {"n": i}, name=f"call{i}") for i in range(n)]

    return app


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("parent", ["fan", "calls"])
def test_a_transient_fault_starting_a_child_task_does_not_fail_the_parent(parent, flavour):
    """``ctx.map_tasks`` creates each child's record, then sends its start. One SQS 500 on
    the send (after botocore's retries) failed the parent with QueueError (and one S3 503 on
    the read of a child's record that a replay creates again, TransientStoreError); a fresh
    invocation carries on instead (a second create of the same id is a no-op, a second start
    is fenced). ``ctx.invoke`` must then start its child on the replay: it journaled the
    child before it started it, so a replay took the child as started and waited for ever."""
    app = leaves_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory", virtual_time=True)
    task_id = app.client().start(parent, {})
    send, refused = runtime.queue.send, []

    def refuse_first(body, *, delay_s=0):  # the first send is the first child's start
        if not refused:
            refused.append(body)
            raise QueueError("send failed: InternalFailure (injected)")
        return send(body, delay_s=delay_s)

    runtime.queue.send = refuse_first
    record = drain(runtime, task_id, lambda i: None)
    assert refused
    assert f"{task_id}." in refused[0]
    assert record.status == Status.SUCCEEDED, record.error
    assert record.result == [0, 1]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_children_started_before_a_failed_start_count_as_progress(flavour):
    """Each invocation of a batch's parent starts one child, then its next start fails (a
    throttled SendMessage, after botocore's retries). The parent saved the created children
    but not the started ones, so every invocation began the starts again, ended with no
    progress, and after five failed the parent ``NoProgress`` (the fault run's ``fantasks``,
    children stranded pending). Starts already sent are saved and count as progress."""
    app = leaves_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory", virtual_time=True)
    task_id = app.client().start("fan", {"n": 8})
    send, sent_this_turn, refused = runtime.queue.send, [0], []

    def refuse_the_second_each_turn(body, *, delay_s=0):
        if f'"{task_id}.' in body and '"reason":"start"' in body.replace(" ", ""):
            sent_this_turn[0] += 1
            if sent_this_turn[0] == 2:
                refused.append(body)
                raise QueueError("send failed: ThrottlingException (injected)")
        return send(body, delay_s=delay_s)

    def next_turn(_: int) -> None:
        sent_this_turn[0] = 0

    runtime.queue.send = refuse_the_second_each_turn
    record = drain(runtime, task_id, next_turn)
    assert len(refused) == 7, "more failed turns in a row than the idle limit"
    assert record.status == Status.SUCCEEDED, record.error
    assert record.result == list(range(8))


def test_a_cancelled_parent_cancels_its_children_again_when_the_first_try_failed():
    """A cancelled parent cancels its children after its finish write. If that failed (one
    S3 500 reading a child's record, after botocore's retries), the message came back but
    only re-reported and re-swept: the held children were never cancelled and waited for
    ever. Every later message of the cancelled parent now cancels them again."""
    app = Continuum(visibility_margin_s=None)

    @app.task(state=Held)
    def leaf(ctx: TaskContext[Held]) -> Any:
        ctx.wait_for_signal("never")

    @app.task(state=Held)
    def parent(ctx: TaskContext[Held]) -> Any:
        ctx.map_tasks("leaf", [{} for _ in range(2)], name="held")

    runtime = LocalRuntime(app, budget_s=900, backend="memory")
    set_visibility_timeout(runtime, 0)  # a message that failed comes back at once
    client = app.client()
    task_id = client.start("parent", {})
    while runtime.invoke_once() is not None:
        pass
    children = [child for batch in runtime.record(task_id).children for child in batch.ids()]
    assert {runtime.record(child).status for child in children} == {Status.WAITING}
    client.cancel(task_id, "stop")
    failed: list[str] = []

    def fail_first_child_read(call, key, *args, **kwargs):
        if key.endswith(f"{children[0]}/record.json") and not failed:
            failed.append(key)
            raise TransientStoreError(f"{key}: InternalError")
        return call(key, *args, **kwargs)

    StoreFaults(app).around("get", fail_first_child_read)
    for _ in range(20):
        if runtime.invoke_once() is None:
            break
    assert failed
    assert runtime.record(task_id).status == Status.CANCELLED
    assert [runtime.record(child).status for child in children] == [Status.CANCELLED] * 2


def refusing_starts(runtime: LocalRuntime, parent_id: str, times: int | None = None):
    """Make ``runtime``'s queue refuse the first ``times`` starts of ``parent_id``'s children
    (None: every one), as a throttled SendMessage does after botocore's retries; return the
    refused bodies and the delays of the parent's continuations, in order."""
    send = runtime.queue.send
    refused: list[str] = []
    parent_delays: list[int] = []

    def refuse(body, *, delay_s=0):
        start = f'"{parent_id}.' in body and '"reason":"start"' in body.replace(" ", "")
        if start and (times is None or len(refused) < times):
            refused.append(body)
            raise QueueError("send failed: ThrottlingException (injected)")
        if f'"{parent_id}"' in body and '"kind":"continue"' in body:  # not a timer, a wake
            parent_delays.append(delay_s)
        return send(body, delay_s=delay_s)

    runtime.queue.send = refuse
    return refused, parent_delays


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_child_start_refused_more_times_in_a_row_than_the_idle_limit_still_starts(flavour):
    """A parent's ``ctx.invoke`` whose child start is refused at every try for longer than
    the idle limit (SQS throttling for a while, after botocore's retries): each try waits a
    moment, as a backoff does, and does not count as a turn without progress, so the parent
    is not failed ``NoProgress`` for a fault of the queue's (the fault run's ``invoker``)."""
    app = leaves_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory", virtual_time=True)
    task_id = app.client().start("calls", {"n": 2})
    refused, _ = refusing_starts(runtime, task_id, times=3 * app.settings.max_idle_suspensions)
    record = drain(runtime, task_id, lambda _: None)
    assert len(refused) == 3 * app.settings.max_idle_suspensions
    assert record.status == Status.SUCCEEDED, record.error
    assert record.result == [0, 1]


def refusing_creates(app: Continuum, parent_id: str) -> list[str]:
    """Make ``app``'s store refuse every write of ``parent_id``'s children's records, as S3
    does when the worker's role may not write them; return the refused keys."""
    refused: list[str] = []

    def refuse(call, key, *args, **kwargs):
        if key.startswith(f"tasks/{parent_id}.") and key.endswith("/record.json"):
            refused.append(key)
            raise StoreError(f"{key}: AccessDenied (injected)")
        return call(key, *args, **kwargs)

    StoreFaults(app).around("put", refuse)
    return refused


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("parent", ["fan", "calls"])
@pytest.mark.parametrize("refuser", ["queue", "store"])
def test_a_child_start_refused_at_every_try_fails_the_parent_naming_the_child(
    refuser, parent, flavour
):
    """A child's start (or the create of its record) that the queue (or the store) always
    refuses, as when it was deleted or a permission is missing, is not tried for ever: after
    ``MAX_REFUSED_STARTS`` refusals in a row the parent fails with an error that names it,
    the child and the cause."""
    app = leaves_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory", virtual_time=True)
    task_id = app.client().start(parent, {"n": 1})
    if refuser == "queue":
        refused, _ = refusing_starts(runtime, task_id)
    else:
        refused = refusing_creates(app, task_id)
    record = drain(runtime, task_id, lambda _: None)
    assert record.status == Status.FAILED
    assert len(refused) == MAX_REFUSED_STARTS
    assert record.error is not None
    assert record.error.type == "ChildStartRefused"
    child = record.children[0].ids()[0]
    assert f"child task {child} of {task_id}" in record.error.message
    assert ("ThrottlingException" if refuser == "queue" else "AccessDenied") in (
        record.error.message
    )


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("parent", ["fan", "calls"])
def test_a_parent_failed_for_refused_starts_succeeds_on_retry_once_they_are_accepted(
    parent, flavour
):
    """What the ``ChildStartRefused`` error advises: once the queue takes the sends again,
    ``retry`` runs the parent's failed turn again, and its children start and finish."""
    app = leaves_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory", virtual_time=True)
    task_id = app.client().start(parent, {"n": 2})
    send = runtime.queue.send
    refusing_starts(runtime, task_id)
    assert drain(runtime, task_id, lambda _: None).status == Status.FAILED
    runtime.queue.send = send
    with runtime.time.running():
        app.client().retry(task_id)
    record = drain(runtime, task_id, lambda _: None)
    assert record.status == Status.SUCCEEDED, record.error
    assert record.result == [0, 1]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_refused_child_start_pauses_longer_each_time_up_to_a_cap(flavour):
    """Each refusal in a row of a child's start doubles the parent's pause before it tries
    again, from ``REFUSED_START_PAUSE_S`` up to ``REFUSED_START_MAX_PAUSE_S``, as a backoff
    does; the start that goes through ends the pauses."""
    app = leaves_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory", virtual_time=True)
    task_id = app.client().start("calls", {"n": 1})
    refused, delays = refusing_starts(runtime, task_id, times=8)
    record = drain(runtime, task_id, lambda _: None)
    assert len(refused) == 8
    assert record.status == Status.SUCCEEDED, record.error
    pauses = [min(REFUSED_START_PAUSE_S * 2**k, REFUSED_START_MAX_PAUSE_S) for k in range(8)]
    assert delays[:8] == [round(p) for p in pauses]
    assert not any(delays[8:]), "the pauses end once the child has started"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_taken_child_id_whose_report_was_refused_once_still_fails_the_call_naming_it(flavour):
    """``ctx.invoke`` whose child id another task holds fails with ``ChildIdTakenError``
    after it reports the taken slot to its own inbox. When that write was refused (one S3
    error) the call had already been journaled failed with no error, so the parent's
    replay raised a bare "the child task failed" instead of naming the taken id."""
    app = squat_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory", virtual_time=True)
    parent, squatted = "job", "job.0.invoke.leaf-0"
    app.client().start("leaf", One(i=99), task_id=squatted)
    assert drain(runtime, squatted, lambda _: None).status == Status.SUCCEEDED
    refused: list[str] = []

    def refuse_the_first_report(call, key, *args, **kwargs):
        if key.endswith(f"/children/{squatted}/failed.json") and not refused:
            refused.append(key)
            raise StoreError(f"{key}: AccessDenied (injected)")
        return call(key, *args, **kwargs)

    StoreFaults(app).around("put", refuse_the_first_report)
    app.client().start("adopt", Squat(api="invoke"), task_id=parent)
    record = drain(runtime, parent, lambda _: None)
    assert refused
    assert record.status == Status.SUCCEEDED, record.error
    assert record.result["error_type"] == "ChildIdTakenError"
    assert squatted in record.result["text"]
