"""check_replay_safe: a task ends the same wherever it is suspended, with each step run once.

The property continuum's own suite proves for its sample tasks, for any task:

1. The task runs once without a suspension of its own making (waits still end invocations):
   the reference. Each live step execution is noted: its turn, journal key, arguments and
   outcome. The clock is virtual and moves only when a wait jumps it; ``random`` is seeded.
2. For each k from 1 to the number of live step executions, the task runs again from the same
   start (the same task id, clock and seed). The invocation in which its k-th live step ends
   sees no time left after it, so the task suspends there; a fresh invocation continues it one
   virtual second later (``SUSPENSION_GAP_S``). Each step gets the reference's outcome for the
   same key and attempt instead of running its function, so steps that read the clock or draw
   random numbers, as steps should, change nothing; unless it is called with other arguments.
3. Each run must end as the reference did (its status, and its result or error), call each
   step key as often, and with the same arguments. The first run that does not raises
   :class:`ReplayDivergence` (an AssertionError) naming k, the step after which it suspended,
   and what differed first.

What it catches is code between steps that is not deterministic given the state and the step
results: the clock, ``random``, ids, I/O, module-level state that survives a turn.
"""

from __future__ import annotations

import functools
import random
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from continuum.app import Continuum
from continuum.clocks import VirtualTime, real_monotonic
from continuum.errors import ConfigurationError, ContinuumError
from continuum.local import POLL_INTERVAL_S, LocalLambdaContext, waits_for_outside
from continuum.record import ErrorInfo, Status, TaskRecord
from continuum.testing.observe import StandInAnswer, StepRun
from continuum.testing.runner import TaskHandle, TaskRef, TaskRunner
from continuum.waiters import Signal, WaitKind

#: The forced suspension's continuation runs this much later on the virtual clock, so that
#: code reading the clock between steps sees it move (as it would on AWS), while a callback's
#: or heartbeat's timeout, unless under a second, does not fire because of it.
SUSPENSION_GAP_S = 1.0
#: ``random`` is seeded with this at the start of every run, so that only what a re-entered
#: turn draws again differs between runs.
RANDOM_SEED = 12
#: The task id of every run (a task may put its id into its result).
DEFAULT_TASK_ID = "replay-check"
#: The longest argument or result a message quotes.
MAX_QUOTE_CHARS = 200


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
class ReplayRun:
    """One run of the check: suspended after its k-th live step (``after``).

    Attributes:
        suspended: the suspension happened (False when the task ended in that invocation).
    """

    k: int
    after: StepRun
    suspended: bool
    invocations: int


@dataclass(frozen=True)
class ReplayReport:
    """What ``check_replay_safe`` found: the task ended the same in every run.

    Attributes:
        task: the task's name.
        status: how every run ended.
        result: the result (JSON) every run returned, or None.
        steps: the live step executions of the uninterrupted run, in order.
        runs: one per suspension point, in order of k.
    """

    task: str
    status: Status
    result: Any
    steps: list[StepRun]
    runs: list[ReplayRun]

    def __str__(self) -> str:
        suspended = sum(run.suspended for run in self.runs)
        return (
            f"task {self.task!r} is replay-safe: suspended after each of its live steps in turn "
            f"({len(self.steps)} runs, {suspended} of them suspended before the task ended), it "
            f"ended {self.status.value} the same way, with each step run once"
        )


class ReplayDivergence(AssertionError):
    """A task ended differently, or ran steps differently, after a suspension.

    Attributes:
        task: the task's name.
        k: the run's suspension point: after its k-th live step.
        after: that step, in the uninterrupted run.
        reason: what differed first.
        suspended: the run did suspend there (False: the task ended in that invocation, so it
            differs from a run just like it, with no suspension at all).
    """

    def __init__(
        self, task: str, k: int, after: StepRun, reason: str, *, suspended: bool = True
    ) -> None:
        self.task, self.k, self.after, self.reason = task, k, after, reason
        self.suspended = suspended
        if suspended:
            how = (
                f"suspended after its {_ordinal(k)} live step ({after.where}) and continued "
                "in a fresh invocation"
            )
        else:
            how = "run again from the same start, with no suspension"
        super().__init__(
            f"task {task!r} is not replay-safe: {how}, {reason}. Code between steps must be "
            "deterministic given the state and the step results: move time, randomness and "
            "I/O into steps."
        )


def check_replay_safe(
    app: Continuum,
    task: TaskRef,
    input: Any,
    *,
    callbacks: Mapping[str, Any] | None = None,
    signals: Mapping[str, Sequence[Any]] | None = None,
    task_id: str = DEFAULT_TASK_ID,
    budget_s: float = 900.0,
    timeout_s: float = 60.0,
) -> ReplayReport:
    """Suspend the task after each of its live steps in turn; check it ends the same.

    Runs on the in-memory backend, on a virtual clock. A task that waits is answered as it
    waits: a callback by its name from ``callbacks`` (a result, or a :class:`Failure`), a
    signal from ``signals`` (each name's payloads, one per wait, in order).

    Args:
        app: the app.
        task: the task, by name or as decorated.
        input: its input (the initial state).
        callbacks: callback name -> its answer.
        signals: signal name -> the payloads to send, in order.
        task_id: the id every run uses.
        budget_s: each invocation's deadline.
        timeout_s: the most wall-clock seconds one run may take.

    Returns:
        The report: the reference run's steps and outcome, and each run's suspension.

    Raises:
        ReplayDivergence: a run ended differently, or ran a step again, missed one or called
            one with other arguments; the message names k and the step.
        ConfigurationError: the task waits for something it was given no answer for.

    Example:
        >>> report = check_replay_safe(app, "word_count", {"lines": ["a b", "c"]})  # doctest: +SKIP
        >>> len(report.steps)  # doctest: +SKIP
        2
    """
    plan = _Plan(
        app=app,
        task=task,
        input=input,
        callbacks=dict(callbacks or {}),
        signals={name: list(payloads) for name, payloads in (signals or {}).items()},
        task_id=task_id,
        budget_s=budget_s,
        timeout_s=timeout_s,
    )
    kept = random.getstate()
    try:
        with plan.clock.running():
            reference = plan.run(k=None, reference=None)
            runs = []
            for k in range(1, len(reference.steps) + 1):
                outcome = plan.run(k=k, reference=reference)
                after = reference.steps[k - 1]
                reason = _divergence(reference, outcome, task_id)
                if reason is not None:
                    raise ReplayDivergence(
                        reference.name, k, after, reason, suspended=outcome.suspended
                    ) from outcome.failure
                runs.append(ReplayRun(k, after, outcome.suspended, outcome.invocations))
    finally:
        random.setstate(kept)
    return ReplayReport(
        task=reference.name,
        status=reference.status,
        result=reference.result,
        steps=reference.steps,
        runs=runs,
    )


# -- one run ----------------------------------------------------------------------------------


@dataclass
class _Outcome:
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
class _Plan:
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
        # One clock for every run (starting freezegun costs tens of milliseconds), moved back
        # to the same start for each.
        self.clock = VirtualTime(self.start, tick=False)

    def run(self, *, k: int | None, reference: _Outcome | None) -> _Outcome:
        self.clock.move_to(self.start)
        random.seed(RANDOM_SEED)
        runner = TaskRunner(self.app, budget_s=self.budget_s, timeout_s=self.timeout_s)
        runner._clock = self.clock
        with runner:
            if reference is not None:
                runner.log.stand_in = _pinned(reference.steps, self.task_id)
            handle = runner.start(self.task, self.input, task_id=self.task_id)
            trip = _Trip(k, lambda: runner.log.finished(self.task_id))
            self._drain(runner, handle, trip)
            record = handle.record
            return _Outcome(
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
            if waits_for_outside(record):
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


class _Answers:
    """Answers a waiting task from the check's ``callbacks`` and ``signals``."""

    def __init__(self, callbacks: dict[str, Any], signals: dict[str, list[Any]]) -> None:
        self.callbacks = callbacks
        self.signals = {name: list(payloads) for name, payloads in signals.items()}
        self.sent: dict[str, int] = defaultdict(int)

    def give(self, runner: TaskRunner, record: TaskRecord) -> None:
        client = runner.client
        for waiter in record.waiting_for:
            if waiter.kind == WaitKind.CALLBACK and waiter.name in self.callbacks and waiter.id:
                answer = self.callbacks[waiter.name]
                if isinstance(answer, Failure):
                    client.fail_callback(waiter.id, answer.error_type, answer.message)
                else:
                    client.complete_callback(waiter.id, answer)
                return
            if waiter.kind == WaitKind.SIGNAL and self.signals.get(waiter.name):
                n = self.sent[waiter.name] = self.sent[waiter.name] + 1
                payload = self.signals[waiter.name].pop(0)
                # A fixed id: what a task does with the signal's id is the same in every run.
                client.signal(record.task_id, waiter.name, payload, signal_id=f"replay-{n}")
                return
        waits = ", ".join(f"{w.kind.value} {w.name!r}" for w in record.waiting_for)
        raise ConfigurationError(
            f"task {record.task_name!r} waits for {waits}, and check_replay_safe has no "
            "answer left for it",
            task_id=record.task_id,
            hint="pass callbacks={name: result or Failure(...)} or signals={name: [payload, ...]}",
        )


# -- comparing runs ---------------------------------------------------------------------------


def _pinned(reference: list[StepRun], task_id: str) -> Callable[[StepRun], StandInAnswer | None]:
    """A stand-in that answers each step with the reference's outcome for the same key and
    attempt, when it is called as the reference called it."""
    outcomes = {(r.turn, r.key, r.attempt): r for r in reference if r.done}

    def stand_in(run: StepRun) -> StandInAnswer | None:
        ref = outcomes.get((run.turn, run.key, run.attempt))
        if ref is None or ref.name != run.name or _call(ref, task_id) != _call(run, task_id):
            return None  # it runs for real; the comparison reports the difference
        return StandInAnswer(value=ref.value, error=ref.error)

    return stand_in


def _divergence(reference: _Outcome, run: _Outcome, task_id: str) -> str | None:
    """What differed between a run and the reference, in words; None if nothing did.

    A failure the reference did not have comes first (a NonDeterminismError says best what
    went wrong); then the first step call that differs; then the result.
    """
    ending = None
    if _ending(run) != _ending(reference):
        ending = f"it {_describe(run)} where the uninterrupted run {_describe(reference)}"
        if run.status == Status.FAILED:
            return ending
    return _step_difference(reference, run, task_id) or ending


def _step_difference(reference: _Outcome, run: _Outcome, task_id: str) -> str | None:
    expected: dict[tuple[int, str], list[StepRun]] = defaultdict(list)
    for ref in reference.steps:
        expected[ref.turn, ref.key].append(ref)
    seen: dict[tuple[int, str], int] = defaultdict(int)
    for step in run.steps:
        refs = expected.get((step.turn, step.key), [])
        seen[step.turn, step.key] += 1
        if not refs:
            return f"step {step.where} ran, which the uninterrupted run never called"
        if step.attempt > len(refs):
            return (
                f"step {step.where} ran {_times(step.attempt)} where the uninterrupted run "
                f"ran it {_times(len(refs))}: it was not replayed from the journal"
            )
        ref = refs[step.attempt - 1]
        if _call(step, task_id) != _call(ref, task_id):
            return (
                f"step {step.where} was called with {_quote(_call(step, task_id))} where the "
                f"uninterrupted run called it with {_quote(_call(ref, task_id))}"
            )
    for (turn, key), refs in expected.items():
        if seen[turn, key] < len(refs):
            return f"step {refs[0].where} was never called, though the uninterrupted run called it"
    return None


def _ending(outcome: _Outcome) -> tuple[Any, ...]:
    error = outcome.error
    return (outcome.status, outcome.result, error and (error.type, error.message))


def _describe(outcome: _Outcome) -> str:
    if outcome.status == Status.SUCCEEDED:
        return f"returned {_quote(outcome.result)}"
    error = outcome.error
    what = f"{error.type}: {error.message}" if error else "no error"
    return f"ended {outcome.status.value} ({_quote(what, quoted=False)})"


def _call(run: StepRun, task_id: str) -> Any:
    """A step's arguments in a form two runs can compare: models as their fields, callback
    ids (random per run) as a placeholder, objects without a value equality by their type."""
    return _canonical([list(run.args), run.kwargs], _callback_ids(task_id))


@functools.cache
def _callback_ids(task_id: str) -> re.Pattern[str]:
    """The callback ids of a task: its id, a dot, 32 hex digits (``mail.py``)."""
    return re.compile(rf"{re.escape(task_id)}\.[0-9a-f]{{32}}")


def _canonical(value: Any, callback_id: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        return "<callback id>" if callback_id.fullmatch(value) else value
    if isinstance(value, Signal):  # when it was sent is the world's business, not the task's
        return ("<signal>", value.name, value.id, _canonical(value.payload, callback_id))
    if isinstance(value, BaseModel):
        return (type(value).__qualname__, _canonical(dict(value), callback_id))
    if isinstance(value, Mapping):
        return {key: _canonical(item, callback_id) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item, callback_id) for item in value]
    if value is None or isinstance(value, bool | int | float | bytes):
        return value
    if getattr(type(value), "__eq__", None) is object.__eq__:  # equal only to itself
        return f"<{type(value).__qualname__}>"
    return value


def _quote(value: Any, *, quoted: bool = True) -> str:
    text = repr(value) if quoted else str(value)
    return text if len(text) <= MAX_QUOTE_CHARS else text[: MAX_QUOTE_CHARS - 3] + "..."


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
