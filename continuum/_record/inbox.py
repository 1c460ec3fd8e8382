"""A task's inbox: what the outside world sends it, as small objects beside its record.

Nothing from outside writes the record: a write there would fence the worker that holds it.
Instead each callback answer, heartbeat, signal and cancel request is its own object in the
task's inbox (the record-level seam's inbox objects; on S3 under ``{prefix}/{task_id}/inbox/``),
followed by a wake message::

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
from typing import TYPE_CHECKING, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from continuum._base.clock import now_s, utcnow
from continuum._base.json_values import dump_json
from continuum._record.waiting_for import Signal

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


class InboxObjects(Protocol):
    """The objects of tasks' inboxes, by task id and name (``signals/s/1.json``): the part of
    the record-level seam (``persistence.Records``) that the inbox is written on."""

    def inbox_put(self, task_id: str, name: str, body: bytes, *, create: bool) -> bool:
        """Write an object. ``create``: only if the name is free (atomically: of two creates
        exactly one returns True; a retry whose first attempt landed unseen is that one);
        False if it was taken. Otherwise overwrite, and return True."""
        ...

    def inbox_get(self, task_id: str, name: str) -> bytes | None:
        """An object's body; None if there is none of that name."""
        ...

    def inbox_list(self, task_id: str) -> list[str]:
        """Every name in the task's inbox now (a put that returned before is in it), in
        ascending code-point order."""
        ...

    def inbox_delete(self, task_id: str, name: str) -> None:
        """Remove an object; nothing happens if there is none of that name."""
        ...


class Inbox:
    """The inboxes of a deployment's tasks, on the seam's inbox objects.

    Args:
        objects: where they are kept (``persistence.Records``).
        stack: where these tasks live (``Records.stack``): what tells their traces from
            another deployment's tasks of the same ids.
    """

    def __init__(self, objects: InboxObjects, *, stack: str) -> None:
        self.objects = objects
        self.stack = stack

    # -- reading (the worker) ------------------------------------------------------------------

    def list(self, task_id: str, *, at: float | None = None) -> Listing:
        """Every name in the task's inbox (S3: one LIST), listed ``at`` (epoch s; default:
        now)."""
        names = frozenset(self.objects.inbox_list(task_id))
        return Listing(keys=names, listed_at=now_s() if at is None else at)

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
        body = self.objects.inbox_get(task_id, relative)
        if body is None:
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
        self.objects.inbox_put(task_id, f"heartbeats/{token}.json", body, create=False)

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

    def reopen_to_cancel(self, task_id: str) -> None:
        """Remove a close left by a finish whose write never landed: cancels are taken again."""
        self.objects.inbox_delete(task_id, "cancel.json")

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
        # The body is unique (it carries a timestamp): a retry can tell its own write.
        body = dump_json(model.model_dump(mode="json"))
        return self.objects.inbox_put(task_id, relative, body, create=True)
