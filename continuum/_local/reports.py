"""What a local run reports: each invocation, the summary at its end, and what changed.

The local runtime (``runtime.py``) reads the task's record after an invocation only when that
invocation may have changed what it decides on (the status, what the task waits for): not
after a hop, a duplicate or an ignored wake, which a worker reports as it handles each
message (``Handled``, an observer of the app).
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from continuum._define.observers import MessageHandled, Observer
from continuum._record.model import Status, TaskRecord
from continuum._waits.kinds.child_wait import CHILD
from continuum._waits.kinds.registry import operation_of, unknown_kinds
from continuum._worker.endings import Outcome
from continuum._worker.metering import CallCounter

#: Outcomes of a message that leave the record's status and waiters as they were (a hop
#: moves only the generation and the counters on).
KEEPS_STATUS = frozenset({Outcome.HOPPED, Outcome.IGNORED, Outcome.DUPLICATE, Outcome.STALE})


@dataclass
class InvocationReport:
    """What one emulated invocation did to the task."""

    number: int
    status: str
    turn: int
    steps_executed: int
    steps_replayed: int
    seconds: float
    overran: bool
    reason: str | None = None
    #: the invocation only moved a long wait's timer on (no user code ran).
    hop: bool = False
    #: another task than the one followed ran (a child task, or a schedule's run): its id,
    #: name and batch index.
    task_id: str | None = None
    task_name: str | None = None
    index: int | None = None
    #: the schedule whose run that other task is (None: a child, or no other task).
    schedule: str | None = None
    #: the invocation took a schedule's fire (``status``: its outcome), and ran no task.
    fire: bool = False


@dataclass
class RunSummary:
    """The end of a local run: the task's fate and what it took."""

    task_id: str
    status: str
    result: Any
    error: str | None
    #: the task's own invocations (its timer hops not among them).
    invocations: int
    continuations: int
    steps: int
    steps_replayed: int
    #: the turns the task entered: the one that returned (or runs, or waits) included.
    turns: int
    #: invocations that only moved a long wait's timer on (not among ``invocations``).
    hops: int
    overruns: int
    seconds: float
    s3_calls: int
    sqs_calls: int
    scheduler_calls: int
    aws_calls: dict[str, int] = field(default_factory=dict)
    #: where the task's code raised, when it failed so.
    traceback: str | None = None
    #: every invocation of the run, those of other tasks (children, schedules' runs), schedule
    #: fires and timer hops included: the numbers its lines count.
    all_invocations: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)


class Handled(Observer):
    """What the worker did with each message of the task being driven, since the last look."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.outcomes: list[tuple[str | None, str]] = []

    def message_handled(self, event: MessageHandled) -> None:
        with self.lock:
            self.outcomes.append((event.task_id, event.outcome))

    def take(self) -> list[tuple[str | None, str]]:
        with self.lock:
            taken, self.outcomes = self.outcomes, []
        return taken


_HANDLED: weakref.WeakKeyDictionary[Any, Handled] = weakref.WeakKeyDictionary()
_HANDLED_LOCK = threading.Lock()


def handled_on(app: Any) -> Handled:
    """The app's one ``Handled`` observer, registered on it the first time: every local
    runtime over the same app shares it, so the app does not gather one per runtime (and
    each of them every outcome, for ever)."""
    with _HANDLED_LOCK:
        handled = _HANDLED.get(app)
        if handled is None:
            handled = _HANDLED[app] = app.observe(Handled())
        return handled


#: Outcomes of a schedule's fire: it starts a run (another task), or skips.
FIRES = frozenset({Outcome.STARTED, Outcome.SKIPPED})


def fire_of(
    number: int, outcomes: list[tuple[str | None, str]], seconds: float, overran: bool
) -> InvocationReport | None:
    """The report of an invocation that took only a schedule's fire (None: it took more)."""
    if not outcomes or any(task or outcome not in FIRES for task, outcome in outcomes):
        return None
    return InvocationReport(number, outcomes[-1][1], 0, 0, 0, seconds, overran, fire=True)


def kept_status(outcomes: list[tuple[str | None, str]], task_id: str) -> bool:
    """Whether these outcomes left ``task_id``'s status and waiters unchanged."""
    return all(outcome in KEEPS_STATUS for handled, outcome in outcomes if handled == task_id)


def invocation_of(
    number: int, before: TaskRecord, after: TaskRecord, seconds: float, overran: bool
) -> InvocationReport:
    parked = after.status in (Status.SUSPENDED, Status.WAITING)
    return InvocationReport(
        number=number,
        status=after.status.value,
        turn=after.turn,
        steps_executed=after.counters.steps_executed - before.counters.steps_executed,
        steps_replayed=after.counters.steps_replayed - before.counters.steps_replayed,
        seconds=seconds,
        overran=overran,
        reason=after.suspend_reason if parked else None,
        hop=after.counters.hops > before.counters.hops,
    )


def summary_of(
    record: TaskRecord,
    counter: CallCounter,
    *,
    overruns: int,
    seconds: float,
    all_invocations: int = 0,
) -> RunSummary:
    """A run's summary from the task's record and the AWS calls ``counter`` counted."""
    return RunSummary(
        task_id=record.task_id,
        status=record.status.value,
        result=record.result,
        error=record.error.message if record.error else None,
        invocations=record.counters.invocations,
        continuations=record.counters.continuations,
        steps=record.counters.steps_executed,
        steps_replayed=record.counters.steps_replayed,
        turns=turns_entered(record.turn),
        hops=record.counters.hops,
        overruns=overruns,
        seconds=round(seconds, 3),
        s3_calls=counter.total("s3"),
        sqs_calls=counter.total("sqs"),
        scheduler_calls=counter.total("scheduler"),
        aws_calls=dict(sorted(counter.calls.items())),
        traceback=record.error.traceback if record.error else None,
        all_invocations=all_invocations,
    )


def turns_entered(turn: int) -> int:
    """How many turns a task in turn ``turn`` has entered: turns count from 0, and the
    record's turn counter counts only the turns that ended in another (not the last)."""
    return turn + 1


def waits_for_outside(
    record: TaskRecord, read: Callable[[str], TaskRecord | None] | None = None
) -> bool:
    """Whether the task waits for what only the outside world answers (a callback, a signal,
    or a kind of wait this version does not know: only newer code answers it), itself or,
    where it waits for child
    tasks, through one of them (``read`` gives a task's record, None where it has none yet;
    without it, a wait for children counts as one for the outside world)."""
    if record.status != Status.WAITING:
        return False
    kinds = [operation_of(waiter.kind) for waiter in record.waiting_for]
    if any(kind.outside for kind in kinds) or unknown_kinds(w.kind for w in record.waiting_for):
        return True
    if CHILD not in kinds:
        return False
    if read is None:
        return True
    for batch in record.children:
        for child_id in batch.ids():
            child = read(child_id)
            if child is not None and waits_for_outside(child, read):
                return True
    return False
