"""Step calls inside a turn: replay from the journal, or run live under the budget.

For each call: take its key; if the journal recorded it, return the recorded outcome (the
same Python type a live call returns: both are rebuilt from the JSON); otherwise resume what
the journal kept of it (a paused step's cursor, a retry's backoff), run its attempts under the
budget (attempts and their waits are journaled, so retries count across invocations), and
record its value as JSON, saving by policy. The attempts are decided once, in ``attempts.py``
(this module drives them in a sync task, ``async_step_calls`` in an async one); what becomes
of an attempt that does not return is in ``attempt_endings.py``.
"""

from __future__ import annotations

import inspect
import time
from typing import Any, NamedTuple

from continuum._base.clock import now_s
from continuum._base.json_values import from_json, own_json, to_json
from continuum._define.steps import Step
from continuum._record.model import ErrorInfo, JournalEntry, StepStats
from continuum._record.recovery import mark_step
from continuum._steps.attempt_endings import failed, step_error, unmark
from continuum._steps.attempts import Attempts, Sleep, attempts
from continuum._steps.budget import observe
from continuum._steps.signals import Abort, Suspend
from continuum._steps.turn_state import TurnState
from continuum.errors import UnserializableValueError


class Replayed(NamedTuple):
    """A step call the journal answered: the value it returns."""

    value: Any


class StepCaller:
    """The step calls of one turn or child context, on its state."""

    __slots__ = ("state",)

    def __init__(self, state: TurnState) -> None:
        self.state = state

    def call(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any], key: str | None
    ) -> Any:
        """Call ``step``: its recorded outcome on replay, else run it live."""
        state = self.state
        if state.unwinding is not None:
            raise state.unwinding  # user code caught it: it still unwinds, and is noticed
        if state.active_key is not None:
            return step.run_nested(args, kwargs)
        lock = state.lock
        with lock:  # the record is shared with the branches of a batch, if any
            live = self.open(step, key)
            if isinstance(live, Replayed):
                return live.value
            # Carry out its attempts here, the lock held but around each attempt and backoff.
            command = next(live)
            while True:
                if isinstance(command, Step):
                    lock.release()  # state.unlocked(), spelled out: on every step's path, it showed
                    try:
                        if command.options.preemptible:
                            value = run_preemptible(state, command, args, kwargs)
                        else:
                            value = command.fn(*args, **kwargs)
                    except BaseException as exc:
                        lock.acquire()
                        command = live.throw(exc)
                    else:
                        lock.acquire()
                        return live.send(value)
                elif isinstance(command, Sleep):
                    with state.unlocked():
                        time.sleep(command.seconds)
                    command = next(live)
                else:  # a retry: nothing to do before its backoff
                    command = next(live)

    def open(self, step: Step[Any, Any], key: str | None) -> Replayed | Attempts:
        """Take the call's key: its recorded outcome (raised, if the step failed), or its
        attempts, to drive. Called with the lock held."""
        state = self.state
        journal = state.journal
        replaying = journal.position < len(journal.entries)
        if replaying:
            state.replay_cancel()
        name = step.options.name
        key = journal.key_for(name, key, state.path)
        entry = journal.replay(name, key) if replaying else None
        if entry is not None and not entry.partial:
            state.record.counters.steps_replayed += 1
            if not entry.ok:
                raise step_error(state, entry.error, key)
            return Replayed(from_json(step.adapter, entry.result))
        if state.halt is not None:  # a branch of a batch, or an asyncio task of a turn
            state.halt_check()
        wall = now_s()
        # boundary()'s own test first: on every step's path, its call showed.
        due = wall - state.inbox.listed_at >= state.inbox_poll_s
        if due or state.record.cancel is not None:
            wall = state.boundary(reopen=entry is not None)
        if state.step_wrapper is not None:
            step = state.step_wrapper(step, state)
        return attempts(self, step, key, entry, wall)

    def begin(
        self,
        step: Step[Any, Any],
        key: str,
        attempt: int,
        pending: JournalEntry | None,
        wall: float,
    ) -> tuple[JournalEntry | None, float]:
        """Before attempt ``attempt`` of a step resumed, in recovery or at most once: reopen its
        unfinished entry, and save what must be saved first. Returns the entry to take back
        when the attempt ends, and now."""
        state, options = self.state, step.options
        if pending is not None:
            state.journal.reopen()
            pending = None
        if state.record.recovering:
            self._mark_start(key)
            wall = now_s()
        if options.at_most_once:
            # Saved before the step runs: if its worker dies inside it, it is not rerun.
            pending = JournalEntry(key, options.name, attempts=attempt, partial=True, started=True)
            state.append(pending)
            state.save_strict()
            wall = now_s()
        return pending, wall

    def record_value(
        self,
        step: Step[Any, Any],
        key: str,
        value: Any,
        stats: StepStats,
        started: float,
        attempt: int,
        wall: float,
        pending: JournalEntry | None,
    ) -> Any:
        """Journal the value an attempt returned, as JSON; save by policy; return the value
        as a replay would rebuild it."""
        state = self.state
        record, name = state.record, step.options.name
        elapsed = state.clock() - started
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
                error = ErrorInfo(
                    type=type(exc).__name__, message=message, step=key, turn=record.turn
                )
                raise failed(state, step, key, attempt, elapsed, error) from exc
        entry = JournalEntry(
            key, name, ok=True, result=result, duration_s=elapsed, attempts=attempt
        )
        if state.observers is not None:  # when it began: what an observer of the record reads
            entry.since = pending.since if pending is not None and pending.since else wall
        state.journal.append(entry)
        state.progress = True
        if state.invocation is not None or state.observers is not None:
            state.log_step(key, wall, elapsed, attempt, "ok", name=name, result=result)
        record.counters.steps_executed += 1
        if step.options.effect or state.clock() - state.last_save >= state.persist_every_s:
            state.save()
            state.last_save = state.clock()
        return from_json(adapter, result) if rebuild else value

    # -- work that is not a step (creating child tasks), under the same budget -------------------

    def check_work(self, name: str) -> None:
        """Suspend before a unit of framework work that will not fit, as before a step."""
        self.check_budget(name, self.stats(name), preemptible=False)

    def observe_work(self, name: str, seconds: float) -> None:
        """Note how long a unit of framework work took, as for a step."""
        observe(self.stats(name), seconds)

    # -- pieces ----------------------------------------------------------------------------------

    def stats(self, name: str) -> StepStats:
        """The step's (or the unit of work's) statistics in the record, made at its first use."""
        all_stats = self.state.record.step_stats
        stats = all_stats.get(name)
        if stats is None:
            stats = all_stats[name] = StepStats()
        return stats

    def check_budget(self, name: str, stats: StepStats, *, preemptible: bool) -> None:
        """Suspend before a step (or a unit of work) that will not fit in this invocation."""
        state = self.state
        reason = state.budget.refuse(name, stats, state.record.save_stats, preemptible=preemptible)
        if reason is not None:
            self.refused(reason, stats, preemptible=preemptible)

    def refused(self, reason: str, stats: StepStats, *, preemptible: bool) -> None:
        """The budget refused a step for ``reason``: suspend, unless suspending could only
        loop."""
        state = self.state
        save_stats = state.record.save_stats
        if state.progress:
            raise state.unwind(Suspend(reason))
        # Nothing done yet in this invocation. Suspend only if a fresh invocation would have
        # the time and the last one did not already suspend idle; otherwise suspending could
        # only loop, so run the step and let the deadline judge.
        fresh = state.record.invocation_budget_s
        need = state.budget.need(stats, save_stats, preemptible=preemptible)
        if state.record.idle_suspensions == 0 and need <= fresh:
            raise state.unwind(Suspend(f"{reason}; a fresh invocation has {fresh:.2f}s"))

    def _mark_start(self, key: str) -> None:
        """In recovery: save which step starts now, or fail if it keeps killing its worker."""
        state = self.state
        error = mark_step(state.record, state.journal.position, key, state.max_step_crashes)
        if error is not None:
            raise state.unwind(Abort(error))
        state.save()


def run_preemptible(
    state: TurnState, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """One attempt of a preemptible sync step in this thread, under its time limit."""
    limit = state.budget.preempt_after(state.record.save_stats)
    return state.preemptor(lambda: step.fn(*args, **kwargs), limit)
