"""The one place tests reach past the public door (``continuum`` and ``continuum.testing``).

Unit tests of internal modules, and functional tests that need the local runtime's plumbing,
import those names from here, so that a change of the library's inside changes one file.
"""

from __future__ import annotations

from typing import Any

from continuum._base.clock import now_s, utcnow
from continuum._base.json_values import dump_json
from continuum._base.signing_keys import clear_cache, load_signing_keys
from continuum._base.threads import in_parallel
from continuum._define.settings import DEFAULT_STEP_S
from continuum._local.runtime import (
    BUCKET,
    REGION,
    LocalLambdaContext,
    LocalRuntime,
    event_record,
    moto_backend,
)
from continuum._local.virtual_time import VirtualTime
from continuum._ops.inspection import inspect_task
from continuum._record.blob_records import BlobRecords
from continuum._record.blobs import FINISHED_TAG
from continuum._record.codec import decode_record, encode_record, pack_blob, unpack_blob
from continuum._record.continuation import (
    Continuation,
    Continuations,
    decode_continuation,
    decode_schedule_fire,
    encode_continuation,
    schedule_fire_body,
)
from continuum._record.history import InvocationRun, LiveStep, Usage
from continuum._record.inbox_items import CallbackAnswer
from continuum._record.model import (
    Counters,
    ErrorInfo,
    JournalEntry,
    Lease,
    StepStats,
    TaskRecord,
    check_task_id,
)
from continuum._record.persistence import Records
from continuum._record.recovery import end_recovery, note_death
from continuum._record.schedule_runs import BlobRunMarkers, FireDecision, ScheduleRuns
from continuum._record.segments import DEFAULT_SEGMENTING, Segmenting, cut_state, segment_ends
from continuum._steps.budget import Budget, observe, predict
from continuum._steps.control_flow import Preempted
from continuum._steps.journal import Journal
from continuum._turn.loop import Failed, Lost, Returned, Suspended, TurnLoop
from continuum._worker.admission import (
    GO,
    Admission,
    AdmissionRule,
    AdmissionRules,
    ClaimRecord,
    Fence,
    Go,
)
from continuum._worker.claim import Claim
from continuum._worker.endings import Outcome
from continuum._worker.fence import Verdict, fence
from continuum._worker.metering import Meter
from continuum._worker.schedule_fires import ScheduleFires
from continuum._worker.sqs_batch import logger as worker_logger
from continuum._worker.wake import CHILD_RECHECK_S
from continuum.backends.queue import QueueError
from continuum.backends.store import NoSuchKey, PreconditionFailed, StoreError, TransientStoreError
from continuum.scaffold import init_project, render_template
from continuum.scaffold.project import continuum_requirements, module_name
from continuum.scaffold.render import fill, keep_flavor

__all__ = [
    "BUCKET",
    "CHILD_RECHECK_S",
    "DEFAULT_SEGMENTING",
    "DEFAULT_STEP_S",
    "FINISHED_TAG",
    "GO",
    "REGION",
    "Admission",
    "AdmissionRule",
    "AdmissionRules",
    "BlobRecords",
    "BlobRunMarkers",
    "Budget",
    "CallbackAnswer",
    "Claim",
    "ClaimRecord",
    "Continuation",
    "Continuations",
    "Counters",
    "ErrorInfo",
    "Failed",
    "Fence",
    "FireDecision",
    "Go",
    "InvocationRun",
    "Journal",
    "JournalEntry",
    "Lease",
    "LiveStep",
    "LocalLambdaContext",
    "LocalRuntime",
    "Lost",
    "Meter",
    "NoSuchKey",
    "Outcome",
    "PreconditionFailed",
    "Preempted",
    "QueueError",
    "Records",
    "Returned",
    "ScheduleFires",
    "ScheduleRuns",
    "Segmenting",
    "StepStats",
    "StoreError",
    "Suspended",
    "TaskRecord",
    "TransientStoreError",
    "TurnLoop",
    "Usage",
    "Verdict",
    "VirtualTime",
    "admit_also",
    "check_task_id",
    "clear_cache",
    "continuum_requirements",
    "cut_state",
    "decode_continuation",
    "decode_message",
    "decode_record",
    "decode_schedule_fire",
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
    "schedule_fire_body",
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


def admit_also(app: Any, rule: AdmissionRule, *, before: type) -> None:
    """Check ``rule`` in the admission of ``app``'s worker, just before its rule of type
    ``before`` (until the app is configured again)."""
    app._ready_worker().admission.add(rule, before=before)
