"""The one place tests reach past the public door (``continuum`` and ``continuum.testing``).

Unit tests of internal modules, and functional tests that need the local runtime's plumbing,
import those names from here, so that a change of the library's inside changes one file.
"""

from __future__ import annotations

from typing import Any

from continuum.batch import logger as worker_logger
from continuum.blobs import FINISHED_TAG
from continuum.budget import DEFAULT_STEP_S, Budget, observe, predict
from continuum.claim import Claim
from continuum.clocks import VirtualTime
from continuum.codec import decode_record, encode_record, pack_blob, unpack_blob
from continuum.continuation import (
    Continuation,
    Continuations,
    decode_continuation,
    encode_continuation,
)
from continuum.control import Preempted
from continuum.fence import Verdict, fence
from continuum.history import InvocationRun, StepRun, Usage
from continuum.inbox_models import CallbackAnswer
from continuum.inspection import inspect_task
from continuum.journal import Journal
from continuum.local import (
    BUCKET,
    REGION,
    LocalLambdaContext,
    LocalRuntime,
    event_record,
    moto_backend,
)
from continuum.metering import Meter
from continuum.now import now_s, utcnow
from continuum.pools import in_parallel
from continuum.queue import QueueError
from continuum.record import (
    Counters,
    ErrorInfo,
    JournalEntry,
    Lease,
    StepStats,
    TaskRecord,
    check_task_id,
)
from continuum.records import Records
from continuum.recovery import end_recovery, note_death
from continuum.scaffold import init_project, render_template
from continuum.scaffold.project import continuum_requirements, module_name
from continuum.scaffold.render import fill, keep_flavor
from continuum.secrets import clear_cache, load_signing_keys
from continuum.segments import DEFAULT_SEGMENTING, Segmenting, cut_state, segment_ends
from continuum.store import NoSuchKey, PreconditionFailed, StoreError, TransientStoreError
from continuum.turns import Failed, Lost, Returned, Suspended, TurnLoop
from continuum.values import dump_json
from continuum.waiting import CHILD_RECHECK_S

__all__ = [
    "BUCKET",
    "CHILD_RECHECK_S",
    "DEFAULT_SEGMENTING",
    "DEFAULT_STEP_S",
    "FINISHED_TAG",
    "REGION",
    "Budget",
    "CallbackAnswer",
    "Claim",
    "Continuation",
    "Continuations",
    "Counters",
    "ErrorInfo",
    "Failed",
    "InvocationRun",
    "Journal",
    "JournalEntry",
    "Lease",
    "LocalLambdaContext",
    "LocalRuntime",
    "Lost",
    "Meter",
    "NoSuchKey",
    "PreconditionFailed",
    "Preempted",
    "QueueError",
    "Records",
    "Returned",
    "Segmenting",
    "StepRun",
    "StepStats",
    "StoreError",
    "Suspended",
    "TaskRecord",
    "TransientStoreError",
    "TurnLoop",
    "Usage",
    "Verdict",
    "VirtualTime",
    "check_task_id",
    "clear_cache",
    "continuum_requirements",
    "cut_state",
    "decode_continuation",
    "decode_message",
    "decode_record",
    "dump_json",
    "encode_continuation",
    "encode_message",
    "encode_record",
    "end_recovery",
    "event_record",
    "fence",
    "fill",
    "forget_remembered",
    "in_parallel",
    "init_project",
    "inspect_task",
    "keep_flavor",
    "load_signing_keys",
    "module_name",
    "moto_backend",
    "note_death",
    "now_s",
    "observe",
    "pack_blob",
    "predict",
    "render_template",
    "segment_ends",
    "unpack_blob",
    "utcnow",
    "worker_logger",
]


def encode_message(message: Continuation, *, signing_key: str | None = None) -> str:
    """A continuation body (signed with ``signing_key`` if given)."""
    return encode_continuation(message, keys=(signing_key,) if signing_key else ())


def decode_message(body: str | bytes, *, signing_key: str | None = None) -> Continuation:
    """Parse a continuation body (verified with ``signing_key`` if given)."""
    return decode_continuation(body, keys=(signing_key,) if signing_key else ())


def forget_remembered(app: Any) -> None:
    """Make ``app``'s warm worker forget the records it parked (as a fresh environment)."""
    if app._worker is not None:
        app._worker.recent.clear()
