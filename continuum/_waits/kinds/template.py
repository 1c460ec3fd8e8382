"""The template every wait kind fills in, and what a kind is asked by the code around it.

A wait kind is a subclass of :class:`WaitOperation` with one instance in ``registry.KINDS``.
Its module also holds the function a turn enters it with (``enter(caller, ...)``, run by
``WaitCaller.run`` under the turn's lock), which follows one template:

1. **Enter**: ``caller.enter(label, entry_kind)`` finds the wait's journal entry (its key is
   its name and ordinal in the turn). A finished entry is a **replay**: return what it
   recorded, never the clock's or the inbox's present.
2. **Answer now**: a first reach computes the deadline once and keeps it in the entry; the
   kind looks in the inbox for what answers it (``answered`` says the same to the worker from
   one LIST) and, if found or past the deadline, records the outcome (``caller.done``).
3. **Wait**: otherwise leave the entry partial and unwind with the :class:`Waiter` the record
   keeps (``caller.wait``); the worker wakes the task at ``Waiter.deadline`` or when
   ``answered`` turns true, and the replayed turn takes what arrived.

What a kind's module may use of the turn is :class:`Caller`, and nothing else: the task's
record (``caller.record``: what the kind keeps beside its waits, as ``callbacks`` and
``signals_taken``; written with the turn's next save), its inbox (``caller.inbox``: what was
sent to it, read from one listing, ``caller.listing_fresh()`` to list again), the time left
(``caller.remaining()``), a save now (``caller.save()``, when the outside must see what the
turn wrote before it can answer), and the journal through ``enter`` / ``done`` / ``wait``. The
turn's state, scope and locks are the template's.

The same shape covers the other operations, which stay where they are because it costs
nothing to leave them: a **step** enters by its key, replays its recorded result, is answered
by running it (its deadline is the budget; a retry that does not fit waits as a ``time``
waiter); a **child context** enters by its name, replays its one journaled result, and its
children's entries are its steps and waits under its path; a **batch** (parallel, map) is a
context whose children are one context per item, ended by its completion policy; child tasks
(``ctx.invoke``, ``map_tasks``) are a wait kind here (``child``), answered by their reports.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from continuum.errors import ContinuumError

if TYPE_CHECKING:
    from continuum._define.callbacks import Callback
    from continuum._record.inbox import Listing
    from continuum._record.model import JournalEntry, TaskRecord
    from continuum._record.waiting_for import Waiter
    from continuum._steps.control_flow import Wait
    from continuum._steps.task_inbox import TaskInbox
    from continuum._waits.answers import Mail


# A protocol for type checkers only: building its class at import costs the cold start
# about half a million instructions (benchmarks.versus), and nothing checks it at run time.
if TYPE_CHECKING:

    class Caller(Protocol):
        """What a kind's ``enter`` is given: the template of ``wait_calls.WaitCaller``."""

        @property
        def task_id(self) -> str: ...

        @property
        def record(self) -> TaskRecord:
            """The task's record (the turn saves it)."""
            ...

        @property
        def inbox(self) -> TaskInbox:
            """The task's inbox, as last listed."""
            ...

        def remaining(self) -> float:
            """Seconds left in this invocation for the task's code."""
            ...

        def save(self) -> None:
            """Save the record now (the turn unwinds if it must suspend instead)."""

        def enter(self, name: str, kind: str) -> tuple[str, JournalEntry | None]:
            """The wait's key and its entry (None: first reached; partial: not answered)."""
            ...

        def done(self, entry: JournalEntry) -> None:
            """Record the wait's outcome."""

        def wait(self, entry: JournalEntry, waiter: Waiter, reason: str) -> Wait:
            """Leave the unanswered wait in the journal; the exception that unwinds the turn."""
            ...

        def listing_fresh(self) -> None:
            """List the inbox again if the last listing is not recent."""

        # what a callback the kind hands out asks of its turn (``continuum._define.callbacks``)

        def callback_result(self, callback: Callback) -> Any: ...

        def callback_url(self, callback: Callback) -> str | None: ...


class WaitOperation:
    """A kind of wait, as the record, the worker, the client and the pages see it.

    Attributes:
        kind: its ``Waiter.kind`` in the record (a stable JSON value).
        event: its kind in ``wait_started`` / ``wait_ended`` events.
        entries: the journal entry kinds of its waits (what a turn can be left waiting in).
        outside: only the outside world answers it (a task waiting on it alone is stranded
            where no one sends).
        recheck_s: while a task waits on it, its inbox is looked at least this often.
        action: what answering it is called on a page, as "Could not {action}" reads (None:
            it is not answered from outside); the page's form for it posts to ``{kind}``
            (``name``, ``id`` and ``payload``) and the server answers through ``send``.
        answered_note: what the page says once an answer was sent.
        aws_type: its operation type and subtype in AWS Lambda durable functions' model (the
            tracing's ``naming="aws"``).
        in_turn: entered through ``WaitCaller``'s template, so an observer hears of its start
            and end (child tasks are entered by the fan-out, which tells its own).
    """

    kind: ClassVar[str]
    event: ClassVar[str]
    entries: ClassVar[tuple[str, ...]] = ()
    outside: ClassVar[bool] = False
    recheck_s: ClassVar[float | None] = None
    action: ClassVar[str | None] = None
    aws_type: ClassVar[tuple[str, str]] = ("WAIT", "Wait")
    answered_note: ClassVar[str] = "Answer sent: the task wakes and takes it."
    in_turn: ClassVar[bool] = True

    def answered(self, waiter: Waiter, record: TaskRecord, listing: Listing) -> bool:
        """Whether ``listing`` (one LIST of the task's inbox) holds what answers ``waiter``."""
        return False

    def refresh(
        self,
        waiter: Waiter,
        record: TaskRecord,
        listing: Listing,
        read: Callable[[str], datetime | None],
    ) -> None:
        """Move ``waiter.deadline`` by what came meanwhile (``read(token)``: the latest
        heartbeat in the task's inbox)."""

    def named(self, label: str) -> str:
        """The wait's name in its events, from its journal entry's name."""
        return label

    def shown(self, waiter: Waiter, record: TaskRecord) -> Waiter:
        """``waiter`` as the status shows it (with what the record keeps beside it)."""
        return waiter

    def line(self, waiter: Waiter) -> str:
        """One line for a report: its kind, name, deadline and id."""
        until = f" until {waiter.deadline:%Y-%m-%dT%H:%M:%SZ}" if waiter.deadline else ""
        return f"{waiter.kind} {waiter.name!r}{until}" + (f" id {waiter.id}" if waiter.id else "")

    def prompt(self, waiter: Waiter) -> str:
        """What the command line asks a person for, to answer ``waiter``."""
        return f"{self.kind} {waiter.name!r}: answer as JSON"

    def sent(self, waiter: Waiter, payload: Any) -> str | None:
        """What the command line says after it answered ``waiter`` (None: nothing)."""
        return None

    def send(
        self, mail: Mail, task_id: str, waiter: Waiter, payload: Any, *, answer_id: str | None
    ) -> None:
        """Answer ``waiter`` from outside with ``payload`` (``answer_id``: to send it once)."""
        raise ContinuumError(
            f"a {self.kind} wait ({waiter.name!r}) is not answered from outside",
            task_id=task_id,
            hint="wait for its deadline, or cancel the task",
        )
