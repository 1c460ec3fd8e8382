"""The client: start tasks and read their status and results from outside a task."""

from __future__ import annotations

import sys
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from continuum._base.clock import utcnow
from continuum._base.json_values import dump_json, model_to_json
from continuum._define.settings import Settings
from continuum._fanout.child_tasks import ChildIdTakenError, names_slot, unstarted_predecessor
from continuum._ops.steering import Steering
from continuum._record.continuation import Continuations
from continuum._record.model import Status, TaskRecord, check_task_id
from continuum._record.persistence import Records
from continuum._record.waiting_for import ParentLink
from continuum._waits.answers import Mail
from continuum._waits.kinds.registry import operation_of
from continuum.errors import (
    ConfigurationError,
    ContinuumError,
    InvalidInputError,
    PayloadTooLargeError,
    RecordExistsError,
    TaskFailedError,
    TaskNotFinishedError,
    describe_errors,
)

if TYPE_CHECKING:
    from continuum._ops.status import TaskStatus
    from continuum._turn.tasks import Registry


class Client(Mail, Steering):
    """Starts tasks and reads them back.

    Args:
        records: where the records are.
        continuations: where continuations are sent.
        registry: the app's tasks (only ``start`` needs them).
        settings: the app's limits.

    Example:
        >>> client = app.client()  # doctest: +SKIP
        >>> task_id = client.start("research", {"topic": "tides"})  # doctest: +SKIP
        >>> client.status(task_id).status  # doctest: +SKIP
        <Status.SUSPENDED: 'suspended'>
    """

    def __init__(
        self,
        records: Records,
        continuations: Continuations,
        *,
        registry: Registry | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.records = records
        self.continuations = continuations
        self.registry = registry
        self.settings = settings or Settings()

    def start_child(
        self,
        task_name: str,
        input: Any,
        task_id: str,
        parent: ParentLink,
        *,
        send: bool,
        traceparent: str | None = None,
    ) -> str:
        """Start a child task (``ctx.invoke``, ``ctx.map_tasks``); ``send=False`` only creates
        its record, pending (its predecessor or its parent starts it); ``traceparent``: the
        parent's span it hangs under."""
        return self._start(
            task_name, input, task_id, parent=parent, send=send, traceparent=traceparent
        )

    def start(self, task_name: str, input: Any, task_id: str | None = None) -> str:
        """Start ``task_name`` with ``input`` as its initial state; return the task id.

        Starting the same ``task_id`` again starts nothing new and returns the same id.
        Called inside an OpenTelemetry span, the record keeps that span's W3C trace context,
        and the task's trace links to it.

        Raises:
            UnknownTaskError: the app has no task of that name.
            InvalidInputError: the input does not validate against the task's state model.
            InvalidTaskIdError: the id is not a safe S3 key segment.
            PayloadTooLargeError: the input is over the app's ``max_state_bytes``.
        """
        return self._start(task_name, input, task_id, traceparent=caller_traceparent())

    def _start(
        self,
        task_name: str,
        input: Any,
        task_id: str | None,
        *,
        parent: ParentLink | None = None,
        send: bool = True,
        traceparent: str | None = None,
    ) -> str:
        if self.registry is None:
            raise ConfigurationError("this client has no task registry; use app.client()")
        task = self.registry.task(task_name)
        return self._create(
            task.name,
            task.state_model,
            task.version,
            input,
            task_id,
            parent=parent,
            send=send,
            traceparent=traceparent,
        )

    def start_declared(
        self,
        task_name: str,
        state_model: type[BaseModel],
        version: int,
        input: Any,
        task_id: str | None = None,
    ) -> str:
        """:meth:`start`, for a task known by its declaration rather than this client's registry:
        its name, its state model and its state version, as ``@app.task`` declares them
        (``continuum start`` reads them from the app's source without importing the app).

        Raises:
            InvalidInputError, InvalidTaskIdError, PayloadTooLargeError: as :meth:`start`.
        """
        return self._create(
            task_name, state_model, version, input, task_id, traceparent=caller_traceparent()
        )

    def _create(
        self,
        task_name: str,
        state_model: type[BaseModel],
        version: int,
        input: Any,
        task_id: str | None,
        *,
        parent: ParentLink | None = None,
        send: bool = True,
        traceparent: str | None = None,
    ) -> str:
        """Validate the input, create the record (once per id), then send the first
        continuation: everything that can refuse the input refuses it before the record."""
        given = check_task_id(task_id) if task_id is not None else None
        # A refusal names the caller's id only: a generated one names no task that exists.
        state = self._validate(task_name, state_model, input, given)
        size = len(dump_json(state))
        if size > self.settings.max_state_bytes:
            raise PayloadTooLargeError(
                f"input state is {size} bytes; the limit is {self.settings.max_state_bytes}",
                task_id=given,
            )
        task_id = given or uuid.uuid4().hex
        record = TaskRecord(
            task_id=task_id,
            task_name=task_name,
            state=state,
            state_version=version,
            parent=parent,
            max_value_bytes=self.settings.max_state_bytes,
            traceparent=traceparent,
        )
        try:
            self.records.create(record)
        except RecordExistsError:
            existing, _ = self.records.load(task_id)
            if existing.task_name != task_name:
                raise InvalidInputError(
                    f"task id is already used by task {existing.task_name!r}",
                    task_id=task_id,
                    hint="choose another task id",
                ) from None
            if parent is not None and not names_slot(existing.parent, parent):
                raise ChildIdTakenError(
                    f"child task id {task_id} is taken by a task that is not a child of "
                    f"{parent.task_id} (it was started earlier under that id)",
                    task_id=task_id,
                ) from None
            if existing.status != Status.PENDING or not send:
                return task_id
            # The first start may have died before sending: send again, harmlessly.
        if send:
            self.continuations.send(task_id, generation=0, reason="start")
        return task_id

    def send_to_wait(
        self,
        task_id: str,
        kind: str,
        name: str,
        payload: Any = None,
        *,
        answer_id: str | None = None,
    ) -> None:
        """Answer the wait of ``kind`` named ``name`` that the task waits for now (as
        ``status(task_id).waiting_for`` lists it) with a JSON ``payload``, as its kind takes
        answers (a callback's result, a signal, or a kind added to the registry).

        Example:
            >>> client.send_to_wait("order-7", "signal", "go", {"fast": True})  # doctest: +SKIP

        Raises:
            ContinuumError: the task waits for no such wait now, or its kind is not answered
                from outside; and what the kind's own sending refuses (nothing was written).
        """
        check_task_id(task_id)
        record, _ = self.records.load(task_id)
        waiting = record.waiting_for if record.status == Status.WAITING else []
        for waiter in waiting:
            if waiter.kind == kind and waiter.name == name:
                operation_of(kind).send(self, task_id, waiter, payload, answer_id=answer_id)
                return
        now = ", ".join(f"{w.kind} {w.name!r}" for w in waiting) or "nothing"
        raise ContinuumError(
            f"the task waits for no {kind} {name!r} now (it waits for {now})",
            task_id=task_id,
            hint="client.status(task_id).waiting_for lists what it waits for; a signal may "
            "also be sent before its wait with client.signal",
        )

    def status(self, task_id: str) -> TaskStatus:
        """The task's status, counters, and its result or error once finished."""
        # Loaded on first use: an operator's view, which a worker's cold start never needs.
        from continuum._ops.status import task_status

        record, _ = self.records.load(check_task_id(task_id))
        return task_status(record, self.records.inbox, links=self.settings.links())

    def resume(self, task_id: str) -> int:
        """Send the continuation of the task's current generation again; return it.

        For an operator: after restoring a record by hand (bucket versioning keeps every
        checkpoint), or whenever a task seems stuck. Always safe: the record fences the
        message like any duplicate, so a task that is running or finished is not disturbed.

        Raises:
            ContinuumError: the task is a batch child waiting for room (its batch starts it).
        """
        record, _ = self.records.load(check_task_id(task_id))
        _refuse_a_child_waiting_for_room(self.records, record)
        if not record.status.finished:
            self.continuations.send(task_id, generation=record.generation, reason="resume")
        return record.generation

    def resume_pending(self, *, older_than_s: float = 600.0) -> list[str]:
        """Resume every task still ``pending`` after ``older_than_s`` seconds; return their ids.

        A ``start`` whose caller died between creating the record and sending the first
        continuation leaves the task pending with no message; this sweep sends it. Tasks
        that cannot be read are skipped. It reads every record under the prefix.
        """
        cutoff = utcnow() - timedelta(seconds=older_than_s)
        resumed = []
        for task_id in self.records.task_ids():
            try:
                record, _ = self.records.load(task_id)
            except ContinuumError:
                continue
            if record.status != Status.PENDING or record.created_at >= cutoff:
                continue
            if unstarted_predecessor(self.records, record) is None:  # else its batch starts it
                self.continuations.send(task_id, generation=record.generation, reason="sweep")
                resumed.append(task_id)
        return resumed

    def result(self, task_id: str) -> Any:
        """The result of a task that succeeded.

        Raises:
            TaskFailedError: the task failed or was cancelled (the error says why).
            TaskNotFinishedError: the task is still going.
        """
        status = self.status(task_id)
        if status.status == Status.SUCCEEDED:
            return status.result
        if status.status.finished:
            reason = status.error.message if status.error else status.status.value
            raise TaskFailedError(
                f"task {status.status.value}: {reason}",
                task_id=task_id,
                step=status.error.step if status.error else None,
            )
        raise TaskNotFinishedError(
            f"task is {status.status.value}", task_id=task_id, generation=status.generation
        )

    def _validate(
        self, task_name: str, state_model: type[BaseModel], input: Any, task_id: str | None
    ) -> Any:
        try:
            if isinstance(input, state_model):
                model = input
            elif isinstance(input, str | bytes):
                model = state_model.model_validate_json(input)
            else:
                model = state_model.model_validate(input)
        except ValidationError as exc:
            raise InvalidInputError(
                f"input for task {task_name!r} does not validate against "
                f"{state_model.__name__}: {describe_errors(exc)}",
                task_id=task_id,
            ) from exc
        return model_to_json(model, what=f"the input of task {task_name!r}", task_id=task_id)


def caller_traceparent() -> str | None:
    """The W3C ``traceparent`` of the OpenTelemetry span open around this call, if any
    (OpenTelemetry is the user's: read only when their code loaded it)."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _refuse_a_child_waiting_for_room(records: Records, record: TaskRecord) -> None:
    """A batch child not started yet is its batch's to start: a start from outside would run
    more children at once than the batch's ``max_concurrency``."""
    before = unstarted_predecessor(records, record)
    if before is None or record.parent is None:
        return
    link = record.parent
    raise ContinuumError(
        f"task {record.task_id} is child {link.index} of batch {link.batch} of task "
        f"{link.task_id} (max_concurrency={link.max_concurrency}) and has not started: its "
        f"parent's batch starts it when a slot frees (when task {before} finishes), so a "
        "resume now would run more children of the batch at once than it allows",
        task_id=record.task_id,
        hint=f"wait for task {before}, or cancel task {link.task_id} to stop the batch",
    )
