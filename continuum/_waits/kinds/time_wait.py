"""Time as a wait: ``ctx.sleep`` (and a step retry whose backoff does not fit, a ``time``
waiter of the step's own).

Its deadline is computed when it is first reached and journaled; nothing but the clock answers
it. A sleep of ``INLINE_WAIT_S`` or less that fits the budget is slept in the invocation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from continuum._base.clock import now_s
from continuum._record.model import EntryKind, JournalEntry
from continuum._record.waiting_for import (
    Duration,
    Waiter,
    WaitKind,
    check_name,
    epoch_to_datetime,
    seconds_of,
)
from continuum._waits.kinds.template import WaitOperation

if TYPE_CHECKING:
    from continuum._waits.kinds.template import Caller

#: A wait this short (and fitting the budget) is slept in the invocation: a fresh invocation
#: would cost more than the wait.
INLINE_WAIT_S = 1.0

#: A sleep short enough to sleep in place: its entry (journaled once it is slept), seconds.
ShortSleep = tuple[JournalEntry, float]


class TimeWait(WaitOperation):
    kind: ClassVar[str] = WaitKind.TIME
    event: ClassVar[str] = "sleep"
    entries: ClassVar[tuple[str, ...]] = (EntryKind.SLEEP,)


TIME = TimeWait()


def enter(caller: Caller, duration: Duration, name: str | None) -> ShortSleep | None:
    """Enter a sleep: done already (None), to sleep here (a ShortSleep, done when slept),
    or raise ``Wait``."""
    task_id = caller.task_id
    label = check_name(name or "sleep", what="sleep name", task_id=task_id)
    seconds = seconds_of(duration, what="ctx.sleep", task_id=task_id)
    key, entry = caller.enter(label, EntryKind.SLEEP)
    if entry is not None and not entry.partial:
        return None
    now = now_s()
    if entry is None:
        assert seconds is not None
        entry = JournalEntry(key, label, kind=EntryKind.SLEEP, deadline=now + seconds)
    assert entry.deadline is not None
    left = entry.deadline - now
    if left > 0 and left <= INLINE_WAIT_S and left + 0.5 < caller.remaining():
        return entry, left
    if left <= 0:
        caller.done(entry)
        return None
    waiter = Waiter(kind=TIME.kind, name=label, deadline=epoch_to_datetime(entry.deadline))
    raise caller.wait(entry, waiter, f"sleeping until {waiter.deadline:%Y-%m-%dT%H:%M:%SZ}")
