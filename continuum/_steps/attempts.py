"""A live step call's attempts, written once as decisions without I/O.

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

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from continuum._base.clock import now_s
from continuum._define.steps import Step
from continuum._record.model import JournalEntry, StepStats
from continuum._steps.attempt_endings import (
    interrupted,
    paused,
    preempted,
    raised,
    retry_wait,
    unmark,
)
from continuum._steps.signals import Paused, Preempted
from continuum._steps.turn_state import TurnState

if TYPE_CHECKING:
    from continuum._steps.step_calls import StepCaller


class Sleep(NamedTuple):
    """Wait ``seconds`` in this invocation, then go on."""

    seconds: float


class Retry:
    """An attempt raised and is journaled; its retry follows."""

    __slots__ = ()


#: The failed attempt is journaled: a driver that must stop (its caller was cancelled)
#: stops here, before the backoff.
RETRY = Retry()

#: What the attempts ask of their driver.
Command: TypeAlias = "Step[Any, Any] | Retry | Sleep"
#: The attempts of one live call, as a driver steps through them: it yields commands, and
#: at last the value recorded.
Attempts: TypeAlias = Generator[Any, Any, None]


def attempts(
    steps: StepCaller,
    step: Step[Any, Any],
    key: str,
    resume: JournalEntry | None,
    wall: float,
) -> Attempts:
    """Run ``step``'s attempts until one returns, and record its value. ``resume``: the
    journal's unfinished entry of it; ``wall``: now, as the boundary before it read it."""
    state, options = steps.state, step.options
    # The budget check and the statistics, read here, not through StepCaller's methods: on
    # every step's path, those calls showed.
    stats = state.record.step_stats.get(options.name) or steps.stats(options.name)
    budget, preemptible = state.budget, options.preemptible
    # A step that is not done (paused, or between attempts) keeps its journal entry until
    # its next attempt starts, so a suspension before then loses neither.
    attempt, cursor, pending = 0, None, None
    if resume is not None:
        attempt, cursor, pending = yield from resumed(state, step, key, stats, resume)
        wall = now_s()  # after any backoff waited
    first = wall if resume is None or resume.since is None else resume.since
    while True:
        attempt += 1
        save_stats = state.record.save_stats
        refused = budget.refuse(options.name, stats, save_stats, preemptible=preemptible)
        if refused is not None:
            steps.refused(refused, stats, preemptible=preemptible)
        if pending is not None or state.record.recovering or options.at_most_once:
            pending, wall = steps.begin(step, key, attempt, pending, wall)
        if state.observers is not None:
            state.step_started(
                key, options.name, attempt, wall, replay=resume is not None, first=first
            )
        record = state.record
        state.active_key = f"{record.task_id}/{record.turn}/{state.path}{key}"
        state.active_cursor = cursor
        started = state.clock()
        try:
            value = yield step
        except Preempted:
            took = round(state.clock() - started, 6)
            state.log_step(key, wall, took, attempt, "preempted", name=step.name)
            raise preempted(state, key, stats, started) from None
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
        yield steps.record_value(step, key, value, stats, started, attempt, wall, pending)
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
