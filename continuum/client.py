"""The client: start tasks and read their status and results from outside a task."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from continuum.errors import (
    InvalidInputError,
    PayloadTooLargeError,
    RecordExistsError,
    TaskFailedError,
    TaskNotFinishedError,
    UnknownTaskError,
)
from continuum.record import (
    Counters,
    ErrorInfo,
    Status,
    TaskRecord,
    check_task_id,
    describe_errors,
    dump_json,
)

if TYPE_CHECKING:
    from continuum.app import Continuum, Task


class TaskStatus(BaseModel):
    """What a task is doing, as ``Client.status`` reports it."""

    task_id: str
    task_name: str
    status: Status
    generation: int
    turn: int
    result: Any = None
    error: ErrorInfo | None = None
    suspend_reason: str | None = None
    counters: Counters
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None


class Client:
    """Starts tasks and reads them back.

    Example:
        >>> client = app.client()  # doctest: +SKIP
        >>> task_id = client.start("research", {"topic": "tides"})  # doctest: +SKIP
        >>> client.status(task_id).status  # doctest: +SKIP
        <Status.SUSPENDED: 'suspended'>
    """

    def __init__(self, app: Continuum) -> None:
        self.app = app

    def start(self, task_name: str, input: Any, task_id: str | None = None) -> str:
        """Start ``task_name`` with ``input`` as its initial state; return the task id.

        Starting the same ``task_id`` again starts nothing new and returns the same id.

        Raises:
            UnknownTaskError: the app has no task of that name.
            InvalidInputError: the input does not validate against the task's state model.
            InvalidTaskIdError: the id is not a safe S3 key segment.
        """
        task = self._task(task_name)
        task_id = check_task_id(task_id) if task_id is not None else uuid.uuid4().hex
        state = self._validate(task, input, task_id)
        size = len(dump_json(state))
        if size > self.app.max_state_bytes:
            raise PayloadTooLargeError(
                f"input state is {size} bytes; the limit is {self.app.max_state_bytes}",
                task_id=task_id,
            )
        record = TaskRecord(
            task_id=task_id, task_name=task.name, state=state, state_version=task.version
        )
        store, queue = self.app.store, self.app.queue
        try:
            store.create(record)
        except RecordExistsError:
            existing, _ = store.load(task_id)
            if existing.task_name != task.name:
                raise InvalidInputError(
                    f"task id is already used by task {existing.task_name!r}",
                    task_id=task_id,
                    hint="choose another task id",
                ) from None
            if existing.status != Status.PENDING:
                return task_id
            # The first start may have died before sending: send again, harmlessly.
        queue.send(task_id=task_id, generation=0, reason="start")
        return task_id

    def status(self, task_id: str) -> TaskStatus:
        """The task's status, counters, and its result or error once finished."""
        record, _ = self.app.store.load(check_task_id(task_id))
        return TaskStatus.model_validate(record.model_dump(include=set(TaskStatus.model_fields)))

    def resume(self, task_id: str) -> int:
        """Send the continuation of the task's current generation again; return it.

        For an operator: after restoring a record by hand (bucket versioning keeps every
        checkpoint), or whenever a task seems stuck. Always safe: the record fences the
        message like any duplicate, so a task that is running or finished is not disturbed.
        """
        record, _ = self.app.store.load(check_task_id(task_id))
        if not record.status.finished:
            self.app.queue.send(task_id=task_id, generation=record.generation, reason="resume")
        return record.generation

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

    def _task(self, task_name: str) -> Task[Any]:
        task = self.app.tasks.get(task_name)
        if task is None:
            known = ", ".join(sorted(self.app.tasks)) or "none"
            raise UnknownTaskError(f"unknown task {task_name!r}; this app defines: {known}")
        return task

    def _validate(self, task: Task[Any], input: Any, task_id: str) -> Any:
        try:
            if isinstance(input, task.state_model):
                model = input
            elif isinstance(input, str | bytes):
                model = task.state_model.model_validate_json(input)
            else:
                model = task.state_model.model_validate(input)
        except ValidationError as exc:
            raise InvalidInputError(
                f"input for task {task.name!r} does not validate against "
                f"{task.state_model.__name__}: {describe_errors(exc)}",
                task_id=task_id,
            ) from exc
        return model.model_dump(mode="json")
