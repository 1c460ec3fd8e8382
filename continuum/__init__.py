"""continuum: long-running tasks on AWS Lambda that suspend before the deadline and continue.

Everything public is imported from here (and test helpers from ``continuum.testing``); the
modules behind it are private.
"""

from typing import TYPE_CHECKING, Any

# First: it readies freezegun, if installed, before any model is built or any clock frozen.
import continuum._base.frozen_clocks  # noqa: F401
from continuum._app.app import Continuum
from continuum._define.callbacks import Callback
from continuum._define.observers import MessageHandled, Observer
from continuum._define.settings import Settings
from continuum._define.steps import Step, StepOptions
from continuum._record.model import Status, TaskRecord
from continuum._record.waiting_for import Signal, Waiter, WaitKind
from continuum._turn.context import TaskContext, current_context
from continuum._turn.tasks import Task
from continuum._worker.sqs_batch import LambdaContext
from continuum.backends.queue import ContinuationQueue
from continuum.backends.store import RecordStore
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
    "ContextEnded",
    "ContextStarted",
    "ContinuationQueue",
    "Continuum",
    "ContinuumError",
    "CrashedInvocation",
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
    "WaitEnded",
    "WaitKind",
    "WaitStarted",
    "Waiter",
    "current_context",
    "sync_schedules",
]

if TYPE_CHECKING:
    from continuum._define.completion import BatchResult, Completion, Item
    from continuum._define.events import (
        ContextEnded,
        ContextStarted,
        CrashedInvocation,
        InvocationEnded,
        InvocationStarted,
        StepEnded,
        StepStarted,
        TaskFinished,
        TaskParked,
        WaitEnded,
        WaitStarted,
    )
    from continuum._ops.client import Client
    from continuum._ops.schedule_sync import sync_schedules
    from continuum._ops.status import TaskStatus


#: The observer events a worker builds only when an observer wants them (``_define.events``).
_EVENTS = frozenset(
    {
        "ContextEnded",
        "ContextStarted",
        "CrashedInvocation",
        "InvocationEnded",
        "InvocationStarted",
        "StepEnded",
        "StepStarted",
        "TaskFinished",
        "TaskParked",
        "WaitEnded",
        "WaitStarted",
    }
)


def __getattr__(name: str) -> Any:
    # Imported on first use, thread safely (an import holds its module's lock until it is
    # done): a worker handling messages needs none of them.
    if name == "TaskStatus":
        from continuum._ops.status import TaskStatus

        return TaskStatus
    if name == "Client":
        from continuum._ops.client import Client

        return Client
    if name == "sync_schedules":
        from continuum._ops.schedule_sync import sync_schedules

        return sync_schedules
    if name in ("BatchResult", "Completion", "Item"):
        from continuum._define import completion

        return getattr(completion, name)
    if name in _EVENTS:
        from continuum._define import events

        return getattr(events, name)
    raise AttributeError(f"module 'continuum' has no attribute {name!r}")
