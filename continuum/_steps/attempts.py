"""A live step call's attempts, written once as decisions without I/O: the budget check
before each, the saves an attempt needs first (``begin``), and the value's record
(``record_value``).

:func:`attempts` is a generator that says what to do and is told what came of it. It yields:

1. a :class:`~continuum._define.steps.Step`: run one attempt of it (with the call's
   arguments), then send back the value it returned (its answer, and last word, is that
   value as recorded: as a replay rebuilds it), or throw in what it raised;
2. :data:`RETRY`: the attempt raised, its failure is journaled and a retry follows: send back
   None to go on, or throw in why the call stops here;
3. :class:`Sleep`: wait this long (a retry's backoff), then send back None.

A call that does not end with a value ends with what the generator raises (failed,
suspended, preempted, paused: ``attempt_endings``). A sync task's driver
(``step_calls``) calls each attempt and sleeps each wait; an async task's
(``async_step_calls``) awaits them: the same decisions in both, by construction.
"""

from __future__ import annotations

import inspect
from asyncio import CancelledError
from collections.abc import Generator
from typing import Any, TypeAlias

from continuum._base.clock import now_s
from continuum._base.json_values import from_json, own_json, to_json
from continuum._define.steps import Step
from continuum._record.model import ErrorInfo, JournalEntry, StepStats
from continuum._record.recovery import mark_step
from continuum._steps.attempt_endings import (
    failed,
    interrupted,
    paused,
    preempted,
    raised,
    retry_wait,
    unmark,
)
from continuum._steps.budget import observe
from continuum._steps.control_flow import Abort, Paused, Preempted, Suspend
from continuum._steps.turn_state import TurnState
from continuum.errors import UnserializableValueError


class Sleep:
    """Wait ``seconds`` in this invocation, then go on."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class Retry:
    """An attempt raised and is journaled; its retry follows."""

    __slots__ = ()


#: The failed attempt is journaled: a driver that must stop (its caller was cancelled)
#: stops here, before the backoff.
RETRY = Retry()

#: The attempts of one live call, as a driver steps through them: it yields commands, and
#: at last the value recorded.
Attempts: TypeAlias = Generator[Any, Any, None]


def attempts(
    state: TurnState,
    step: Step[Any, Any],
    key: str,
    resume: JournalEntry | None,
    wall: float,
) -> Attempts:
    """Run ``step``'s attempts until one returns, and record its value. ``resume``: the
    journal's unfinished entry of it; ``wall``: now, as the boundary before it read it."""
    options = step.options
    # The statistics and the budget's verdict read inline, not through stats_of and
    # check_budget: on every step's path, those calls showed.
    stats = state.scope.record.step_stats.get(options.name) or stats_of(state, options.name)
    budget, preemptible = state.scope.budget, options.preemptible
    # A step that is not done (paused, or between attempts) keeps its journal entry until
    # its next attempt starts, so a suspension before then loses neither.
    attempt, cursor, pending = 0, None, None
    if resume is not None:
        attempt, cursor, pending = yield from resumed(state, step, key, stats, resume)
        wall = now_s()  # after any backoff waited
    first = wall if resume is None or resume.since is None else resume.since
    while True:
        attempt += 1
        save_stats = state.scope.record.save_stats
        reason = budget.refuse(options.name, stats, save_stats, preemptible=preemptible)
        if reason is not None:
            refused(state, reason, stats, preemptible=preemptible)
        if pending is not None or state.scope.record.recovering or options.at_most_once:
            pending, wall = begin(state, step, key, attempt, pending, wall)
        if state.scope.observers is not None:
            state.step_started(
                key, options.name, attempt, wall, replay=resume is not None, first=first
            )
        record = state.scope.record
        state.active_key = f"{record.task_id}/{record.turn}/{state.path}{key}"
        state.active_cursor = cursor
        started = state.scope.clock()
        try:
            value = yield step
        except Preempted:
            took = round(state.scope.clock() - started, 6)
            state.log_step(key, wall, took, attempt, "preempted", name=step.name)
            raise preempted(state, key, stats, started) from None
        except CancelledError:  # its asyncio task was cancelled mid-attempt: nothing recorded
            took = round(state.scope.clock() - started, 6)
            state.log_step(key, wall, took, attempt, "cancelled", name=step.name)
            raise
        except Paused as pause:
            unmark(state, pending)
            raise paused(
                state, step, key, stats, started, attempt, wall, pause.cursor, since=first
            ) from None
        except Exception as exc:
            unmark(state, pending)
            pending = raised(state, step, key, stats, started, attempt, wall, exc, since=first)
            yield RETRY
            yield from backoff(state, key, stats, pending)
            wall = now_s()  # the backoff is over: the next attempt starts now
            continue
        finally:
            state.active_key = None
            state.active_cursor = None
            if record.running_step is not None:
                record.running_step = None
        # Its last word, yielded, not returned: a StopIteration on every step's path showed.
        yield record_value(state, step, key, value, stats, started, attempt, wall, pending, first)
        return


def resumed(
    state: TurnState, step: Step[Any, Any], key: str, stats: StepStats, resume: JournalEntry
) -> Generator[Sleep, None, tuple[int, Any, JournalEntry | None]]:
    """Where an unfinished step goes on: (attempts made, cursor, the entry to reopen), after
    any backoff it still owes."""
    if resume.started:
        # An at_most_once step whose worker died after it started: never run it again.
        retry = interrupted(state, step, key, resume)
        yield from backoff(state, key, stats, retry)
        return resume.attempts, None, retry
    if resume.retry_at is not None:
        yield from backoff(state, key, stats, resume)
        return resume.attempts, None, resume
    return resume.attempts - 1, resume.cursor, resume


def backoff(
    state: TurnState, key: str, stats: StepStats, entry: JournalEntry
) -> Generator[Sleep, None, None]:
    """Wait for a retry's backoff here if it fits, else suspend for it (``retry_wait``)."""
    wait = retry_wait(state, key, stats, entry)
    if wait > 0:
        yield Sleep(wait)


def begin(
    state: TurnState,
    step: Step[Any, Any],
    key: str,
    attempt: int,
    pending: JournalEntry | None,
    wall: float,
) -> tuple[JournalEntry | None, float]:
    """Before attempt ``attempt`` of a step resumed, in recovery or at most once: reopen its
    unfinished entry, and save what must be saved first. Returns the entry to take back
    when the attempt ends, and now."""
    options = step.options
    if pending is not None:
        state.journal.reopen()
        pending = None
    if state.scope.record.recovering:
        mark_start(state, key)
        wall = now_s()
    if options.at_most_once:
        # Saved before the step runs: if its worker dies inside it, it is not rerun.
        pending = JournalEntry(key, options.name, attempts=attempt, partial=True, started=True)
        state.append(pending)
        state.scope.save_strict()
        wall = now_s()
    return pending, wall


def record_value(
    state: TurnState,
    step: Step[Any, Any],
    key: str,
    value: Any,
    stats: StepStats,
    started: float,
    attempt: int,
    wall: float,
    pending: JournalEntry | None,
    first: float | None = None,
) -> Any:
    """Journal the value an attempt returned, as JSON; save by policy; return the value
    as a replay would rebuild it. ``first``: when its first attempt started."""
    record, name = state.scope.record, step.options.name
    elapsed = state.scope.clock() - started
    observe(stats, elapsed)
    elapsed = round(elapsed, 6)
    if pending is not None:
        unmark(state, pending)
    adapter, typed = step._adapter or step.typing()
    # A scalar that the adapter takes and writes as it is (an int of a step declared
    # `-> int`) is its own JSON and its own rebuild: it is recorded and returned as it is.
    rebuild = type(value) not in own_json(adapter)
    result = value
    if rebuild:
        try:
            result = to_json(
                adapter,
                value,
                what=f"the result of step {key!r}",
                task_id=record.task_id,
                typed=typed,
            )
        except UnserializableValueError as exc:
            message = exc.message
            if inspect.iscoroutine(value):  # an async def called where nothing awaits it
                value.close()
                message = (
                    f"step {key!r} returned a coroutine: it is async def, so call it with "
                    "await in an async task (ctx.step_async, or the step itself)"
                )
            error = ErrorInfo(type=type(exc).__name__, message=message, step=key, turn=record.turn)
            raise failed(state, step, key, attempt, elapsed, error) from exc
    entry = JournalEntry(key, name, ok=True, result=result, duration_s=elapsed, attempts=attempt)
    if state.scope.observers is not None:  # when it began: what an observer of the record reads
        entry.since = first or wall
    state.journal.append(entry)
    state.progress = True
    if state.scope.invocation is not None or state.scope.observers is not None:
        state.log_step(key, wall, elapsed, attempt, "ok", name=name, result=result)
    record.counters.steps_executed += 1
    if (
        step.options.effect
        or state.scope.clock() - state.last_save >= state.scope.settings.persist_every_s
    ):
        state.scope.save()
        state.last_save = state.scope.clock()
    return from_json(adapter, result) if rebuild else value


def stats_of(state: TurnState, name: str) -> StepStats:
    """The step's (or the unit of work's) statistics in the record, made at its first use."""
    all_stats = state.scope.record.step_stats
    stats = all_stats.get(name)
    if stats is None:
        stats = all_stats[name] = StepStats()
    return stats


def check_budget(state: TurnState, name: str, stats: StepStats, *, preemptible: bool) -> None:
    """Suspend before a step (or a unit of work) that will not fit in this invocation."""
    reason = state.scope.budget.refuse(
        name, stats, state.scope.record.save_stats, preemptible=preemptible
    )
    if reason is not None:
        refused(state, reason, stats, preemptible=preemptible)


def refused(state: TurnState, reason: str, stats: StepStats, *, preemptible: bool) -> None:
    """The budget refused a step for ``reason``: suspend, unless suspending could only
    loop."""
    save_stats = state.scope.record.save_stats
    if state.progress:
        raise state.unwind(Suspend(reason))
    # Nothing done yet in this invocation. Suspend only if a fresh invocation would have
    # the time and the last one did not already suspend idle; otherwise suspending could
    # only loop, so run the step and let the deadline judge.
    fresh = state.scope.record.invocation_budget_s
    fits = state.scope.budget.fits_fresh(fresh, stats, save_stats, preemptible=preemptible)
    if state.scope.record.idle_suspensions == 0 and fits:
        raise state.unwind(Suspend(f"{reason}; a fresh invocation has {fresh:.2f}s"))


def mark_start(state: TurnState, key: str) -> None:
    """In recovery: save which step starts now, or fail if it keeps killing its worker."""
    error = mark_step(
        state.scope.record, state.journal.position, key, state.scope.settings.max_step_crashes
    )
    if error is not None:
        raise state.unwind(Abort(error))
    state.scope.save()
