"""Callbacks as a wait: ``ctx.create_callback`` makes one (its unguessable id saved in the
record before anyone outside can hold it), ``cb.result()`` waits for its answer.

The answer is one object in the task's inbox (``client.complete_callback`` or
``fail_callback``); a heartbeat (``heartbeat_callback``) moves its heartbeat deadline; at the
earliest of its timeout and its heartbeat deadline the worker closes it in the inbox (an answer
after that is refused) and the task sees ``CallbackTimeoutError``. What it took is journaled.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from continuum._base.clock import now_s
from continuum._define import callbacks
from continuum._define.callbacks import Callback
from continuum._record.model import EntryKind, ErrorInfo, JournalEntry, walk
from continuum._record.waiting_for import (
    Duration,
    OpenCallback,
    Waiter,
    WaitKind,
    check_name,
    epoch_to_datetime,
    seconds_of,
)
from continuum._waits.kinds.template import WaitOperation
from continuum.errors import CallbackFailedError, CallbackTimeoutError, ContinuumError

if TYPE_CHECKING:
    from continuum._record.inbox import Listing
    from continuum._record.model import TaskRecord
    from continuum._waits.answers import Mail
    from continuum._waits.kinds.template import Caller


def token_of(callback_id: str | None) -> str:
    """A callback's token: the last part of its id (``{task_id}.{token}``)."""
    return (callback_id or "").rsplit(".", 1)[-1]


def heard(
    callback: OpenCallback, token: str, listing: Listing, read: Callable[[str], datetime | None]
) -> bool:
    """Take the latest heartbeat of ``callback`` from its inbox (``read(token)``) if it is
    newer than the one the record keeps; True if its heartbeat deadline moved."""
    if callback.heartbeat_timeout_s is None or not listing.has_heartbeat(token):
        return False
    beat = read(token)
    if beat is None or (callback.heartbeat_at is not None and beat <= callback.heartbeat_at):
        return False
    callback.heartbeat_at = beat
    return True


class CallbackWait(WaitOperation):
    kind: ClassVar[str] = WaitKind.CALLBACK
    event: ClassVar[str] = "callback"
    entries: ClassVar[tuple[str, ...]] = (EntryKind.CALLBACK_RESULT,)
    outside: ClassVar[bool] = True
    action: ClassVar[str | None] = "complete the callback"
    answered_note: ClassVar[str] = "Callback completed: the task wakes and takes the result."
    aws_type: ClassVar[tuple[str, str]] = ("CALLBACK", "Callback")

    def answered(self, waiter: Waiter, record: TaskRecord, listing: Listing) -> bool:
        return listing.has_answer(token_of(waiter.id))

    def refresh(
        self,
        waiter: Waiter,
        record: TaskRecord,
        listing: Listing,
        read: Callable[[str], datetime | None],
    ) -> None:
        token = token_of(waiter.id)
        callback = record.callbacks.get(token)
        if callback is not None and heard(callback, token, listing, read):
            waiter.deadline = callback.deadline()

    def named(self, label: str) -> str:
        return label.removesuffix(".result")  # the entry of ``cb.result()``

    def shown(self, waiter: Waiter, record: TaskRecord) -> Waiter:
        callback = record.callbacks.get(token_of(waiter.id))
        if waiter.request is None and callback is not None:
            # Its request is kept once, in its open callback (a record written before that
            # kept a copy in the waiter).
            return waiter.model_copy(update={"request": callback.request})
        return waiter

    def prompt(self, waiter: Waiter) -> str:
        return f"callback {waiter.name!r} (id {waiter.id}): result as JSON"

    def sent(self, waiter: Waiter, payload: Any) -> str | None:
        return f"completed callback {waiter.name!r}: {json.dumps(payload)}"

    def send(
        self, mail: Mail, task_id: str, waiter: Waiter, payload: Any, *, answer_id: str | None
    ) -> None:
        assert waiter.id is not None
        mail.complete_callback(waiter.id, payload)


CALLBACK = CallbackWait()


def create(
    caller: Caller,
    name: str | None,
    timeout: Duration | None,
    heartbeat: Duration | None,
    request: Any,
) -> Callback:
    task_id = caller.task_id
    label = check_name(name or "callback", what="callback name", task_id=task_id)
    timeout_s = seconds_of(timeout, what="timeout", task_id=task_id)
    heartbeat_s = seconds_of(heartbeat, what="heartbeat_timeout", task_id=task_id)
    key, entry = caller.enter(label, EntryKind.CALLBACK)
    if entry is not None and not entry.partial:
        assert entry.ref is not None
        return Callback(caller, entry.ref, label, entry.deadline)
    token = callbacks.new_token()  # unguessable; journaled, so a replay uses the same
    asks = callbacks.request_json(request, f"{task_id}.{token}", label, task_id)
    now = now_s()
    created = epoch_to_datetime(now)
    assert created is not None
    expires_at = now + timeout_s if timeout_s is not None else None
    caller.record.callbacks[token] = OpenCallback(
        key=key,
        name=label,
        created_at=created,
        timeout_at=epoch_to_datetime(expires_at),
        heartbeat_timeout_s=heartbeat_s,
        heartbeat_at=created,
        request=asks,
    )
    # Its timeout is journaled with it: a replayed turn gives the same link.
    caller.done(JournalEntry(key, label, kind=EntryKind.CALLBACK, ref=token, deadline=expires_at))
    # The id must be in the stored record before anyone outside can hold it: a client
    # refuses ids the record does not list.
    caller.save()
    return Callback(caller, token, label, expires_at)


def result(caller: Caller, callback: Callback) -> Any:
    """``callback.result()`` journaled in ``caller``'s context."""
    name = f"{callback.name}.result"
    key, entry = caller.enter(name, EntryKind.CALLBACK_RESULT)
    if entry is not None and not entry.partial:
        return _outcome(caller, entry)
    token = callback.token
    entry = entry or JournalEntry(key, name, kind=EntryKind.CALLBACK_RESULT, ref=token)
    open_callback = caller.record.callbacks.get(token)
    if open_callback is None:  # awaited before in this task: the same outcome again
        earlier = _earlier_outcome(caller, token)
        caller.done(earlier)
        return _outcome(caller, earlier)
    inbox = caller.inbox
    for attempt in range(2):
        if inbox.listing.has_answer(token):
            answer = inbox.answer(token)
            if answer is not None:
                entry.ok, entry.result = answer.ok, answer.result
                if not answer.ok:
                    entry.error = _failure(answer.error_type, answer.message)
                return _close(caller, entry, callback)
        heard(open_callback, token, inbox.listing, inbox.heartbeat)
        deadline = open_callback.deadline()
        if deadline is not None and now_s() >= deadline.timestamp():
            # Closed in the inbox first: a sender's answer after this is refused.
            answer = inbox.close_callback(token, _timeout(callback.name, open_callback))
            entry.ok, entry.result = answer.ok, answer.result
            if not answer.ok:
                entry.error = _failure(answer.error_type, answer.message)
            return _close(caller, entry, callback)
        if attempt == 0:
            caller.listing_fresh()
    entry.deadline = deadline.timestamp() if deadline is not None else None
    # Its request stays in record.callbacks alone: client.status shows it from there.
    waiter = Waiter(kind=CALLBACK.kind, name=callback.name, id=callback.id, deadline=deadline)
    raise caller.wait(entry, waiter, f"waiting for callback {callback.name!r}")


def _close(caller: Caller, entry: JournalEntry, callback: Callback) -> Any:
    caller.record.callbacks.pop(callback.token, None)
    caller.done(entry)
    return _outcome(caller, entry)


def _earlier_outcome(caller: Caller, token: str) -> JournalEntry:
    for entry in reversed(list(walk(caller.record.journal))):  # any context's
        if entry.kind == EntryKind.CALLBACK_RESULT and entry.ref == token and not entry.partial:
            return JournalEntry(
                entry.key,
                entry.name,
                ok=entry.ok,
                result=entry.result,
                error=entry.error,
                kind=EntryKind.CALLBACK_RESULT,
                ref=token,
            )
    raise ContinuumError(
        "this callback was created in an earlier turn; await it in the turn that made it",
        task_id=caller.task_id,
        hint="create the callback and call cb.result() in the same turn",
    )


def _outcome(caller: Caller, entry: JournalEntry) -> Any:
    if entry.ok:
        return entry.result
    error = entry.error
    assert error is not None
    if error.type == "CallbackTimeoutError":
        raise CallbackTimeoutError(error.message, task_id=caller.task_id, step=entry.key)
    raise CallbackFailedError(
        error.message, error_type=error.type, task_id=caller.task_id, step=entry.key
    )


def _failure(error_type: str | None, message: str | None) -> ErrorInfo:
    return ErrorInfo(type=error_type or "CallbackFailed", message=message or "the callback failed")


def _timeout(name: str, callback: OpenCallback) -> ErrorInfo:
    now = now_s()
    if callback.timeout_at is not None and now >= callback.timeout_at.timestamp():
        message = f"callback {name!r} was not answered before its timeout"
    else:
        message = f"callback {name!r} had no heartbeat for {callback.heartbeat_timeout_s:g}s"
    return ErrorInfo(type="CallbackTimeoutError", message=message)
