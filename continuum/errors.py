"""Errors: one root, each carrying the facts a person needs and what to do next.

Every error continuum raises derives from :class:`ContinuumError`. Each names the task (when
one is known), the step and generation where that helps, and a ``hint`` that says what to do.
Errors about the stored record share one parent, :class:`RecordError`.
"""

from __future__ import annotations

from pydantic import ValidationError


class ContinuumError(Exception):
    """The root of every error continuum raises.

    Attributes:
        task_id: the task concerned, when known.
        step: the step key concerned, when known.
        generation: the record generation concerned, when known.
        hint: what the user can do about it.
    """

    def __init__(
        self,
        message: str,
        *,
        task_id: str | None = None,
        step: str | None = None,
        generation: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.task_id = task_id
        self.step = step
        self.generation = generation
        self.hint = hint
        super().__init__(self.rendered())

    def rendered(self) -> str:
        """The message with its facts and hint, as ``str(error)`` shows it."""
        facts = [
            f"{name}={value!r}"
            for name, value in (
                ("task_id", self.task_id),
                ("step", self.step),
                ("generation", self.generation),
            )
            if value is not None
        ]
        text = self.message
        if facts:
            text += f" [{', '.join(facts)}]"
        if self.hint:
            ended = text.rstrip().endswith((".", "!", "?", "]", ")"))
            text += f"{'' if ended else '.'} Hint: {self.hint}"
        return text


class ConfigurationError(ContinuumError):
    """continuum is not set up correctly (missing bucket, queue, duplicate names, ...)."""


class UnknownTaskError(ContinuumError):
    """A task name that this app does not define."""


class InvalidTaskIdError(ContinuumError):
    """A task id that is not a safe S3 key segment."""


class InvalidInputError(ContinuumError):
    """Input or saved state that the task's state model rejects."""


class PayloadTooLargeError(ContinuumError):
    """A state, result or cursor over the configured maximum size."""


class UnserializableValueError(ContinuumError):
    """A value JSON cannot hold (NaN, infinity) or whose type a replay could not rebuild."""


class BadMessageError(ContinuumError):
    """A continuation message that cannot be parsed, is forged, or is not a continuation."""


class MessageTooNewError(ContinuumError):
    """A continuation written by a newer continuum: retried until a newer worker takes it."""


class RecordError(ContinuumError):
    """The parent of every error about a task's stored record."""


class RecordNotFoundError(RecordError):
    """No record exists for the task id."""


class RecordCorruptError(RecordError):
    """A record (or blob) that exists but does not parse or fails its checksum."""


class BlobMissingError(RecordCorruptError):
    """The record points at a blob that is gone, and no stored version of it could be found."""


class RecordConflictError(RecordError):
    """A conditional write lost: another worker moved the record (S3 412)."""


class RecordExistsError(RecordError):
    """A create found the record already there (S3 412 on If-None-Match)."""


class RecordTooNewError(RecordError):
    """The record was written by a newer continuum (record format) or newer task code
    (state version) than this worker runs: it is left untouched for a newer worker."""


class MigrationError(ContinuumError):
    """A saved state could not be migrated to the task's current version."""


class NonDeterminismError(ContinuumError):
    """A replayed turn called a different step than the journal recorded."""


class StepError(ContinuumError):
    """A step raised. Raised into the task function, live and on replay alike.

    Attributes:
        error_type: the class name of the exception the step raised.
        step_traceback: where the step raised (its last frames), when it was kept.
    """

    def __init__(
        self,
        message: str,
        *,
        error_type: str,
        step_traceback: str | None = None,
        **facts: object,
    ) -> None:
        self.error_type = error_type
        self.step_traceback = step_traceback
        super().__init__(message, **facts)  # type: ignore[arg-type]


class TaskFailedError(ContinuumError):
    """``Client.result`` on a task that failed."""


class TaskNotFinishedError(ContinuumError):
    """``Client.result`` on a task that has not finished yet."""


class LeaseHeldError(ContinuumError):
    """Another live worker holds the task's lease: the message must be retried later."""


def describe_errors(exc: ValidationError, *, most: int = 3) -> str:
    """The first few validation errors as ``where: what; ...``."""
    parts = []
    for err in exc.errors(include_url=False)[:most]:
        where = ".".join(str(part) for part in err["loc"]) or "value"
        parts.append(f"{where}: {err['msg']}")
    more = exc.error_count() - most
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


# -- waits ------------------------------------------------------------------------------------


class CallbackTimeoutError(ContinuumError):
    """A callback was not completed before its timeout, or its heartbeats stopped.

    Raised into the task by ``cb.result()``; the task may catch it.
    """


class CallbackFailedError(ContinuumError):
    """The outside world failed a callback (``client.fail_callback``).

    Attributes:
        error_type: the error type the outside world gave.
    """

    def __init__(self, message: str, *, error_type: str, **facts: object) -> None:
        self.error_type = error_type
        super().__init__(message, **facts)  # type: ignore[arg-type]


class ConditionNotMetError(ContinuumError):
    """``ctx.wait_for_condition`` ran out of attempts before its condition held."""


class TaskCancelledError(ContinuumError):
    """The task was cancelled (``client.cancel``). Raised into the task at its next step,
    wait or turn boundary; it may catch it and run cleanup steps, but it ends ``cancelled``.

    Attributes:
        reason: the reason the first cancel request gave, if any.
    """

    def __init__(self, message: str, *, reason: str | None = None, **facts: object) -> None:
        self.reason = reason
        super().__init__(message, **facts)  # type: ignore[arg-type]


class StepInterruptedError(ContinuumError):
    """An ``at_most_once`` step was started and its worker died before it was recorded: it
    is not run again (it may or may not have done its work)."""


class CallbackError(ContinuumError):
    """A callback id the client cannot answer: unknown, forged, already answered, or its
    task is finished. ``complete_callback``, ``fail_callback`` and ``heartbeat_callback``
    raise it; nothing was written."""


class TaskFinishedError(ContinuumError):
    """A signal or cancel request for a task that already finished; nothing was written."""


# -- fan-out ----------------------------------------------------------------------------------


class BatchError(ContinuumError):
    """Items of a batch failed (``BatchResult.values()`` or ``throw_if_error()``).

    Attributes:
        failures: ``(index, ErrorInfo)`` of each failed item.
    """

    def __init__(
        self, message: str, *, failures: list[tuple[int, object]], **facts: object
    ) -> None:
        self.failures = failures
        super().__init__(message, **facts)  # type: ignore[arg-type]


class ChildTaskError(ContinuumError):
    """A child task (``ctx.invoke``) failed or was cancelled.

    Attributes:
        child_id: the child task's id.
        error_type: the child's error type; ``message``: its error message.
        child_traceback: where the child's code raised (its last frames), when it was kept.
    """

    def __init__(
        self,
        message: str,
        *,
        child_id: str,
        error_type: str,
        child_traceback: str | None = None,
        **facts: object,
    ) -> None:
        self.child_id = child_id
        self.error_type = error_type
        self.child_traceback = child_traceback
        super().__init__(message, **facts)  # type: ignore[arg-type]
