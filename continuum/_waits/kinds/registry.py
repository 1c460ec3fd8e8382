"""Every kind of wait, in one place: what the worker, the client, the command line, the
testing kit and the pages look a ``Waiter.kind`` (or a wait's journal entry kind) up in."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from continuum._waits.kinds.callback_wait import CALLBACK
from continuum._waits.kinds.child_wait import CHILD
from continuum._waits.kinds.signal_wait import SIGNAL
from continuum._waits.kinds.template import WaitOperation
from continuum._waits.kinds.time_wait import TIME

#: The kinds by ``Waiter.kind``.
KINDS: dict[str, WaitOperation] = {op.kind: op for op in (TIME, CALLBACK, SIGNAL, CHILD)}
#: The kinds by the journal entry kind of their waits.
BY_ENTRY: dict[str, WaitOperation] = {e: op for op in KINDS.values() for e in op.entries}
#: The kinds by their kind in ``wait_started`` / ``wait_ended`` events.
BY_EVENT: dict[str, WaitOperation] = {op.event: op for op in KINDS.values()}
#: The journal entry kinds of the waits a turn enters through ``WaitCaller`` (an observer
#: hears of each; a callback's creation is none).
TURN_WAITS: frozenset[str] = frozenset(e for e, op in BY_ENTRY.items() if op.in_turn)


class UnknownWait(WaitOperation):
    """A kind this version does not know (a record written by a newer one): never answered
    here, shown as it is."""

    kind: ClassVar[str] = "unknown"
    event: ClassVar[str] = "unknown"


_UNKNOWN = UnknownWait()


def operation_of(kind: str) -> WaitOperation:
    """The kind of wait a ``Waiter.kind`` names."""
    return KINDS.get(kind, _UNKNOWN)


def unknown_kinds(kinds: Iterable[str]) -> list[str]:
    """Those of ``kinds`` (``Waiter.kind`` values) that no kind of this version is."""
    return sorted({kind for kind in kinds if kind not in KINDS})
