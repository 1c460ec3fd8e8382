"""Waits inside a turn: the template every wait kind enters through, and the delivery of a
cancel request.

A wait is journaled like a step: its key is its name and its ordinal in the turn, and its
deadline is computed once, when it is first reached, and kept in the entry, so a replayed wait
uses the recorded deadline, never the clock at replay. A wait that can be answered now (the
deadline passed, what answers it is in the inbox) records its outcome and returns; one that
cannot leaves a ``partial`` entry and unwinds the turn with :class:`Wait`; the worker writes
the record ``waiting`` and a continuation delayed to the deadline (or none), and what arrives
earlier wakes it sooner. Each kind's own part (sleep, callbacks, signals) is its module in
``continuum._waits.kinds``; :class:`WaitCaller` holds what they share (enter, done, wait).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from continuum._base import clock
from continuum._base.clock import now_s
from continuum._define.callbacks import Callback
from continuum._define.steps import active_runner
from continuum._record.model import EntryKind, JournalEntry
from continuum._record.waiting_for import Duration, Waiter
from continuum._steps.control_flow import Suspend, Wait
from continuum._steps.turn_state import TurnState
from continuum._waits.kinds import callback_wait as callback_kind
from continuum._waits.kinds import time_wait as time_kind
from continuum._waits.kinds.registry import BY_ENTRY
from continuum.errors import ContinuumError, TaskCancelledError

if TYPE_CHECKING:
    from continuum._define.events import WaitEnded, WaitStarted
    from continuum._record.model import TaskRecord
    from continuum._steps.task_inbox import TaskInbox
    from continuum._waits.kinds.template import Caller

P = ParamSpec("P")
T = TypeVar("T")

#: Before deciding that a wait cannot be answered now, the inbox is listed again if the last
#: listing is older than this (the worker lists once more after writing ``waiting`` anyway).
INBOX_FRESH_S = 2.0


class WaitCaller:
    """The waits of one turn or child context, on its state."""

    __slots__ = ("reached_at", "state")

    def __init__(self, state: TurnState) -> None:
        self.state = state
        #: when the wait being entered was first reached (epoch s; 0: it was reached earlier).
        self.reached_at = 0.0

    @property
    def task_id(self) -> str:
        return self.state.scope.record.task_id

    # -- what a kind's module may use of the turn (``template.Caller``) ---------------------------

    @property
    def record(self) -> TaskRecord:
        return self.state.scope.record

    @property
    def inbox(self) -> TaskInbox:
        return self.state.scope.inbox

    def remaining(self) -> float:
        return self.state.scope.budget.remaining()

    def save(self) -> None:
        try:
            self.state.scope.save_strict()
        except Suspend as signal:
            raise self.state.unwind(signal) from None

    # -- the waits, each with the record to itself (branches of a batch share it) -----------------

    def run(
        self, enter: Callable[Concatenate[Caller, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Enter a wait of a kind (its module's ``enter``) under the turn's lock."""
        with self.state.scope.lock:
            self.state.halt_check()
            return enter(self, *args, **kwargs)

    def sleep(self, duration: Duration, name: str | None) -> None:
        with self.state.scope.lock:
            self.state.halt_check()
            short = time_kind.enter(self, duration, name)
            if short is not None:  # slept in place
                entry, seconds = short
                with self.state.unlocked():
                    clock.sleep(seconds)
                self.done(entry)

    async def sleep_async(self, duration: Duration, name: str | None) -> None:
        """``sleep`` in an async task: a short sleep in place is awaited."""
        with self.state.scope.lock:
            self.state.halt_check()
            short = time_kind.enter(self, duration, name)
        if short is not None:
            entry, seconds = short
            await clock.sleep_async(seconds)
            with self.state.scope.lock:
                self.done(entry)

    def create_callback(
        self, name: str | None, timeout: Duration | None, heartbeat: Duration | None, request: Any
    ) -> Callback:
        return self.run(callback_kind.create, name, timeout, heartbeat, request)

    def callback_result(self, callback: Callback) -> Any:
        """``callback.result()``, journaled in the context that awaits it (a branch or an
        asyncio task of the turn), which need not be the one that made the callback: each
        context's calls come in its own order, replayed the same."""
        runner = active_runner.get()
        if runner is not None and runner.task_id == self.task_id:
            return runner.callback_result(callback)
        return self.result_here(callback)

    def result_here(self, callback: Callback) -> Any:
        """``callback.result()`` journaled in this context."""
        return self.run(callback_kind.result, callback)

    def callback_url(self, callback: Callback) -> str | None:
        links = self.state.scope.links
        if links is None:
            return None
        return links.url(self.task_id, callback.token)

    # -- the template each kind's ``enter`` follows ------------------------------------------------

    def enter(self, name: str, kind: str) -> tuple[str, JournalEntry | None]:
        """Start a wait: its key, and its entry (None: first reached; partial: not answered)."""
        if self.state.active_key is not None:
            raise self.state.refuse(self._inside_a_step(name, kind))
        self.state.replay_cancel()
        key = self.state.journal.key_for(name, None)
        entry = self.state.journal.replay(name, key)
        if entry is None or entry.partial:
            try:
                now = self.state.boundary(reopen=entry is not None)  # a wait reached live
            except TaskCancelledError:
                if entry is not None and kind != EntryKind.CALLBACK and self.state.scope.observers:
                    # the cancel takes the unanswered wait's place: it ends here
                    ended = wait_ended(self.state, entry, 0.0, outcome="cancelled")
                    self.state.emit("wait_ended", ended)
                raise
            self.reached_at = 0.0 if entry is not None else now
            if entry is not None:
                self.state.journal.reopen()
            elif kind != EntryKind.CALLBACK and self.state.scope.observers is not None:
                self.state.emit("wait_started", wait_event(self.state, kind, name, key, now))
        elif entry.kind != kind:
            raise ContinuumError(
                f"turn {self.state.scope.record.turn} reached a {kind} wait where the journal "
                f"recorded a {entry.kind}",
                task_id=self.state.scope.record.task_id,
                step=key,
            )
        return key, entry

    def _inside_a_step(self, name: str, kind: str) -> ContinuumError:
        step = (self.state.active_key or "").rsplit("/", 1)[-1]
        return ContinuumError(
            f"a {kind} wait {name!r} was reached inside step {step!r}: a step's work "
            "cannot wait (its journal entry is the step's result)",
            task_id=self.state.scope.record.task_id,
            step=step,
            hint="wait in the task's code, between steps; a step that needs an answer from "
            "outside is a callback the task waits for (ctx.wait_for_callback)",
        )

    def done(self, entry: JournalEntry) -> None:
        entry.partial = False
        self.state.append(entry)
        if entry.kind != EntryKind.CALLBACK and self.state.scope.observers is not None:
            self.state.emit("wait_ended", wait_ended(self.state, entry, self.reached_at))

    def wait(self, entry: JournalEntry, waiter: Waiter, reason: str) -> Wait:
        """Leave the unanswered wait in the journal and unwind the turn to wait."""
        if entry.since is None:
            entry.since = self.reached_at or None
        entry.partial = True
        self.state.journal.append(entry)
        return self.state.unwind(Wait([waiter], reason))

    def listing_fresh(self) -> None:
        if now_s() - self.state.scope.inbox.listed_at > INBOX_FRESH_S:
            self.state.note_inbox()


def wait_event(state: TurnState, kind: str, label: str, key: str, now: float) -> WaitStarted:
    """The event of a wait first reached at ``now`` (``kind``: its journal entry's)."""
    operation = BY_ENTRY.get(kind)
    from continuum._define.events import WaitStarted

    if operation is None:  # not a kind's wait: shown by its entry
        return WaitStarted(state.task_id, kind, label, state.path + key, state.turn, now)
    name = operation.named(label)
    return WaitStarted(state.task_id, operation.event, name, state.path + key, state.turn, now)


def wait_ended(
    state: TurnState, entry: JournalEntry, reached_at: float, *, outcome: str | None = None
) -> WaitEnded:
    """The event of a wait answered now (``reached_at``: when it was reached, if in this call;
    ``outcome``: how it ended, if not by its entry's answer)."""
    now = now_s()
    kind = entry.kind
    started = entry.since or reached_at or now
    event = wait_event(state, kind, entry.name, entry.key, started)
    error = entry.error
    if outcome is None:
        outcome = "ok" if error is None else "timeout" if "Timeout" in error.type else "failed"
    from continuum._define.events import WaitEnded

    return WaitEnded(
        event.task_id,
        event.kind,
        event.name,
        event.key,
        event.turn,
        started,
        now,
        outcome,
        error.message if error is not None else None,
        state.began_earlier(started),
    )
