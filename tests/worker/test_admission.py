"""The worker's admission is an ordered list of rules: a rule added to it is one more check.

Each rule's check says "go on" or "stop with this outcome"; every rule that let a message on
is released once, in reverse order, however the message's handling ends: stopped by a later
rule, or the invocation's ending (suspended, waiting, finished, fenced), or an exception.
The rules here are the test's own, added where a concurrency slot would go (before the claim)
and first of all (before the fence); both backends.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import cast

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.conftest import ScriptedContext, StoreFaults, record_key, snapshot_objects
from tests.support import (
    GO,
    Admission,
    AdmissionRules,
    ClaimRecord,
    Fence,
    Go,
    LocalRuntime,
    Outcome,
    TransientStoreError,
    admit_also,
)

#: One line of a rule's log: (rule, "check" or "release", the record's status or the ending).
Line = tuple[str, str, str]


class Recording:
    """A rule that lets every message on and logs its checks and releases."""

    def __init__(self, name: str, log: list[Line]) -> None:
        self.name, self.log = name, log

    def check(self, admission: Admission) -> Outcome | Go:
        self.log.append((self.name, "check", admission.record.status.value))
        return GO

    def release(self, admission: Admission, ending: Outcome | BaseException) -> None:
        said = ending.value if isinstance(ending, Outcome) else type(ending).__name__
        self.log.append((self.name, "release", said))


class Refusing:
    """A rule that stops every message of one task, as a full concurrency slot would."""

    def __init__(self, task_name: str, log: list[Line]) -> None:
        self.task_name, self.log = task_name, log

    def check(self, admission: Admission) -> Outcome | Go:
        if admission.record.task_name != self.task_name:
            return GO
        self.log.append(("refusing", "check", "refused"))
        return Outcome.IGNORED

    def release(self, admission: Admission, ending: Outcome | BaseException) -> None:
        self.log.append(("refusing", "release", str(ending)))


class Nothing(BaseModel):
    pass


def test_added_rules_check_in_order_before_the_claim_and_release_in_reverse_after_the_ending(
    make_runtime,
):
    app = Continuum()

    @app.task(state=Nothing)
    def greet(ctx: TaskContext[Nothing]) -> str:
        return "hi"

    runtime = make_runtime(app)
    log: list[Line] = []
    admit_also(app, Recording("first", log), before=ClaimRecord)
    admit_also(app, Recording("second", log), before=ClaimRecord)
    summary = runtime.run("greet", {})
    assert summary.status == "succeeded"
    assert log == [
        ("first", "check", "pending"),  # not claimed yet
        ("second", "check", "pending"),
        ("second", "release", "succeeded"),
        ("first", "release", "succeeded"),
    ]


def test_a_message_an_added_rule_refuses_is_acknowledged_and_changes_nothing(make_runtime):
    app = Continuum()
    ran: list[int] = []

    @app.step
    def work() -> int:
        ran.append(1)
        return 1

    @app.task(state=Nothing)
    def held(ctx: TaskContext[Nothing]) -> int:
        return work()

    @app.task(state=Nothing)
    def free(ctx: TaskContext[Nothing]) -> int:
        return work()

    runtime = make_runtime(app)
    log: list[Line] = []
    admit_also(app, Recording("before", log), before=ClaimRecord)
    admit_also(app, Refusing("held", log), before=ClaimRecord)
    admit_also(app, Recording("after", log), before=ClaimRecord)
    with runtime.time.running():
        task_id = app.client().start("held", {})
        stored = snapshot_objects(runtime)
        result = runtime.invoke_once()
        assert result == {"batchItemFailures": []}
        assert runtime.invoke_once() is None, "the refused message was not acknowledged"
    assert snapshot_objects(runtime) == stored
    record = runtime.record(task_id)
    assert record.status == Status.PENDING
    assert record.counters.invocations == 0
    assert ran == []
    assert log == [
        ("before", "check", "pending"),
        ("refusing", "check", "refused"),  # it stopped the message: not released, nor
        ("before", "release", "wake-ignored"),  # any rule after it checked
    ]
    with runtime.time.running():  # another task's messages it lets on
        assert runtime.drive(app.client().start("free", {})).status == "succeeded"
    assert ran == [1]


class Turns(BaseModel):
    hours: float = 0.0


def ending_app(ran: list[str], take_over: Callable[[str], None]) -> Continuum:
    """Tasks that end their invocations each one way (``lost``'s step has ``take_over`` take
    its record from it)."""
    app = Continuum()

    @app.step
    def one(n: int) -> int:
        ran.append(f"step {n}")
        return n

    @app.step(effect=True)  # the journal is saved right after it: the save is fenced
    def taken_over(task_id: str) -> int:
        take_over(task_id)
        return 0

    @app.task(state=Turns)
    def two_steps(ctx: TaskContext[Turns]) -> int:
        return one(1) + one(2)

    @app.task(state=Turns)
    def sleeper(ctx: TaskContext[Turns]) -> int:
        ctx.sleep(timedelta(hours=ctx.state.hours))
        return 1

    @app.task(state=Turns)
    def listener(ctx: TaskContext[Turns]) -> str:
        signal = ctx.wait_for_signal("go")
        return signal.name if signal is not None else "none"

    @app.task(state=Turns)
    def failing(ctx: TaskContext[Turns]) -> int:
        raise ValueError("this task fails")

    @app.task(state=Turns)
    def lost(ctx: TaskContext[Turns]) -> int:
        return taken_over(ctx.task_id)

    @app.task(state=Turns)
    def unsaved(ctx: TaskContext[Turns]) -> int:
        return 1

    return app


def another_worker_claims(runtime: LocalRuntime, task_id: str) -> None:
    """Another worker takes the record (its lease replaces ours), as after our deadline."""
    store, key = runtime.observer_store, record_key(task_id)
    stored = store.get(key)
    raw = json.loads(stored.body)
    raw["lease"]["owner"], raw["lease"]["message_id"] = "another-worker", "another-message"
    store.put(key, json.dumps(raw, indent=1).encode(), if_match=stored.etag)


def suspended(runtime: LocalRuntime, app: Continuum, ran: list[str]) -> None:
    task_id = app.client().start("two_steps", {})
    runtime.drive(task_id, context=lambda: ScriptedContext(1, executed=lambda: len(ran)))


def waited_for_time(runtime: LocalRuntime, app: Continuum, ran: list[str]) -> None:
    task_id = app.client().start("sleeper", {"hours": 1})  # a timer hops every 15 minutes
    runtime.drive(task_id, stop_when_waiting=False)


def waited_for_a_signal(runtime: LocalRuntime, app: Continuum, ran: list[str]) -> None:
    task_id = app.client().start("listener", {})
    runtime.drive(task_id)
    app.client().signal(task_id, "other")  # answers nothing: the wake is ignored
    runtime.drive(task_id)
    app.client().signal(task_id, "go")
    runtime.drive(task_id)


def cancelled(runtime: LocalRuntime, app: Continuum, ran: list[str]) -> None:
    task_id = app.client().start("listener", {})
    runtime.drive(task_id)
    app.client().cancel(task_id, "no longer needed")
    runtime.drive(task_id)


def failed(runtime: LocalRuntime, app: Continuum, ran: list[str]) -> None:
    runtime.drive(app.client().start("failing", {}))


def fenced(runtime: LocalRuntime, app: Continuum, ran: list[str]) -> None:
    runtime.drive(app.client().start("lost", {}))


def raised(runtime: LocalRuntime, app: Continuum, ran: list[str]) -> None:
    def refused(write: Callable[[], str]) -> str:
        raise TransientStoreError("the finish write failed (injected)")

    StoreFaults(app).on_finish_write(refused)
    app.client().start("unsaved", {})
    result = runtime.invoke_once()
    assert result is not None
    assert result["batchItemFailures"], "the message was not retried"


#: Each way a message's handling ends: what the rule before the claim is released with, in
#: order, and the same for the rule before the fence, which also sees the built-in rules stop.
ENDINGS: dict[
    str, tuple[Callable[[LocalRuntime, Continuum, list[str]], None], list[str], list[str]]
] = {
    "suspended": (suspended, ["suspended", "succeeded"], ["suspended", "succeeded"]),
    "waited for time": (
        waited_for_time,
        ["waiting", "succeeded"],
        ["waiting", "hopped", "hopped", "hopped", "succeeded"],
    ),
    "waited for a signal": (
        waited_for_a_signal,
        ["waiting", "succeeded"],
        ["waiting", "wake-ignored", "succeeded"],
    ),
    "cancelled": (cancelled, ["waiting", "cancelled"], ["waiting", "cancelled"]),
    "failed": (failed, ["failed"], ["failed"]),
    "fenced": (fenced, ["fenced"], ["fenced"]),
    "raised": (raised, ["TransientStoreError"], ["TransientStoreError"]),
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_every_rule_that_let_a_message_on_is_released_once_however_its_handling_ends(
    make_runtime, ending
):
    ran: list[str] = []
    app = ending_app(ran, take_over=lambda task_id: another_worker_claims(runtime, task_id))
    runtime = make_runtime(app, budget_s=900)
    log: list[Line] = []
    admit_also(app, Recording("first", log), before=Fence)
    admit_also(app, Recording("slot", log), before=ClaimRecord)
    drive, slot_endings, first_endings = ENDINGS[ending]
    with runtime.time.running():
        drive(runtime, app, ran)
    assert released(log, "slot") == slot_endings
    assert released(log, "first") == first_endings
    for name in ("first", "slot"):  # each check is followed by its own release, and only one
        steps = [step for rule, step, _ in log if rule == name]
        assert steps == ["check", "release"] * (len(steps) // 2), log
    nested = [(rule, step) for rule, step, _ in log]
    for i, (rule, step) in enumerate(nested):  # the slot's hold sits inside the first's
        if (rule, step) == ("slot", "check"):
            assert nested[i + 1 :].index(("slot", "release")) < nested[i + 1 :].index(
                ("first", "release")
            )


def released(log: list[Line], name: str) -> list[str]:
    return [said for rule, step, said in log if rule == name and step == "release"]


class Releasing:
    """A rule that lets every message on and whose release may raise."""

    def __init__(self, name: str, log: list[str], *, fails: bool = False) -> None:
        self.name, self.log, self.fails = name, log, fails

    def check(self, admission: Admission) -> Outcome | Go:
        return GO

    def release(self, admission: Admission, ending: Outcome | BaseException) -> None:
        self.log.append(self.name)
        if self.fails:
            raise RuntimeError(f"{self.name} could not release")


def test_a_release_that_raises_leaves_the_others_released_and_has_the_message_retried():
    log: list[str] = []
    rules = AdmissionRules(
        [Releasing("a", log), Releasing("b", log, fails=True), Releasing("c", log, fails=True)]
    )
    with pytest.raises(RuntimeError, match="c could not release"):  # the first to fail
        rules.admit(cast(Admission, None), then=lambda _: Outcome.SUCCEEDED)
    assert log == ["c", "b", "a"]


def test_a_rule_added_before_one_the_admission_lacks_is_refused_naming_both():
    rules = AdmissionRules([Releasing("a", [])])
    with pytest.raises(ValueError, match="has no ClaimRecord rule to add Releasing before"):
        rules.add(Releasing("b", []), before=ClaimRecord)
