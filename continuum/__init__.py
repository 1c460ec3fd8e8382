"""continuum: long-running tasks on AWS Lambda that suspend before the deadline and continue.

Everything public is imported from here (and test helpers from ``continuum.testing``); the
modules behind it are private.
"""

from typing import TYPE_CHECKING, Any

from continuum.app import Continuum
from continuum.batch import LambdaContext
from continuum.callbacks import Callback
from continuum.context import TaskContext, current_context
from continuum.errors import (
    BadMessageError,
    BatchError,
    BlobMissingError,
    CallbackError,
    CallbackFailedError,
    CallbackTimeoutError,
    ChildTaskError,
    ConditionNotMetError,
    ConfigurationError,
    ContinuumError,
    InvalidInputError,
    InvalidTaskIdError,
    MessageTooNewError,
    MigrationError,
    NonDeterminismError,
    PayloadTooLargeError,
    RecordConflictError,
    RecordCorruptError,
    RecordError,
    RecordExistsError,
    RecordNotFoundError,
    RecordTooNewError,
    StepError,
    StepInterruptedError,
    TaskCancelledError,
    TaskFailedError,
    TaskFinishedError,
    TaskNotFinishedError,
    UnknownTaskError,
    UnserializableValueError,
)
from continuum.observers import (
    InvocationEnded,
    InvocationStarted,
    MessageHandled,
    Observer,
    StepEnded,
    StepStarted,
    TaskFinished,
    TaskParked,
)
from continuum.queue import ContinuationQueue
from continuum.record import Status, TaskRecord
from continuum.settings import Settings
from continuum.steps import Step, StepOptions
from continuum.store import RecordStore
from continuum.tasks import Task
from continuum.waiters import Signal, Waiter, WaitKind

__all__ = [
    "BadMessageError",
    "BatchError",
    "BatchResult",
    "BlobMissingError",
    "Callback",
    "CallbackError",
    "CallbackFailedError",
    "CallbackTimeoutError",
    "ChildTaskError",
    "Client",
    "Completion",
    "ConditionNotMetError",
    "ConfigurationError",
    "ContinuationQueue",
    "Continuum",
    "ContinuumError",
    "InvalidInputError",
    "InvalidTaskIdError",
    "InvocationEnded",
    "InvocationStarted",
    "Item",
    "LambdaContext",
    "MessageHandled",
    "MessageTooNewError",
    "MigrationError",
    "NonDeterminismError",
    "Observer",
    "PayloadTooLargeError",
    "RecordConflictError",
    "RecordCorruptError",
    "RecordError",
    "RecordExistsError",
    "RecordNotFoundError",
    "RecordStore",
    "RecordTooNewError",
    "Settings",
    "Signal",
    "Status",
    "Step",
    "StepEnded",
    "StepError",
    "StepInterruptedError",
    "StepOptions",
    "StepStarted",
    "Task",
    "TaskCancelledError",
    "TaskContext",
    "TaskFailedError",
    "TaskFinished",
    "TaskFinishedError",
    "TaskNotFinishedError",
    "TaskParked",
    "TaskRecord",
    "TaskStatus",
    "UnknownTaskError",
    "UnserializableValueError",
    "WaitKind",
    "Waiter",
    "current_context",
]

if TYPE_CHECKING:
    from continuum.client import Client
    from continuum.completion import BatchResult, Completion, Item
    from continuum.status import TaskStatus


def __getattr__(name: str) -> Any:
    # Imported on first use, thread safely (an import holds its module's lock until it is
    # done): a worker handling messages needs none of them. The client (with its mail and
    # steering) costs about 1 ms of the worker's cold import, the batch models of fan-out
    # about 2 ms, the operator's status view about 2 ms.
    if name == "TaskStatus":
        from continuum.status import TaskStatus

        return TaskStatus
    if name == "Client":
        from continuum.client import Client

        return Client
    if name in ("BatchResult", "Completion", "Item"):
        from continuum import completion

        return getattr(completion, name)
    raise AttributeError(f"module 'continuum' has no attribute {name!r}")
