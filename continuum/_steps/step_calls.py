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

from typing import Any

from continuum._base import clock
from continuum._base.clock import now_s
from continuum._base.json_values import from_json
from continuum._define.steps import Step
from continuum._steps.attempt_endings import step_error
from continuum._steps.attempts import Attempts, Sleep, attempts, check_budget, stats_of
from continuum._steps.budget import observe
from continuum._steps.turn_state import TurnState


class Replayed:
    """A step call the journal answered: the value it returns."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


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
        lock = state.scope.lock
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
                    try:
                        with state.unlocked():
                            clock.sleep(command.seconds)
                    except BaseException as exc:  # it leaves through the attempts' finally
                        command = live.throw(exc)
                    else:
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
            state.scope.record.counters.steps_replayed += 1
            if not entry.ok:
                raise step_error(state, entry.error, key)
            return Replayed(from_json(step.adapter, entry.result))
        if state.halt is not None:  # a branch of a batch, or an asyncio task of a turn
            state.halt_check()
        wall = now_s()
        # boundary()'s own test first: on every step's path, its call showed.
        due = wall - state.scope.inbox.listed_at >= state.scope.settings.inbox_poll_s
        if due or state.scope.record.cancel is not None:
            wall = state.boundary(reopen=entry is not None)
        if state.scope.step_wrapper is not None:
            step = state.scope.step_wrapper(step, state)
        return attempts(state, step, key, entry, wall)

    # -- work that is not a step (creating child tasks), under the same budget -------------------

    def check_work(self, name: str) -> None:
        """Suspend before a unit of framework work that will not fit, as before a step."""
        check_budget(self.state, name, stats_of(self.state, name), preemptible=False)

    def observe_work(self, name: str, seconds: float) -> None:
        """Note how long a unit of framework work took, as for a step."""
        observe(stats_of(self.state, name), seconds)


def run_preemptible(
    state: TurnState, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """One attempt of a preemptible sync step in this thread, under its time limit."""
    limit = state.scope.budget.preempt_after(state.scope.record.save_stats)
    return state.scope.preemptor(lambda: step.fn(*args, **kwargs), limit)
