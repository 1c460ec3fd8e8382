"""A turn's scope and its cursor: what an invocation fixes for a task's turns
(:class:`TurnScope`: the record, the budget, the saves, the inbox, the settings, the observers),
and where a turn or one of its child contexts stands (:class:`TurnState`: its journal, its path,
its halt), with the boundaries where a cancel request is delivered.

``step_calls.StepCaller``, ``wait_calls.WaitCaller`` and the fan-out code each get one
``TurnState``. A child context (a block, a branch or an item of a batch) gets its own, made by
:meth:`TurnState.child`: it shares its parent's scope, and journals in its own journal under its
own path.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from continuum._base.callback_links import CallbackLinks
from continuum._base.clock import monotonic_clock, now_s
from continuum._define.observers import Observers
from continuum._define.settings import Settings
from continuum._record.history import InvocationRun, LiveStep
from continuum._record.inbox import Listing
from continuum._record.model import EntryKind, JournalEntry, TaskRecord
from continuum._record.waiting_for import CancelState
from continuum._steps.budget import Budget, Preemptor, alarm_preemptor
from continuum._steps.control_flow import ControlFlow, Suspend
from continuum._steps.journal import Journal
from continuum._steps.task_inbox import TaskInbox
from continuum.errors import ContinuumError, TaskCancelledError

if TYPE_CHECKING:
    from continuum._define.steps import Step, StepScope

C = TypeVar("C", bound=ControlFlow)

#: What a test helper gives a live step call to run in its place (``continuum.testing``).
StepWrapper = Callable[["Step[Any, Any]", "StepScope"], "Step[Any, Any]"]


class Halt(threading.Event):
    """Tells the branches of a batch to stop at their next boundary, and why; and every asyncio
    task of the turn that a cancel delivered to one of them is theirs to see too: those under
    this halt (``tasks``), under the halts of the batches it holds (``inner``), and under the
    ``outer`` halt it runs in."""

    def __init__(self, outer: Halt | None = None) -> None:
        super().__init__()
        self.reason = ""
        self.cancelled = False
        self.outer = outer
        #: the state of each asyncio task that runs under this halt (an async batch's items).
        self.tasks: dict[asyncio.Future[Any], TurnState] = {}
        self.inner: list[Halt] = []
        if outer is not None:
            outer.inner.append(self)

    def stop(self, reason: str, *, cancelled: bool = False) -> None:
        if not self.is_set():
            self.reason, self.cancelled = reason, cancelled
            self.set()

    def unwinding(self) -> ControlFlow:
        """The control-flow exception a context this halt stopped unwinds with."""
        return Suspend(f"another branch stopped the batch: {self.reason}")

    def detach(self) -> None:
        """The batch of this halt ended: the halt it ran in forgets it."""
        if self.outer is not None and self in self.outer.inner:
            self.outer.inner.remove(self)

    def running(self) -> Iterator[tuple[asyncio.Future[Any], TurnState]]:
        """Each asyncio task under this halt, with its state."""
        yield from list(self.tasks.items())

    def cancel_reached(self, state: TurnState) -> None:
        """Owe the cancel delivered to ``state`` to every asyncio task of the turn that runs
        now, wherever its halt is, but ``state``'s and those it runs in (they hear of it by
        awaiting it, as from a gather)."""
        if self.outer is not None:
            self.outer.cancel_reached(state)
        else:
            self._owe(state)

    def _owe(self, state: TurnState) -> None:
        for task, other in self.running():
            if not (task.done() or other.cancel_seen or state.path.startswith(other.path)):
                other.cancel_owed = True
        for halt in list(self.inner):
            halt._owe(state)


class TurnScope:
    """What one invocation fixes for a task's turns: the turn and each of its child contexts
    share this one object.

    Build it with :meth:`start`.

    ``record`` (the claimed record), ``budget`` (the time rule of this invocation), ``save``
    (saves the record now, compare-and-swap; raises ``Fenced`` when another worker moved it),
    ``save_strict`` (saves it or raises ``Suspend``: for what must be stored first, a
    callback's id), ``inbox`` (the task's inbox), ``settings`` (the app's settings with the
    task's overrides: how often to save the journal, ``persist_every_s``, 0 in recovery: every
    step; how often to list the inbox for cancel requests, ``inbox_poll_s``; the worker deaths
    at one step after which the task fails, ``max_step_crashes``), ``preemptor`` (runs a
    preemptible step with a time limit), ``invocation`` (this invocation's entry in the task's
    history: live steps are logged in it), ``observers`` (the worker's observers, when any
    wants step events, else None), ``links`` (the callback link endpoint and its keys; None:
    callbacks have no link), ``lock`` (guards the record while the branches of a batch run in
    threads), ``step_wrapper`` (for test helpers: a step a live call runs instead of the one
    called), ``clock`` (the monotonic clock of durations, ``clock.monotonic_clock``, bound for
    the invocation's turns).
    """

    # A plain class, not a dataclass: generating its methods showed in the cold import
    # (benchmarks.versus, instructions).
    __slots__ = (
        "budget",
        "clock",
        "inbox",
        "invocation",
        "links",
        "lock",
        "observers",
        "preemptor",
        "record",
        "save",
        "save_strict",
        "settings",
        "step_wrapper",
    )

    def __init__(
        self,
        *,
        record: TaskRecord,
        budget: Budget,
        save: Callable[[], None],
        save_strict: Callable[[], None],
        inbox: TaskInbox,
        settings: Settings,
        preemptor: Preemptor,
        invocation: InvocationRun | None,
        observers: Observers | None,
        links: CallbackLinks | None,
    ) -> None:
        self.record = record
        self.budget = budget
        self.save = save
        self.save_strict = save_strict
        self.inbox = inbox
        self.settings = settings
        self.preemptor = preemptor
        self.invocation = invocation
        self.observers = observers
        self.links = links
        self.lock = threading.RLock()
        self.step_wrapper: StepWrapper | None = None
        self.clock = monotonic_clock()

    @classmethod
    def start(
        cls,
        record: TaskRecord,
        budget: Budget,
        save: Callable[[], None],
        settings: Settings | None = None,
        *,
        save_strict: Callable[[], None] | None = None,
        inbox: TaskInbox | None = None,
        preemptor: Preemptor = alarm_preemptor,
        invocation: InvocationRun | None = None,
        observers: Observers | None = None,
    ) -> TurnScope:
        """The scope of a task's turns in this invocation. The arguments are the fields of
        the same names; ``save_strict`` defaults to ``save``, ``inbox`` to none (as in unit
        tests without a store), ``settings`` to the defaults, and the callback links are the
        settings'."""
        if settings is None:
            settings = Settings()
        checked = record.inbox_checked_at or record.created_at.timestamp()
        if record.recovering:
            # In recovery (after a worker died), save after every step so a death names it.
            settings = replace(settings, persist_every_s=0.0)
        return cls(
            record=record,
            budget=budget,
            save=save,
            save_strict=save_strict or save,
            inbox=inbox or TaskInbox(None, record.task_id, checked_at=checked),
            settings=settings,
            preemptor=preemptor,
            invocation=invocation,
            observers=observers if observers is not None and observers.steps else None,
            links=settings.links(),
        )


class TurnState:
    """Where one turn, or one child context of it, stands: what a context moves. What the
    invocation fixes is its ``scope``, shared with the turn's other contexts.

    Build the turn's with :meth:`start`, a child context's with :meth:`child`.

    Its own: ``journal`` (the turn's, or a child context's), ``path`` ("" for the turn, or a
    child context's path, "search#0/"), ``halt`` (set by a batch when its branches must stop
    at their next boundary, or by an async turn when its asyncio tasks must), ``serial`` (an
    async turn's lock that runs live steps one at a time, in recovery).
    """

    __slots__ = (
        "active_cursor",
        "active_key",
        "cancel_owed",
        "cancel_seen",
        "halt",
        "journal",
        "last_save",
        "path",
        "progress",
        "refused",
        "scope",
        "serial",
        "thread_id",
        "unwinding",
        "unwound_in",
    )

    def __init__(
        self,
        scope: TurnScope,
        journal: Journal,
        *,
        path: str = "",
        halt: Halt | None = None,
        serial: Any = None,
        progress: bool = False,
        last_save: float | None = None,
    ) -> None:
        self.scope = scope
        self.journal = journal
        self.path = path
        self.halt = halt
        #: an async turn in recovery: the asyncio lock that runs its live steps one at a time.
        self.serial = serial
        #: the thread that runs it: steps called from another are refused.
        self.thread_id = threading.get_ident()
        #: the idempotency key and cursor of the step running now, if any.
        self.active_key: str | None = None
        self.active_cursor: Any = None
        #: a step ran, a step failed, a wait was answered or a turn completed here.
        self.progress = progress
        self.last_save = scope.clock() if last_save is None else last_save
        #: the control-flow exception unwinding this turn (a swallowed one is detected).
        self.unwinding: BaseException | None = None
        #: the asyncio task it was raised in (None: not in one, or handed up from one).
        self.unwound_in: asyncio.Task[Any] | None = None
        #: an error that fails this turn whatever user code does with it.
        self.refused: ContinuumError | None = None
        #: TaskCancelledError was raised here; or (owed) in an asyncio task of the turn beside
        #: this one, and this one is to see it too at its next step or wait.
        self.cancel_seen = False
        self.cancel_owed = False

    @classmethod
    def start(cls, scope: TurnScope) -> TurnState:
        """The state of a task's turns in the invocation ``scope`` fixes."""
        record = scope.record
        return cls(scope, Journal(record.journal, task_id=record.task_id, turn=record.turn))

    def child(self, entries: list[JournalEntry], path: str, halt: Halt | None) -> TurnState:
        """The state of a child context that journals in ``entries`` under ``path``, in the
        calling thread; ``halt``: its batch's, if any."""
        scope = self.scope
        return TurnState(
            scope,
            Journal(entries, task_id=scope.record.task_id, turn=scope.record.turn),
            path=path,
            halt=halt if halt is not None else self.halt,
            serial=self.serial,
            progress=self.progress,
            last_save=self.last_save,
        )

    def new_turn(self) -> None:
        """Start the next turn: journal in the record's (fresh) journal, nothing unwinding."""
        self.journal = Journal(self.scope.record.journal, task_id=self.task_id, turn=self.turn)
        self.unwinding, self.unwound_in, self.refused = None, None, None
        self.cancel_seen, self.cancel_owed = False, False

    @property
    def task_id(self) -> str:
        return self.scope.record.task_id

    @property
    def turn(self) -> int:
        return self.scope.record.turn

    @contextmanager
    def unlocked(self) -> Iterator[None]:
        """Let the other branches at the record while this one runs user code or sleeps."""
        self.scope.lock.release()
        try:
            yield
        finally:
            self.scope.lock.acquire()

    def halt_check(self) -> None:
        """A branch of a batch stops at a boundary once the batch must suspend or stop."""
        halt = self.halt
        if halt is not None and halt.is_set():
            raise self.unwind(halt.unwinding())

    def refuse(self, error: ContinuumError) -> ContinuumError:
        """Remember an error that must fail the turn even if user code catches it."""
        if self.refused is None:
            self.refused = error
        return error

    def unwind(self, exc: C) -> C:
        """Remember that ``exc`` unwinds this turn, and where, and return it to be raised."""
        self.unwinding = exc
        self.unwound_in = _running_task()
        return exc

    def append(self, entry: JournalEntry) -> None:
        """Journal ``entry``: progress was made."""
        self.journal.append(entry)
        self.progress = True

    # -- what a live step tells ------------------------------------------------------------------

    def step_started(
        self, key: str, name: str, attempt: int, wall: float, *, replay: bool, first: float
    ) -> None:
        """Tell the observers a live step's attempt starts (at ``wall``; its first attempt
        at ``first``; ``replay``: an earlier invocation began the step)."""
        if self.scope.observers is not None:
            record = self.scope.record
            from continuum._define.events import StepStarted

            event = StepStarted(
                record.task_id, key, name, record.turn, attempt, replay, wall, first, self.path
            )
            self.scope.observers.emit("step_started", event)

    def began_earlier(self, at: float) -> bool:
        """Whether ``at`` (epoch s) comes before this invocation claimed the task: an
        operation that began then is replayed here."""
        run = self.scope.invocation
        return run is not None and at < run.started_at.timestamp()

    def emit(self, event_name: str, event: Any) -> None:
        """Tell the observers of a wait or a child context (when one wants such events)."""
        if self.scope.observers is not None:
            self.scope.observers.emit(event_name, event)

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
        error: str | None = None,
        result: Any = None,
    ) -> None:
        """Note a live step's attempt in this invocation's history (saved with the next
        write), and tell the observers (``error``: its message; ``result``: its JSON)."""
        turn = self.scope.record.turn
        if self.scope.invocation is not None:
            # A child context's steps keep its path ("claims#0/2/check#0"): the same step in
            # each map item would otherwise be the same "check#0".
            self.scope.invocation.steps.append(
                LiveStep(self.path + key, turn, round(started, 3), duration_s, attempts, outcome)
            )
        if self.scope.observers is not None:
            from continuum._define.events import StepEnded

            event = StepEnded(
                self.scope.record.task_id,
                key,
                name,
                turn,
                attempts,
                outcome,
                duration_s,
                error_type,
                error,
                result,
                started,
                started + duration_s,
                self.path,
            )
            self.scope.observers.emit("step_ended", event)

    # -- boundaries: where a cancel request is delivered -----------------------------------------

    def boundary(self, *, reopen: bool = False) -> float:
        """At a step or wait that runs live: look at the inbox if it is due, and deliver a
        cancel request (TaskCancelledError, journaled at this position). ``reopen``: the call
        re-enters an unfinished entry (a paused step, a wait), which the cancel replaces.

        Returns the time it read (epoch s): what a step that starts now logs as its start."""
        now = now_s()
        if now - self.scope.inbox.listed_at >= self.scope.settings.inbox_poll_s:
            self.note_inbox()
        cancel = self.scope.record.cancel
        if cancel is not None and (not cancel.delivered or self.cancel_owed):
            if reopen:
                self.journal.reopen()
            cancel.delivered = True
            self.append(
                JournalEntry(f"cancel#{self.journal.position}", "cancel", kind=EntryKind.CANCEL)
            )
            raise self._saw_cancel()
        return now

    def replay_cancel(self) -> None:
        """On replay: where the journal says a cancel was delivered, deliver it again."""
        entry = self.journal.peek()
        if entry is not None and entry.kind == EntryKind.CANCEL:
            self.journal.skip()
            raise self._saw_cancel()

    def _saw_cancel(self) -> TaskCancelledError:
        """The cancel is delivered here now: the error to raise; the asyncio tasks beside this
        one (``halt``) are to see it at their next step too, as the next step of a sync task."""
        self.cancel_seen, self.cancel_owed = True, False
        if self.halt is not None:
            self.halt.cancel_reached(self)
        return self.cancelled_error()

    def note_inbox(self, listing: Listing | None = None) -> None:
        """List the inbox now (or adopt the worker's ``listing``), and take note of a cancel
        request in it."""
        if listing is None:
            listing = self.scope.inbox.refresh()
        else:
            self.scope.inbox.adopt(listing)
        self.scope.record.inbox_checked_at = listing.listed_at
        if listing.has_cancel and self.scope.record.cancel is None:
            request = self.scope.inbox.cancel()
            if request is not None:
                self.scope.record.cancel = CancelState(
                    reason=request.reason, requested_at=request.requested_at
                )

    def cancelled_error(self) -> TaskCancelledError:
        reason = self.scope.record.cancel.reason if self.scope.record.cancel else None
        return TaskCancelledError(
            f"the task was cancelled{f': {reason}' if reason else ''}",
            reason=reason,
            task_id=self.scope.record.task_id,
            hint="catch it to run cleanup steps; the task ends cancelled either way",
        )


def _running_task() -> asyncio.Task[Any] | None:
    """The asyncio task running in this thread, if any."""
    try:
        return asyncio.current_task()
    except RuntimeError:  # no event loop runs here: a sync turn, or a step's thread
        return None
