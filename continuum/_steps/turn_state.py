"""What the step calls and the waits of one turn loop share: the record, the budget, the
journal, the inbox, the saves, and the boundaries where a cancel request is delivered.

``calls.StepCalls`` and ``waits.WaitCalls`` build on it; ``turns.TurnLoop`` is both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from continuum._base.clock import now_s
from continuum._define.observers import Observers, StepEnded, StepStarted
from continuum._define.settings import DEFAULT_INBOX_POLL_S, DEFAULT_MAX_STEP_CRASHES
from continuum._record.history import InvocationRun, StepRun
from continuum._record.inbox import Listing, TaskInbox
from continuum._record.model import EntryKind, JournalEntry, TaskRecord
from continuum._record.waiting_for import CancelState
from continuum._steps.budget import Budget, Preemptor, alarm_preemptor
from continuum._steps.journal import Journal
from continuum._steps.signals import ControlFlow
from continuum.errors import ContinuumError, TaskCancelledError

C = TypeVar("C", bound=ControlFlow)


class Halt(threading.Event):
    """Tells the branches of a batch to stop at their next boundary, and why."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = ""
        self.cancelled = False

    def stop(self, reason: str, *, cancelled: bool = False) -> None:
        if not self.is_set():
            self.reason, self.cancelled = reason, cancelled
            self.set()

    def signal(self) -> ControlFlow:
        from continuum._steps.signals import Suspend

        return Suspend(f"another branch stopped the batch: {self.reason}")


class Unlocked:
    """``with unlocked:`` releases a held lock for the block and takes it back after. A class,
    not a generator: a ``contextmanager`` costs a few µs. (A step's own call releases the lock
    inline: on every step's path, even these two method calls showed.)"""

    __slots__ = ("lock",)

    def __init__(self, lock: threading.RLock) -> None:
        self.lock = lock

    def __enter__(self) -> None:
        self.lock.release()

    def __exit__(self, *exc: object) -> None:
        self.lock.acquire()


class TurnState:
    """The state of one task's turns inside one invocation.

    Args:
        record: the claimed record; its snapshot, journal, stats and counters are updated.
        budget: the time rule of this invocation.
        save: saves the record now (compare-and-swap); called by the persistence policy.
            Raises ``Fenced`` when another worker moved the record.
        save_strict: saves the record now or raises (``Suspend``): for what must be stored
            before the task goes on (a callback's id). Default: ``save``.
        inbox: the task's inbox (default: none, as in unit tests without a store).
        persist_every_s: save the journal at least this often while steps complete.
        max_step_crashes: worker deaths at one step after which the task fails.
        preemptor: runs a preemptible step with a time limit (default: SIGALRM).
        inbox_poll_s: while the task runs, list its inbox this often (for cancel requests).
        invocation: this invocation's entry in the task's history (live steps are logged in
            it).
    """

    def __init__(
        self,
        record: TaskRecord,
        budget: Budget,
        save: Callable[[], None],
        *,
        save_strict: Callable[[], None] | None = None,
        inbox: TaskInbox | None = None,
        persist_every_s: float,
        max_step_crashes: int = DEFAULT_MAX_STEP_CRASHES,
        preemptor: Preemptor = alarm_preemptor,
        inbox_poll_s: float = DEFAULT_INBOX_POLL_S,
        invocation: InvocationRun | None = None,
        observers: Observers | None = None,
    ) -> None:
        self.record = record
        self.budget = budget
        self.save = save
        self.save_strict = save_strict or save
        checked = record.inbox_checked_at or record.created_at.timestamp()
        self.inbox = inbox or TaskInbox(None, record.task_id, checked_at=checked)
        self.inbox_poll_s = inbox_poll_s
        self.invocation = invocation
        #: the worker's observers, when any wants step events (else None: the hot path).
        self.observers = observers if observers is not None and observers.steps else None
        # In recovery (after a worker died), save after every step so a death names its step.
        self.persist_every_s = 0.0 if record.recovering else persist_every_s
        self.max_step_crashes = max_step_crashes
        self.preemptor = preemptor
        self.journal = Journal(record.journal, task_id=record.task_id, turn=record.turn)
        self.thread_id = threading.get_ident()
        self.active_key: str | None = None
        self.active_cursor: Any = None
        #: a step ran, a step failed, a wait was answered or a turn completed here.
        self.progress = False
        self.last_save = time.monotonic()
        #: the control-flow exception unwinding this turn (a swallowed one is detected).
        self.unwinding: BaseException | None = None
        #: an error that fails this turn whatever user code does with it.
        self.refused: ContinuumError | None = None
        #: guards the record while the branches of a batch run in threads (``fanout.py``).
        self.lock = threading.RLock()
        self._unlocked = Unlocked(self.lock)
        #: where in the journal tree this runner records: "" (the turn), or a child
        #: context's path ("search#0/"), which prefixes its steps' idempotency keys.
        self.path = ""
        #: set by a batch when its branches must stop at their next boundary.
        self.halt: Halt | None = None
        #: starts child tasks (``children.ChildTasks``; given by the worker).
        self.children: Any = None
        #: for test helpers: ``wrap(step, runner)`` gives the step a live call runs instead
        #: (``continuum.testing`` notes each execution, or answers it in the step's place).
        self.step_wrapper: Callable[[Any, Any], Any] | None = None

    def unlocked(self) -> Unlocked:
        """Let the other branches at the record while this one runs user code or sleeps."""
        return self._unlocked

    def halt_check(self) -> None:
        """A branch of a batch stops at a boundary once the batch must suspend or stop."""
        halt = self.halt
        if halt is not None and halt.is_set():
            raise self.unwind(halt.signal())

    @property
    def task_id(self) -> str:
        return self.record.task_id

    @property
    def turn(self) -> int:
        return self.record.turn

    def remaining(self) -> float:
        return self.budget.remaining()

    def refuse(self, error: ContinuumError) -> ContinuumError:
        if self.refused is None:
            self.refused = error
        return error

    def unwind(self, exc: C) -> C:
        """Remember that ``exc`` unwinds this turn, and return it to be raised."""
        self.unwinding = exc
        return exc

    def step_started(self, key: str, name: str, attempt: int) -> None:
        """Tell the observers a live step's attempt starts."""
        if self.observers is not None:
            event = StepStarted(self.record.task_id, key, name, self.record.turn, attempt)
            self.observers.emit("step_started", event)

    def log_step(
        self,
        key: str,
        started: float,
        duration_s: float,
        attempts: int,
        outcome: str,
        *,
        name: str = "",
        error_type: str | None = None,
    ) -> None:
        """Note a live step's attempt in this invocation's history (saved with the next
        write), and tell the observers."""
        turn = self.record.turn
        if self.invocation is not None:
            # A child context's steps keep its path ("claims#0/2/check#0"): the same step in
            # each map item would otherwise be the same "check#0".
            self.invocation.steps.append(
                StepRun(self.path + key, turn, round(started, 3), duration_s, attempts, outcome)
            )
        if self.observers is not None:
            event = StepEnded(
                self.record.task_id, key, name, turn, attempts, outcome, duration_s, error_type
            )
            self.observers.emit("step_ended", event)

    # -- boundaries: where a cancel request is delivered -----------------------------------------

    def boundary(self, *, reopen: bool = False) -> float:
        """At a step or wait that runs live: look at the inbox if it is due, and deliver a
        cancel request (TaskCancelledError, journaled at this position). ``reopen``: the call
        re-enters an unfinished entry (a paused step, a wait), which the cancel replaces.

        Returns the time it read (epoch s): what a step that starts now logs as its start."""
        now = now_s()
        if now - self.inbox.listed_at >= self.inbox_poll_s:
            self.note_inbox()
        cancel = self.record.cancel
        if cancel is not None and not cancel.delivered:
            if reopen:
                self.journal.reopen()
            cancel.delivered = True
            self.journal.append(
                JournalEntry(f"cancel#{self.journal.position}", "cancel", kind=EntryKind.CANCEL)
            )
            self.progress = True
            raise self.cancelled_error()
        return now

    def replay_cancel(self) -> None:
        """On replay: where the journal says a cancel was delivered, deliver it again."""
        entry = self.journal.peek()
        if entry is not None and entry.kind == EntryKind.CANCEL:
            self.journal.skip()
            raise self.cancelled_error()

    def note_inbox(self, listing: Listing | None = None) -> None:
        """List the inbox now (or adopt the worker's ``listing``), and take note of a cancel
        request in it."""
        if listing is None:
            listing = self.inbox.refresh()
        else:
            self.inbox.adopt(listing)
        self.record.inbox_checked_at = listing.listed_at
        if listing.has_cancel and self.record.cancel is None:
            request = self.inbox.cancel()
            if request is not None:
                self.record.cancel = CancelState(
                    reason=request.reason, requested_at=request.requested_at
                )

    def cancelled_error(self) -> TaskCancelledError:
        reason = self.record.cancel.reason if self.record.cancel else None
        return TaskCancelledError(
            f"the task was cancelled{f': {reason}' if reason else ''}",
            reason=reason,
            task_id=self.record.task_id,
            hint="catch it to run cleanup steps; the task ends cancelled either way",
        )
