"""Errors: one root, each carrying the facts a person needs and what to do next.

Every error continuum raises derives from :class:`ContinuumError`. Each names the task (when
one is known), the step and generation where that helps, and a ``hint`` that says what to do.
"""

from __future__ import annotations


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
        super().__init__(self._render())

    def _render(self) -> str:
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
            text += f" Hint: {self.hint}"
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
    """A state or step result over the configured maximum size."""


class BadMessageError(ContinuumError):
    """A continuation message that cannot be parsed or is not a continuation."""


class RecordNotFoundError(ContinuumError):
    """No record exists for the task id."""


class RecordCorruptError(ContinuumError):
    """A record (or blob) that exists but does not parse or fails its checksum."""


class RecordConflictError(ContinuumError):
    """A conditional write lost: another worker moved the record (S3 412)."""


class RecordExistsError(ContinuumError):
    """A create found the record already there (S3 412 on If-None-Match)."""


class NonDeterminismError(ContinuumError):
    """A replayed turn called a different step than the journal recorded."""


class StepError(ContinuumError):
    """A step raised. Raised into the task function, live and on replay alike.

    Attributes:
        error_type: the class name of the exception the step raised.
    """

    def __init__(self, message: str, *, error_type: str, **facts: object) -> None:
        self.error_type = error_type
        super().__init__(message, **facts)  # type: ignore[arg-type]


class TaskFailedError(ContinuumError):
    """``Client.result`` on a task that failed."""


class TaskNotFinishedError(ContinuumError):
    """``Client.result`` on a task that has not finished yet."""


class LeaseHeldError(ContinuumError):
    """Another live worker holds the task's lease: the message must be retried later."""
