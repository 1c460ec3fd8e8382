"""continuum: long-running tasks on AWS Lambda that suspend before the deadline and continue.

Everything public is imported from here; the modules behind it are private.
"""

from continuum.app import Continuum, Task
from continuum.client import Client, TaskStatus
from continuum.context import TaskContext, current_context
from continuum.errors import (
    BadMessageError,
    ConfigurationError,
    ContinuumError,
    InvalidInputError,
    InvalidTaskIdError,
    NonDeterminismError,
    PayloadTooLargeError,
    RecordConflictError,
    RecordCorruptError,
    RecordNotFoundError,
    StepError,
    TaskFailedError,
    TaskNotFinishedError,
    UnknownTaskError,
)
from continuum.record import Status, TaskRecord
from continuum.steps import Step, StepOptions

__all__ = [
    "BadMessageError",
    "Client",
    "ConfigurationError",
    "Continuum",
    "ContinuumError",
    "InvalidInputError",
    "InvalidTaskIdError",
    "NonDeterminismError",
    "PayloadTooLargeError",
    "RecordConflictError",
    "RecordCorruptError",
    "RecordNotFoundError",
    "Status",
    "Step",
    "StepError",
    "StepOptions",
    "Task",
    "TaskContext",
    "TaskFailedError",
    "TaskNotFinishedError",
    "TaskRecord",
    "TaskStatus",
    "UnknownTaskError",
    "current_context",
]
