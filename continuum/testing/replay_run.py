"""One run of the replay check: the task from its start to its end, on the check's clock,
suspended once after its k-th live step, and answered whenever it waits for the outside world.

Every run starts from the same instant on a clock that moves only when told (a wait's jump;
the forced suspension's ``SUSPENSION_GAP_S``), with ``random`` seeded alike, so that runs
differ only where a suspension makes them.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from continuum._app.app import Continuum
from continuum._base.clock import real_monotonic
from continuum._base.json_shapes import ready_answers
from continuum._define import callbacks
from continuum._local.runtime import POLL_INTERVAL_S, LocalLambdaContext, waits_for_outside
from continuum._local.virtual_time import VirtualTime
from continuum._record.model import ErrorInfo, Status, TaskRecord
from continuum._waits.kinds.callback_wait import CALLBACK
from continuum._waits.kinds.registry import operation_of
from continuum.errors import ConfigurationError, ContinuumError
from continuum.testing.handles import TaskHandle
from continuum.testing.observe import StandIn, StepRun
from continuum.testing.runner import TaskRef, TaskRunner

#: The forced suspension's continuation runs this much later on the virtual clock, so that
#: code reading the clock between steps sees it move (as it would on AWS), while a callback's
#: or heartbeat's timeout, unless under a second, does not fire because of it.
SUSPENSION_GAP_S = 1.0
#: ``random`` is seeded with this at the start of every run, so that only what a re-entered
#: turn draws again differs between runs.
RANDOM_SEED = 12


@dataclass(frozen=True)
class Failure:
    """An answer that fails a callback: ``cb.result()`` raises CallbackFailedError.

    Example:
        >>> answers = {"manager": Failure("Rejected", "not this week")}
        >>> check_replay_safe(app, "approve", {}, callbacks=answers)  # doctest: +SKIP
    """

    error_type: str
    message: str


@dataclass(frozen=True)
class ReadyAnswer:
    """An answer that is the callback's own ready answer ``name`` (its request's
    ``"answers"``), such as an approval's ``approve``, whose digest differs in every run.

    Example:
        >>> answers = {"approve.issue_refund": ReadyAnswer("approve")}
        >>> check_replay_safe(app, "support", {"q": "?"}, callbacks=answers)  # doctest: +SKIP
    """

    name: str


@dataclass
class RunEnding:
    """How one run ended, and the live steps it ran."""

    name: str
    status: Status
    result: Any
    error: ErrorInfo | None
    steps: list[StepRun]
    failure: Exception | None
    suspended: bool
    invocations: int


@dataclass
class Plan:
    """What every run of one check shares: the task, its input and answers, and the clock."""

    app: Continuum
    task: TaskRef
    input: Any
    callbacks: dict[str, Any]
    signals: dict[str, list[Any]]
    task_id: str
    budget_s: float
    timeout_s: float
    start: datetime = field(default_factory=lambda: datetime.now(UTC))
    clock: VirtualTime = field(init=False)

    def __post_init__(self) -> None:
        # One clock for every run (starting freezegun scans every loaded module), moved back
        # to the same start for each.
        self.clock = VirtualTime(self.start, tick=False)

    def run(self, *, k: int | None, stand_in: StandIn | None = None) -> RunEnding:
        """Run the task from the start to its end, suspended after its k-th live step (if k
        is given), with ``stand_in`` answering its steps (if given)."""
        self.clock.move_to(self.start)
        random.seed(RANDOM_SEED)
        runner = TaskRunner(self.app, budget_s=self.budget_s, timeout_s=self.timeout_s)
        runner._clock = self.clock
        with runner, _alike_tokens(self.task_id):
            runner.log.stand_in = stand_in
            handle = runner.start(self.task, self.input, task_id=self.task_id)
            trip = _Trip(k, lambda: runner.log.finished(self.task_id))
            with runner.runtime.recurring_held():  # the app's schedules' runs are not this task's
                self._drain(runner, handle, trip)
            record = handle.record
            return RunEnding(
                name=record.task_name,
                status=record.status,
                result=record.result,
                error=record.error,
                steps=handle.step_runs,
                failure=runner.log.errors.get(self.task_id),
                suspended=trip.fired,
                invocations=record.counters.invocations,
            )

    def _drain(self, runner: TaskRunner, handle: TaskHandle, trip: _Trip) -> None:
        """Invoke until the task ends: answer what it waits for, jump over its timers."""
        runtime, answers = runner.runtime, _Answers(self.callbacks, self.signals)
        started = real_monotonic()
        while real_monotonic() - started < self.timeout_s:
            fired = trip.fired
            if runtime.invoke_once(trip.context(self.budget_s)) is not None:
                if trip.fired and not fired:
                    self.clock.advance(SUSPENSION_GAP_S)
                continue
            record = handle.record
            if record.status.finished:
                return
            if waits_for_outside(record, runtime.record_if_any):
                answers.give(runner, record)
                continue
            due = runtime.next_due()
            if due is None:
                raise ContinuumError(
                    f"task {record.task_name!r} is {record.status.value} with nothing due",
                    task_id=record.task_id,
                )
            self.clock.wait_until(due, poll_s=POLL_INTERVAL_S)
        raise ContinuumError(
            f"a run of the replay check took more than {self.timeout_s:.0f}s",
            task_id=self.task_id,
            hint="a task that never ends? pass timeout_s=... if it is only slow",
        )


class _Trip:
    """Forces one suspension: the invocation in which the k-th live step ends sees no time
    left after it. Invocations before and after it have their whole budget."""

    def __init__(self, k: int | None, finished: Callable[[], int]) -> None:
        self.k = k
        self.finished = finished
        self.fired = False

    def context(self, budget_s: float) -> LocalLambdaContext:
        return _TripContext(self, budget_s)


class _TripContext(LocalLambdaContext):
    def __init__(self, trip: _Trip, budget_s: float) -> None:
        super().__init__(budget_s)
        self.trip = trip
        self.before = trip.finished()  # live steps ended before this invocation

    def get_remaining_time_in_millis(self) -> int:
        k = self.trip.k
        if k is not None and self.before < k <= self.trip.finished():
            self.trip.fired = True
            return 0
        return super().get_remaining_time_in_millis()


@contextlib.contextmanager
def _alike_tokens(task_id: str) -> Iterator[None]:
    """Every run's n-th callback gets the same token, so that what a task derives from a
    callback id (an approval's digest) is the same in every run."""
    count = itertools.count()
    made = callbacks.new_token

    def token() -> str:
        return hashlib.sha256(f"{task_id}:{next(count)}".encode()).hexdigest()[:32]

    callbacks.new_token = token
    try:
        yield
    finally:
        callbacks.new_token = made


class _Answers:
    """Answers a waiting task from the check's ``callbacks`` and ``signals``."""

    def __init__(self, callbacks: dict[str, Any], signals: dict[str, list[Any]]) -> None:
        self.callbacks = callbacks
        self.signals = {name: list(payloads) for name, payloads in signals.items()}
        self.sent: dict[str, int] = defaultdict(int)

    def give(self, runner: TaskRunner, record: TaskRecord) -> None:
        client = runner.client
        for waiter in record.waiting_for:
            kind = operation_of(waiter.kind)
            if kind is CALLBACK and waiter.name in self.callbacks and waiter.id:
                answer = self.callbacks[waiter.name]
                if isinstance(answer, ReadyAnswer):
                    asks = kind.shown(waiter, record).request
                    answer = self._ready(record, waiter.name, asks, answer.name)
                if isinstance(answer, Failure):
                    client.fail_callback(waiter.id, answer.error_type, answer.message)
                else:
                    kind.send(client, record.task_id, waiter, answer, answer_id=None)
                return
            if kind is not CALLBACK and kind.outside and self.signals.get(waiter.name):
                n = self.sent[waiter.name] = self.sent[waiter.name] + 1
                payload = self.signals[waiter.name].pop(0)
                # A fixed id: what a task does with the signal's id is the same in every run.
                kind.send(client, record.task_id, waiter, payload, answer_id=f"replay-{n}")
                return
        waits = ", ".join(f"{w.kind} {w.name!r}" for w in record.waiting_for)
        raise ConfigurationError(
            f"task {record.task_name!r} waits for {waits}, and check_replay_safe has no "
            "answer left for it",
            task_id=record.task_id,
            hint="pass callbacks={name: result or Failure(...)} or signals={name: [payload, ...]}",
        )

    @staticmethod
    def _ready(record: TaskRecord, callback: str, request: Any, name: str) -> Any:
        answers = ready_answers(request)
        if name not in answers:
            raise ConfigurationError(
                f"callback {callback!r} offers no ready answer {name!r} "
                f"(it offers: {', '.join(answers) or 'none'})",
                task_id=record.task_id,
            )
        return answers[name]
