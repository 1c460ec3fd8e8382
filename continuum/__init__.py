"""continuum: long-running tasks on AWS Lambda that suspend before the deadline and continue.

Everything public is imported from here (and test helpers from ``continuum.testing``); the
modules behind it are private. Only the errors load with the package: the rest loads on first
use, so that a command that needs a few names (``continuum status``) does not pay for all.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

# First: it readies freezegun, if installed, before any model is built or any clock frozen.
from continuum._base.frozen_clocks import when_freezegun_loads
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
    "ContextEntered",
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
    "OperationsSaved",
    "PayloadTooLargeError",
    "RecordConflictError",
    "RecordCorruptError",
    "RecordError",
    "RecordExistsError",
    "RecordNotFoundError",
    "RecordStore",
    "RecordTooNewError",
    "SavedOperation",
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
    from continuum._app.app import Continuum
    from continuum._define.callbacks import Callback
    from continuum._define.completion import BatchResult, Completion, Item
    from continuum._define.events import (
        ContextEnded,
        ContextEntered,
        ContextStarted,
        CrashedInvocation,
        InvocationEnded,
        InvocationStarted,
        OperationsSaved,
        SavedOperation,
        StepEnded,
        StepStarted,
        TaskFinished,
        TaskParked,
        WaitEnded,
        WaitStarted,
    )
    from continuum._define.observers import MessageHandled, Observer
    from continuum._define.settings import Settings
    from continuum._define.steps import Step, StepOptions
    from continuum._ops.client import Client
    from continuum._ops.schedule_sync import sync_schedules
    from continuum._ops.status import TaskStatus
    from continuum._record.model import Status, TaskRecord
    from continuum._record.waiting_for import Signal, Waiter, WaitKind
    from continuum._turn.context import TaskContext, current_context
    from continuum._turn.tasks import Task
    from continuum._worker.sqs_batch import LambdaContext
    from continuum.backends.queue import ContinuationQueue
    from continuum.backends.store import RecordStore


#: Where each public name that loads on first use lives.
_HOMES = {
    "Continuum": "continuum._app.app",
    "Callback": "continuum._define.callbacks",
    "BatchResult": "continuum._define.completion",
    "Completion": "continuum._define.completion",
    "Item": "continuum._define.completion",
    **dict.fromkeys(
        (
            "ContextEnded",
            "ContextEntered",
            "ContextStarted",
            "CrashedInvocation",
            "InvocationEnded",
            "InvocationStarted",
            "OperationsSaved",
            "SavedOperation",
            "StepEnded",
            "StepStarted",
            "TaskFinished",
            "TaskParked",
            "WaitEnded",
            "WaitStarted",
        ),
        "continuum._define.events",
    ),
    "MessageHandled": "continuum._define.observers",
    "Observer": "continuum._define.observers",
    "Settings": "continuum._define.settings",
    "Step": "continuum._define.steps",
    "StepOptions": "continuum._define.steps",
    "Client": "continuum._ops.client",
    "sync_schedules": "continuum._ops.schedule_sync",
    "TaskStatus": "continuum._ops.status",
    "Status": "continuum._record.model",
    "TaskRecord": "continuum._record.model",
    "Signal": "continuum._record.waiting_for",
    "Waiter": "continuum._record.waiting_for",
    "WaitKind": "continuum._record.waiting_for",
    "TaskContext": "continuum._turn.context",
    "current_context": "continuum._turn.context",
    "Task": "continuum._turn.tasks",
    "LambdaContext": "continuum._worker.sqs_batch",
    "ContinuationQueue": "continuum.backends.queue",
    "RecordStore": "continuum.backends.store",
}


def __getattr__(name: str) -> Any:
    # Imported on first use, thread safely (an import holds its module's lock until it is
    # done), and kept in the package's namespace so that the next use is a plain lookup.
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'continuum' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def _build_the_clients_models() -> None:
    # Built before a test's freeze_time starts: the client builds them on first use, and
    # pydantic before 2.14 takes a datetime field built under freezegun for an unknown type.
    from continuum._ops.status import TaskStatus

    TaskStatus.model_rebuild()


when_freezegun_loads(_build_the_clients_models)


def __dir__() -> list[str]:
    # What is loaded, as a module's dir is: freezegun's start reads every name dir lists, and
    # listing the lazy ones would import the whole package (and Powertools' parser models)
    # inside a user's first freeze_time. __all__ names every public one.
    return sorted(globals())
