"""continuum: long-running tasks on AWS Lambda that suspend before the deadline and continue.

Everything public is imported from here (and test helpers from ``continuum.testing``); the
modules behind it are private.
"""

from continuum.app import Continuum
from continuum.batch import LambdaContext
from continuum.client import Client, TaskStatus
from continuum.context import TaskContext, current_context
from continuum.errors import (
    BadMessageError,
    BlobMissingError,
    ConfigurationError,
    ContinuumError,
    InvalidInputError,
    InvalidTaskIdError,
    MessageTooNewError,
    NonDeterminismError,
    PayloadTooLargeError,
    RecordConflictError,
    RecordCorruptError,
    RecordError,
    RecordExistsError,
    RecordNotFoundError,
    RecordTooNewError,
    StepError,
    TaskFailedError,
    TaskNotFinishedError,
    UnknownTaskError,
    UnserializableValueError,
)
from continuum.queue import ContinuationQueue
from continuum.record import Status, TaskRecord
from continuum.settings import Settings
from continuum.steps import Step, StepOptions
from continuum.store import RecordStore
from continuum.tasks import Task

__all__ = [
    "BadMessageError",
    "BlobMissingError",
    "Client",
    "ConfigurationError",
    "ContinuationQueue",
    "Continuum",
    "ContinuumError",
    "InvalidInputError",
    "InvalidTaskIdError",
    "LambdaContext",
    "MessageTooNewError",
    "NonDeterminismError",
    "PayloadTooLargeError",
    "RecordConflictError",
    "RecordCorruptError",
    "RecordError",
    "RecordExistsError",
    "RecordNotFoundError",
    "RecordStore",
    "RecordTooNewError",
    "Settings",
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
    "UnserializableValueError",
    "current_context",
]
