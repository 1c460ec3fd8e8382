"""A task's inbox: what the outside world sends it, as small objects beside its record.

Nothing from outside writes the record: a write there would fence the worker that holds it.
Instead each callback answer, heartbeat, signal and cancel request is its own object under
``{prefix}/{task_id}/inbox/``, followed by a wake message::

    inbox/callbacks/{token}.json        one answer per callback (If-None-Match: the first wins)
    inbox/heartbeats/{token}.json       the latest heartbeat of a callback (overwritten)
    inbox/signals/{name}/{id}.json      one object per signal (If-None-Match: an id is sent once)
    inbox/cancel.json                   the first cancel request (If-None-Match: the first wins),
                                        or the finish's close: a request after it is refused
    inbox/refused.json                  why a worker refused a message naming a task that never
                                        ran (If-None-Match: the first, written once however
                                        many come; ``client.status`` says it)

The worker lists the inbox (one LIST) when a wait needs it, when a wake arrives, and every
``inbox_poll_s`` while the task runs, so that a cancel request is seen. No wake-up is lost:
the worker writes ``waiting`` and then lists; a sender writes its object and then reads the
record and wakes the generation it finds; one of the two always sees the other.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ValidationError

from continuum._base.clock import now_s, utcnow
from continuum._base.json_values import dump_json
from continuum._base.trace_ids import stack_of
from continuum._record.waiting_for import Signal
from continuum.backends.store import (
    NoSuchKey,
    PreconditionFailed,
    RecordStore,
    put_with_retries,
)

if TYPE_CHECKING:
    from continuum._record.inbox_items import CallbackAnswer, CancelRequest, StartRefusal

M = TypeVar("M", bound=BaseModel)

#: The largest callback result or signal payload accepted, as JSON.
MAX_INBOX_VALUE_BYTES = 256 * 1024
#: The longest error message a failed callback keeps.
MAX_INBOX_MESSAGE_CHARS = 2000


class Listing:
    """The keys of a task's inbox, as one LIST saw them (relative to ``inbox/``).

    ``listed_at``: the time of the listing (default: now, read at each call, so a virtual
    clock applies).
    """

    __slots__ = ("keys", "listed_at")

    def __init__(self, keys: frozenset[str] = frozenset(), listed_at: float | None = None) -> None:
        self.keys = keys
        self.listed_at = now_s() if listed_at is None else listed_at

    def has_answer(self, token: str) -> bool:
        return f"callbacks/{token}.json" in self.keys

    def has_heartbeat(self, token: str) -> bool:
        return f"heartbeats/{token}.json" in self.keys

    @property
    def has_cancel(self) -> bool:
        return "cancel.json" in self.keys

    def child_keys(self, child_id: str) -> list[str]:
        return sorted(k for k in self.keys if k.startswith(f"children/{child_id}/"))

    def signal_keys(self, name: str) -> list[str]:
        return sorted(k for k in self.keys if k.startswith(f"signals/{name}/"))


class Inbox:
    """The inboxes of the tasks under one prefix of a store.

    Args:
        store: the bytes (S3, or the in-memory fake).
        prefix: inboxes live at ``{prefix}/{task_id}/inbox/``.
    """

    def __init__(self, store: RecordStore, *, prefix: str) -> None:
        self.store = store
        self.prefix = prefix

    @property
    def stack(self) -> str:
        """The bucket and prefix these tasks live in: what tells their traces from another
        deployment's tasks of the same ids."""
        return stack_of(self.store, self.prefix)

    def key(self, task_id: str, relative: str) -> str:
        return f"{self.prefix}/{task_id}/inbox/{relative}"

    # -- reading (the worker) ------------------------------------------------------------------

    def list(self, task_id: str, *, at: float | None = None) -> Listing:
        """Every key in the task's inbox (one LIST), listed ``at`` (epoch s; default: now)."""
        base = self.key(task_id, "")
        keys = frozenset(k[len(base) :] for k in self.store.list_keys(base))
        return Listing(keys=keys, listed_at=now_s() if at is None else at)

    # The models of the inbox's objects are imported where one is read or written (see
    # inbox_items.py): thread safely, an import holds its module's lock until it is done.

    def answer(self, task_id: str, token: str) -> CallbackAnswer | None:
        from continuum._record.inbox_items import CallbackAnswer

        return self._read(task_id, f"callbacks/{token}.json", CallbackAnswer)

    def heartbeat(self, task_id: str, token: str) -> datetime | None:
        from continuum._record.inbox_items import Heartbeat

        beat = self._read(task_id, f"heartbeats/{token}.json", Heartbeat)
        return beat.at if beat is not None else None

    def cancel(self, task_id: str) -> CancelRequest | None:
        from continuum._record.inbox_items import CancelRequest

        return self._read(task_id, "cancel.json", CancelRequest)

    def signal(self, task_id: str, relative: str) -> Signal | None:
        return self._read(task_id, relative, Signal)

    def start_refusal(self, task_id: str) -> StartRefusal | None:
        """Why a worker refused the task's start message, if one did."""
        from continuum._record.inbox_items import StartRefusal

        return self._read(task_id, "refused.json", StartRefusal)

    def oldest_signal(
        self, task_id: str, name: str, listing: Listing, taken: set[str]
    ) -> tuple[str, Signal] | None:
        """The oldest signal called ``name`` not yet taken, with its inbox key."""
        found = []
        for relative in listing.signal_keys(name):
            if relative in taken:
                continue
            signal = self.signal(task_id, relative)
            if signal is not None:
                found.append((signal.sent_at, signal.id, relative, signal))
        if not found:
            return None
        _, _, relative, signal = min(found, key=lambda item: item[:3])
        return relative, signal

    def _read(self, task_id: str, relative: str, model: type[M]) -> M | None:
        try:
            body = self.store.get(self.key(task_id, relative)).body
        except NoSuchKey:
            return None
        try:
            return model.model_validate_json(body)
        except ValidationError:
            return None  # nothing but continuum writes here; an object it cannot read is no one's

    # -- writing (the client) ------------------------------------------------------------------

    def put_answer(self, task_id: str, token: str, answer: CallbackAnswer) -> bool:
        """Write a callback's answer; False if it already had one (nothing written)."""
        return self._create(task_id, f"callbacks/{token}.json", answer)

    def put_heartbeat(self, task_id: str, token: str) -> None:
        from continuum._record.inbox_items import Heartbeat

        body = Heartbeat(at=utcnow()).model_dump_json().encode()
        put_with_retries(self.store, self.key(task_id, f"heartbeats/{token}.json"), body)

    def put_signal(self, task_id: str, signal: Signal) -> bool:
        """Write a signal; False if one with its name and id was sent before (a no-op)."""
        return self._create(task_id, f"signals/{signal.name}/{signal.id}.json", signal)

    def put_cancel(self, task_id: str, reason: str | None) -> bool:
        """Write a cancel request; False if there was one already (the first reason wins)."""
        from continuum._record.inbox_items import CancelRequest

        return self._create(
            task_id, "cancel.json", CancelRequest(reason=reason, requested_at=utcnow())
        )

    def close_to_cancel(self, task_id: str) -> CancelRequest | None:
        """At the finish: close the task to cancel requests; the request that came first, if
        one did (then the task ends cancelled). A close of an earlier try of this finish
        (its worker died before the finish write) counts as this one."""
        from continuum._record.inbox_items import CancelRequest

        if self._create(task_id, "cancel.json", CancelRequest(requested_at=utcnow(), closed=True)):
            return None
        request = self.cancel(task_id)
        return request if request is not None and not request.closed else None

    def put_start_refusal(self, task_id: str, reason: str) -> bool:
        """Say why a worker refused a message naming the task; False if one said so before
        (nothing written: each forged message must not cost a write, the first stays)."""
        from continuum._record.inbox_items import StartRefusal

        if self.start_refusal(task_id) is not None:
            return False  # a GET is cheaper than a PUT refused by its precondition
        return self._create(task_id, "refused.json", StartRefusal(reason=reason, at=utcnow()))

    def put_child_report(self, task_id: str, child_id: str, status: str, report: BaseModel) -> bool:
        """Write a child's report to its parent; False if it was written before."""
        return self._create(task_id, f"children/{child_id}/{status}.json", report)

    def child_report(self, task_id: str, relative: str, model: type[M]) -> M | None:
        """Read a child's report (``relative``: its key in the listing)."""
        return self._read(task_id, relative, model)

    def _create(self, task_id: str, relative: str, model: BaseModel) -> bool:
        body = dump_json(model.model_dump(mode="json"))
        key = self.key(task_id, relative)
        try:
            put_with_retries(self.store, key, body, if_none_match=True)
        except PreconditionFailed:
            # A retried PUT whose first attempt landed finds its own object: the body is
            # unique (it carries a timestamp), so an equal body means the write was ours.
            try:
                return self.store.get(key).body == body
            except NoSuchKey:
                return False
        return True
