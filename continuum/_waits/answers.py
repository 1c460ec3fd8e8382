"""What the outside world sends a task: callback answers and heartbeats, signals, cancel.

Each is written to the task's inbox (``inbox.py``) and never to its record; then the sender
reads the record again and wakes the generation it finds (a continuation of kind ``wake``),
so that a waiting task runs as soon as what it waits for is there. Bad input changes nothing:
an unknown or forged callback id, a finished task, a payload JSON cannot hold or over the
task's limit (its worker's ``max_state_bytes``, which the record holds; at most
``MAX_INBOX_VALUE_BYTES``), a malformed name; each is a clear error before anything is written.

Defined results of repeated sends:

- a second answer of one callback raises CallbackError ("already answered"), and the task
  keeps the first; a heartbeat after the answer raises the same;
- an answer after the task took the callback's timeout raises CallbackError ("timed out"):
  the worker closes the callback in the inbox before the task sees the timeout, and its
  create and the sender's race on one key, so an answer accepted is one the task takes;
- a signal with a ``signal_id`` already sent under that name is a no-op (the id is returned)
  but for its wake, sent again: a retry completes what a failed wake or a dead sender left;
  a second answer is refused the same way, after its wake;
- a second cancel request is a no-op: the first reason wins; a request after the finish
  closed the task to them raises TaskFinishedError (the finish and a request race on one key).
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import TypeAdapter

from continuum._base.clock import utcnow
from continuum._base.json_shapes import describe_expected, expected_shape, mismatch
from continuum._base.json_values import dump_json, to_json
from continuum._record.continuation import Continuations
from continuum._record.inbox import MAX_INBOX_MESSAGE_CHARS, MAX_INBOX_VALUE_BYTES
from continuum._record.inbox_items import CallbackAnswer
from continuum._record.model import TaskRecord, check_task_id
from continuum._record.persistence import Records
from continuum._record.waiting_for import OpenCallback, Signal, check_name
from continuum.errors import (
    CallbackError,
    PayloadTooLargeError,
    RecordNotFoundError,
    TaskFinishedError,
)

#: A callback token: 32 hex digits (``secrets.token_hex(16)``).
_TOKEN_LENGTH = 32
_ANY: TypeAdapter[Any] = TypeAdapter(Any)


class Mail:
    """The sending half of the client (``client.Client`` mixes it in)."""

    records: Records
    continuations: Continuations

    # -- callbacks -------------------------------------------------------------------------------

    def complete_callback(self, callback_id: str, result: Any = None) -> None:
        """Answer a callback with ``result`` (JSON); the waiting task takes it.

        Raises:
            CallbackError: the id is unknown or forged, already answered, or its task is
                finished; or the result does not fit the shape the callback's request
                declares (the error says what it expects). Nothing was written.
            ContinuumError: the result is not JSON or too large. Nothing was written.
        """
        task_id, token, record = self._open_callback(callback_id)
        value = _json_value(result, what="the callback result", task_id=task_id)
        _check_size(value, self._limit(record), what="the callback result", task_id=task_id)
        _check_answer(record.callbacks[token], value, task_id)
        self._answer(task_id, token, CallbackAnswer(ok=True, result=value, answered_at=utcnow()))

    def fail_callback(self, callback_id: str, error_type: str, message: str) -> None:
        """Fail a callback: ``cb.result()`` raises CallbackFailedError(error_type, message).

        Raises:
            CallbackError: as for ``complete_callback``.
        """
        task_id, token, _ = self._open_callback(callback_id)
        answer = CallbackAnswer(
            ok=False,
            error_type=str(error_type)[:200] or "CallbackFailed",
            message=str(message)[:MAX_INBOX_MESSAGE_CHARS],
            answered_at=utcnow(),
        )
        self._answer(task_id, token, answer)

    def heartbeat_callback(self, callback_id: str) -> None:
        """Tell a callback's task that the outside world still works on it (moves its
        heartbeat deadline). No wake: the task looks at it when the old deadline comes.

        Raises:
            CallbackError: as for ``complete_callback``.
        """
        task_id, token, _ = self._open_callback(callback_id)
        self.records.inbox.put_heartbeat(task_id, token)

    def _open_callback(self, callback_id: str) -> tuple[str, str, TaskRecord]:
        task_id, _, token = str(callback_id).rpartition(".")
        forged = CallbackError(
            f"unknown callback id {str(callback_id)[:200]!r}",
            hint="use the id exactly as cb.id gave it (task id, a dot, 32 hex digits)",
        )
        if len(token) != _TOKEN_LENGTH or not all(c in "0123456789abcdef" for c in token):
            raise forged
        try:
            check_task_id(task_id)
        except Exception:
            raise forged from None
        try:
            record, _ = self.records.load(task_id)
        except RecordNotFoundError:
            raise forged from None
        if record.status.finished:
            raise CallbackError(
                f"the task of this callback is {record.status.value}",
                task_id=task_id,
                hint="a finished task takes no callback answers",
            )
        answer = self.records.inbox.answer(task_id, token)
        if answer is not None:
            self._wake(task_id)  # a retry: the first attempt's wake may never have been sent
            raise _closed(answer, task_id)
        if token not in record.callbacks:
            forged.task_id = task_id
            raise forged
        return task_id, token, record

    def _answer(self, task_id: str, token: str, answer: CallbackAnswer) -> None:
        if not self.records.inbox.put_answer(task_id, token, answer):
            self._wake(task_id)  # as in _open_callback
            raise _closed(self.records.inbox.answer(task_id, token), task_id)
        self._wake(task_id)

    # -- signals and cancel ----------------------------------------------------------------------

    def signal(
        self, task_id: str, name: str, payload: Any = None, *, signal_id: str | None = None
    ) -> str:
        """Send signal ``name`` with a JSON ``payload`` to the task's mailbox; return its id.

        It is kept until a ``ctx.wait_for_signal(name)`` takes it (the oldest first). Sending
        the same ``signal_id`` again under the same name is a no-op.

        Raises:
            TaskFinishedError: the task finished (nothing was written).
            RecordNotFoundError: there is no such task.
            ContinuumError: a malformed name or id, or a payload that is not JSON or too large.
        """
        check_task_id(task_id)
        check_name(name, what="signal name", task_id=task_id)
        signal_id = check_name(signal_id or uuid.uuid4().hex, what="signal id", task_id=task_id)
        value = _json_value(payload, what="the signal payload", task_id=task_id)
        record = self._unfinished(task_id, "signal")
        signal = Signal(id=signal_id, name=name, payload=value, sent_at=utcnow())
        # The task journals the whole signal: its id, name and time count too.
        limit = self._limit(record)
        _check_size(signal.model_dump(mode="json"), limit, what="the signal", task_id=task_id)
        self.records.inbox.put_signal(task_id, signal)
        # Also when it was there already: a retry after a wake that failed, or a sender that
        # died between the two, must still wake the task (a duplicate wake is harmless).
        self._wake(task_id)
        return signal_id

    def cancel(self, task_id: str, reason: str | None = None) -> None:
        """Ask the task to stop: it sees TaskCancelledError at its next step, wait or turn
        boundary (a waiting or suspended task is woken for it), may run cleanup steps, and
        ends ``cancelled``, even if its turn returned meanwhile. A second request is a no-op
        (the first reason wins).

        Raises:
            TaskFinishedError: the task already finished, or is finishing: its finish closed
                it to cancel requests before this one came (it ends as its code decided).
            RecordNotFoundError: there is no such task.
        """
        check_task_id(task_id)
        self._unfinished(task_id, "cancel")
        reason = None if reason is None else str(reason)[:MAX_INBOX_MESSAGE_CHARS]
        if not self.records.inbox.put_cancel(task_id, reason):
            first = self.records.inbox.cancel(task_id)
            if first is not None and first.closed:  # the finish came first
                raise TaskFinishedError(
                    "the task is finishing: it ends as its code decided, not cancelled",
                    task_id=task_id,
                    hint="its finish closed it to cancel requests before this one came",
                )
        self._wake(task_id)

    def _unfinished(self, task_id: str, what: str) -> TaskRecord:
        record, _ = self.records.load(task_id)
        if record.status.finished:
            raise TaskFinishedError(
                f"cannot {what} a task that is {record.status.value}",
                task_id=task_id,
                hint="start a new task instead",
            )
        return record

    def _limit(self, record: TaskRecord) -> int:
        """The largest answer or signal the task takes: its worker's limit as the record says,
        else this client's app's; at most the inbox's own."""
        task_limit = record.max_value_bytes or self.records.max_value_bytes
        return min(MAX_INBOX_VALUE_BYTES, task_limit or MAX_INBOX_VALUE_BYTES)

    def _wake(self, task_id: str) -> None:
        """After writing to the inbox: read the record, wake the generation it has now."""
        record, _ = self.records.load(task_id)
        if not record.status.finished:
            self.continuations.send(
                task_id, generation=record.generation, reason="wake", kind="wake"
            )


def _check_answer(callback: OpenCallback, value: Any, task_id: str) -> None:
    """Refuse an answer that does not fit the shape the callback's request declares."""
    schema = expected_shape(callback.request)
    why = mismatch(value, schema) if schema is not None else None
    if why is not None:
        raise CallbackError(
            f"callback {callback.name!r} does not take this answer: {why}",
            task_id=task_id,
            hint=f"it expects {describe_expected(callback.request)}",
        )


def _closed(answer: CallbackAnswer | None, task_id: str) -> CallbackError:
    """Why an answer was refused: another came first, or the task took the timeout."""
    if answer is not None and answer.timed_out:
        return CallbackError(
            f"this callback timed out before the answer came: {answer.message}; the task "
            "did not take it",
            task_id=task_id,
            hint="the task saw CallbackTimeoutError; answer it on a new callback",
        )
    return CallbackError(
        "this callback was already answered; the task keeps the first answer", task_id=task_id
    )


def _json_value(value: Any, *, what: str, task_id: str) -> Any:
    json_value = to_json(_ANY, value, what=what, task_id=task_id, typed=False)
    _check_size(json_value, MAX_INBOX_VALUE_BYTES, what=what, task_id=task_id)
    return json_value


def _check_size(json_value: Any, limit: int, *, what: str, task_id: str) -> None:
    size = len(dump_json(json_value))
    if size > limit:
        raise PayloadTooLargeError(
            f"{what} is {size} bytes as JSON; the task takes at most {limit} (nothing was sent)",
            task_id=task_id,
            hint="store large data elsewhere (your own S3 object) and send a reference",
        )
