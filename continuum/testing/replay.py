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

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from continuum._app.app import Continuum
from continuum._record.model import Status
from continuum.testing.observe import StandIn, StepRun
from continuum.testing.replay_diff import divergence, pinned
from continuum.testing.replay_run import Failure, Plan, ReadyAnswer, RunEnding
from continuum.testing.runner import TaskRef

__all__ = [
    "DEFAULT_TASK_ID",
    "Failure",
    "ReadyAnswer",
    "ReplayDivergence",
    "ReplayReport",
    "ReplayRun",
    "check_replay_safe",
]

#: The task id of every run (a task may put its id into its result).
DEFAULT_TASK_ID = "replay-check"


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
    waits: a callback by its name from ``callbacks`` (a result, a :class:`Failure`, or a
    :class:`ReadyAnswer` of the callback's request), a
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
    plan = Plan(
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
            reference = plan.run(k=None)
            runs = _suspended_runs(plan, reference)
    finally:
        random.setstate(kept)
    return ReplayReport(
        task=reference.name,
        status=reference.status,
        result=reference.result,
        steps=reference.steps,
        runs=runs,
    )


def _suspended_runs(plan: Plan, reference: RunEnding) -> list[ReplayRun]:
    """Run the task again suspended after each of the reference's live steps in turn, each
    step answered with the reference's outcome."""
    stand_in = pinned(reference.steps, plan.task_id)
    return [
        _suspended_run(plan, reference, stand_in, k) for k in range(1, len(reference.steps) + 1)
    ]


def _suspended_run(plan: Plan, reference: RunEnding, stand_in: StandIn, k: int) -> ReplayRun:
    """The run suspended after its k-th live step, which must end and step as the reference.

    Raises:
        ReplayDivergence: it did not; the message says what differed first.
    """
    run = plan.run(k=k, stand_in=stand_in)
    after = reference.steps[k - 1]
    reason = divergence(reference, run, plan.task_id)
    if reason is not None:
        raise ReplayDivergence(
            reference.name, k, after, reason, suspended=run.suspended
        ) from run.failure
    return ReplayRun(k, after, run.suspended, run.invocations)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
