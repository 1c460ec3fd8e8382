"""Signals as a wait: ``ctx.wait_for_signal(name)`` takes the oldest signal of its name from
the task's mailbox (``client.signal``), or None at its timeout.

What it took is journaled (the signal and its inbox key), so a replay takes the same; the key
also goes to ``record.signals_taken``, so no later wait takes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from continuum._base.clock import now_s
from continuum._record.model import EntryKind, JournalEntry
from continuum._record.waiting_for import (
    Duration,
    Signal,
    Waiter,
    WaitKind,
    check_name,
    epoch_to_datetime,
    seconds_of,
)
from continuum._waits.kinds.template import WaitOperation

if TYPE_CHECKING:
    from continuum._record.inbox import Listing
    from continuum._record.model import TaskRecord
    from continuum._waits.answers import Mail
    from continuum._waits.kinds.template import Caller


class SignalWait(WaitOperation):
    kind: ClassVar[str] = WaitKind.SIGNAL
    event: ClassVar[str] = "signal"
    entries: ClassVar[tuple[str, ...]] = (EntryKind.SIGNAL,)
    outside: ClassVar[bool] = True
    aws_type: ClassVar[tuple[str, str]] = ("CALLBACK", "Signal")

    def answered(self, waiter: Waiter, record: TaskRecord, listing: Listing) -> bool:
        taken = set(record.signals_taken)
        return any(key not in taken for key in listing.signal_keys(waiter.name))

    def prompt(self, waiter: Waiter) -> str:
        return f"signal {waiter.name!r} awaited: payload as JSON"

    def send(
        self, mail: Mail, task_id: str, waiter: Waiter, payload: Any, *, answer_id: str | None
    ) -> None:
        mail.signal(task_id, waiter.name, payload, signal_id=answer_id)


SIGNAL = SignalWait()


def enter(caller: Caller, name: str, timeout: Duration | None) -> Signal | None:
    task_id = caller.task_id
    check_name(name, what="signal name", task_id=task_id)
    timeout_s = seconds_of(timeout, what="timeout", task_id=task_id)
    label = f"signal.{name}"
    key, entry = caller.enter(label, EntryKind.SIGNAL)
    if entry is not None and not entry.partial:
        return Signal.model_validate(entry.result) if entry.result is not None else None
    if entry is None:
        deadline = now_s() + timeout_s if timeout_s is not None else None
        entry = JournalEntry(key, label, kind=EntryKind.SIGNAL, deadline=deadline)
    taken = set(caller.record.signals_taken)
    for attempt in range(2):
        found = caller.inbox.oldest_signal(name, taken)
        if found is not None:
            relative, signal = found
            caller.record.signals_taken.append(relative)
            entry.ref, entry.result = relative, signal.model_dump(mode="json")
            caller.done(entry)
            return Signal.model_validate(entry.result)  # as a replay would rebuild it
        if entry.deadline is not None and now_s() >= entry.deadline:
            caller.done(entry)
            return None
        if attempt == 0:
            caller.listing_fresh()
    waiter = Waiter(kind=SIGNAL.kind, name=name, deadline=epoch_to_datetime(entry.deadline))
    raise caller.wait(entry, waiter, f"waiting for signal {name!r}")
