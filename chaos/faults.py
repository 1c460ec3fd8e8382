"""Where a worker dies and which AWS calls fail: decided from outside the library.

:class:`Injector` is installed by ``chaos.worker`` on the app's boto3 clients (botocore event
hooks) and around the app's step functions. It

- kills its own process with SIGKILL at the n-th occurrence of one of its armed kill points
  (a Lambda that times out or runs out of memory gets no ``finally`` either);
- kills it whenever the poison step runs, or when an invocation passes its deadline (a
  watchdog thread, as Lambda's timeout);
- makes AWS calls fail with a per-call probability per fault kind, by answering the call with a
  synthetic error response from a ``before-call`` hook (so botocore's own retries are spent:
  the library sees what a client sees when they ran out). Two kinds first let the real call land
  and then report an error, as a client does when a response is lost and botocore's retry of
  the same request fails: ``s3_412_own_write`` (a conditional write landed; the retry gets
  412) and ``sqs_send_lost_reply`` (the message was sent; the client saw a 500).

Everything the injector does is appended to the shared event log for the harness to count.
"""

from __future__ import annotations

import functools
import json
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import ClientError

from chaos.tasks import POISON_STEP
from continuum import Continuum

#: Kill points, and the largest occurrence count the harness draws for each (a rare point
#: gets a small count so that a worker meets it within a few invocations; a blob point a
#: larger one, since one invocation of the blob task meets it several times).
KILL_POINTS: dict[str, int] = {
    "mid_step": 6,  # the library started a step; its function has not run
    "after_step": 6,  # the step's function returned (its effect happened); not yet recorded
    "after_get": 2,  # the record was read
    "after_claim": 2,  # the claim (status running, lease) was written
    "after_persist": 3,  # a journal save was written
    "after_suspend_write": 1,  # the suspended record was written; no continuation sent yet
    "after_finish_write": 1,  # succeeded/failed was written; its blobs not yet swept
    "before_send": 1,  # a continuation is about to be sent
    "after_send": 1,  # a continuation was sent; the message not yet acknowledged
    "before_ack": 2,  # the handler returned; the event source has not deleted the message
    "before_blob_put": 6,  # a blob upload is about to be sent; no record references it yet
    "after_blob_put": 6,  # a blob landed; the record write that references it not yet made
    "after_blob_delete": 6,  # a superseded blob was deleted (mid-run, or by the finish sweep)
    "after_blob_tag": 1,  # a finished task's blob was tagged; the sweep is not done
    # -- waits ---------------------------------------------------------------------------------
    "after_callback_write": 1,  # a new callback's id was saved; cb.result() not yet reached
    "after_wait_write": 1,  # the record was written waiting; the inbox not looked at again
    "after_wait_list": 1,  # ... and then the inbox was listed; no wake or timer sent yet
    "after_timer_send": 1,  # a timer (a deadline, or a hop's next) was sent; not acknowledged
    "after_hop_write": 1,  # a timer hop wrote the next generation; its next timer not sent
    "after_wake_send": 1,  # a worker woke a task whose inbox got something while it went waiting
    "after_inbox_list": 3,  # a task's inbox was listed (at a claim, a wait, a step boundary)
    # -- fan-out -------------------------------------------------------------------------------
    "after_child_create": 3,  # a parent created a child's record (pending), not all of them
    "after_child_start": 1,  # a parent sent a child's first continuation
    "after_report_write": 1,  # a finished child wrote its report to its parent's inbox
    "after_child_wake": 1,  # ... and woke its parent (a wake with a batch hint)
    "after_successor_start": 1,  # ... and started the next child of its batch
    "after_child_cancel": 1,  # a cancelled parent wrote a cancel request into a child's inbox
}

#: The kill points on the paths that waits and fan-out add.
WAIT_KILL_POINTS = tuple(KILL_POINTS)[list(KILL_POINTS).index("after_callback_write") :]

#: Fault kinds and their base probability per eligible call (the harness scales them).
FAULT_BASE_RATES: dict[str, float] = {
    "s3_500": 0.03,  # GetObject / PutObject: 500 InternalError (nothing written)
    "s3_503": 0.03,  # GetObject / PutObject: 503 SlowDown (S3's throttling)
    "s3_409": 0.1,  # conditional PutObject: 409 ConditionalRequestConflict
    "s3_412_own_write": 0.04,  # conditional PutObject of a record: lands, then 412
    "s3_delete_error": 0.1,  # DeleteObject of a blob: 500 InternalError (nothing deleted)
    "s3_tag_error": 0.05,  # PutObjectTagging, GetObjectTagging: 503 SlowDown (nothing tagged)
    "s3_list_error": 0.05,  # ListObjectsV2 (the finish sweep's listing): 500 InternalError
    "sqs_send_error": 0.04,  # SendMessage: 500 InternalFailure (nothing sent)
    "sqs_throttle": 0.04,  # SendMessage / ChangeMessageVisibility: ThrottlingException
    "sqs_send_lost_reply": 0.04,  # SendMessage: sent, then 500
    "sqs_visibility_error": 0.1,  # ChangeMessageVisibility: 500
    "sqs_delete_error": 0.06,  # the event source's DeleteMessage: 500 (so: redelivered)
}

_ERRORS: dict[str, tuple[int, str]] = {
    "s3_500": (500, "InternalError"),
    "s3_503": (503, "SlowDown"),
    "s3_409": (409, "ConditionalRequestConflict"),
    "s3_412_own_write": (412, "PreconditionFailed"),
    "s3_delete_error": (500, "InternalError"),
    "s3_tag_error": (503, "SlowDown"),
    "s3_list_error": (500, "InternalError"),
    "sqs_send_error": (500, "InternalFailure"),
    "sqs_throttle": (400, "ThrottlingException"),
    "sqs_send_lost_reply": (500, "InternalFailure"),
    "sqs_visibility_error": (500, "InternalFailure"),
    "sqs_delete_error": (500, "InternalFailure"),
}

#: The error codes above: a task that failed with one of them failed of a transient fault.
INJECTED_CODES = frozenset(code for _status, code in _ERRORS.values())


#: What a faulted call was about (``Injector.path_of``), on the paths waits and fan-out add:
#: a record written ``waiting`` (by the task's worker, or by a timer hop), a child's record
#: created, an inbox object written (a child's report, a cancel of a child), read, listed or
#: deleted, and the messages: timers, wakes, a child's report wake, a child's start.
NEW_PATHS = (
    "wait_write",
    "hop_write",
    "child_create",
    "report_put",
    "child_cancel_put",
    "inbox_put",
    "inbox_get",
    "inbox_list",
    "inbox_delete",
    "timer_send",
    "wake_send",
    "child_wake_send",
    "child_start_send",
    "successor_start_send",
)


def is_blob(params: dict[str, Any]) -> bool:
    """Is this call about a blob (``tasks/<id>/blobs/<sha256>.json.gz``)?"""
    return "/blobs/" in str(params.get("Key", ""))


def is_inbox(params: dict[str, Any]) -> bool:
    """Is this call about a task's inbox (``tasks/<id>/inbox/...``, a key or a prefix)?"""
    return "/inbox/" in str(params.get("Key", params.get("Prefix", "")))


def message_of(params: dict[str, Any]) -> dict[str, Any]:
    """The continuation a SendMessage carries (empty if its body is not one)."""
    try:
        message = json.loads(str(params.get("MessageBody", "")))
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def send_kind(message: dict[str, Any], task_id: str | None, finished: bool) -> str:
    """What a worker's send is: ``timer``, ``child_wake`` (a child's report: it carries a
    ``"batch":`` hint), ``wake``, ``child_start`` (a parent starts a child),
    ``successor_start`` (a finished child starts the next one) or ``continue``."""
    kind = message.get("kind", "continue")
    if kind == "timer":
        return "timer"
    if kind == "wake":
        return "child_wake" if message.get("batch") else "wake"
    if message.get("reason") == "start" and message.get("task_id") != task_id:
        return "successor_start" if finished else "child_start"
    return "continue"


class EventLog:
    """Appends JSON lines to a file shared by all processes (one ``write`` per line)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, ev: str, **fields: Any) -> None:
        line = json.dumps({"ev": ev, "pid": os.getpid(), "t": time.time(), **fields})
        os.write(self._fd, (line + "\n").encode())


class _Body:
    """The raw body of a synthetic response (botocore only reads it on demand)."""

    def stream(self, **_kwargs: Any) -> Any:
        return iter([b""])


def synthetic_error(status: int, code: str) -> tuple[AWSResponse, dict[str, Any]]:
    """A (http response, parsed) pair that botocore turns into ClientError(code)."""
    http = AWSResponse("https://chaos.invalid/", status, HTTPHeaders(), _Body())
    parsed = {
        "Error": {"Code": code, "Message": f"injected by chaos ({status} {code})"},
        "ResponseMetadata": {"HTTPStatusCode": status, "RequestId": "chaos"},
    }
    return http, parsed


class Injector:
    """Kills and faults for one worker process.

    Args:
        events: the shared event log.
        kills: the armed kill points: die at the n-th occurrence (1 = the first) in this
            process of any of them, whichever comes first (empty: die only of poison or at a
            deadline).
        rates: probability per eligible call, per fault kind.
        rng: the random source for faults (seeded by the harness).
        shadow_s3: an S3 client without hooks, for writes that land before an error.
        shadow_sqs: an SQS client without hooks, for sends that land before an error.
    """

    def __init__(
        self,
        events: EventLog,
        *,
        kills: dict[str, int],
        rates: dict[str, float],
        rng: random.Random,
        shadow_s3: Any,
        shadow_sqs: Any,
    ) -> None:
        self.events = events
        self.kills = kills
        self.rates = rates
        self.rng = rng
        self.shadow_s3 = shadow_s3
        self.shadow_sqs = shadow_sqs
        self.seen: Counter[str] = Counter()
        self.invocation: str | None = None
        self.task_id: str | None = None
        self._claimed: set[str] = set()
        self._waited = False  # a waiting write landed, and the inbox was not listed since
        self._finished = False  # this invocation's task finished
        self._callbacks: dict[str, set[str]] = {}  # task id -> the callback tokens it has
        self._new_callback = False  # the last record write stored a callback id not seen before

    # -- invocations -------------------------------------------------------------------------

    def begin(self, invocation: str, task_id: str | None) -> None:
        """A new emulated invocation starts, for a message naming ``task_id``."""
        self.invocation, self.task_id = invocation, task_id
        self._claimed, self._waited, self._finished = set(), False, False
        self._callbacks = {}

    def reach(self, point: str) -> None:
        """Count an occurrence of ``point``; die if it is the chosen one."""
        self.seen[point] += 1
        if self.kills.get(point) == self.seen[point]:
            self.die(point)

    def die(self, point: str) -> None:
        """SIGKILL this process now (after saying where, for the harness)."""
        self.events.write("kill", point=point, task_id=self.task_id, inv=self.invocation)
        os.kill(os.getpid(), signal.SIGKILL)

    # -- installation ------------------------------------------------------------------------

    def install(self, app: Continuum, s3: Any, sqs: Any, source_sqs: Any) -> None:
        """Register the hooks on the app's clients and the event source's, wrap the steps."""
        s3_events, sqs_events = s3.meta.events, sqs.meta.events
        for op in ("PutObject", "GetObject", "DeleteObject", "PutObjectTagging", "ListObjectsV2"):
            s3_events.register(f"before-parameter-build.s3.{op}", self._stash)
        s3_events.register("before-call.s3.PutObject", self._before_put)
        s3_events.register("after-call.s3.PutObject", self._after_put)
        s3_events.register(
            "before-call.s3.GetObject", self._failing("GetObject", "s3_500", "s3_503")
        )
        s3_events.register("after-call.s3.GetObject", self._after_get)
        for op, kind in (
            ("DeleteObject", "s3_delete_error"),
            ("PutObjectTagging", "s3_tag_error"),
            ("GetObjectTagging", "s3_tag_error"),
            ("ListObjectsV2", "s3_list_error"),
        ):
            s3_events.register(f"before-call.s3.{op}", self._failing(op, kind))
        s3_events.register("after-call.s3.ListObjectsV2", self._after_list)
        s3_events.register(
            "after-call.s3.DeleteObject", self._after_blob("delete", "after_blob_delete")
        )
        s3_events.register(
            "after-call.s3.PutObjectTagging", self._after_blob("tag", "after_blob_tag")
        )
        sqs_events.register("before-parameter-build.sqs.SendMessage", self._stash)
        sqs_events.register("before-call.sqs.SendMessage", self._before_send)
        sqs_events.register("after-call.sqs.SendMessage", self._after_send)
        sqs_events.register(
            "before-call.sqs.ChangeMessageVisibility",
            self._failing("ChangeMessageVisibility", "sqs_visibility_error", "sqs_throttle"),
        )
        source_sqs.meta.events.register(
            "before-call.sqs.DeleteMessage", self._failing("DeleteMessage", "sqs_delete_error")
        )
        for step in app.steps.values():
            _ = step.adapter  # resolve the return type from the real function first
            step.fn = self._wrap_step(step.name, step.fn)

    def _wrap_step(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def step(*args: Any, **kwargs: Any) -> Any:
            if name == POISON_STEP:
                self.die("poison")
            self.reach("mid_step")
            value = fn(*args, **kwargs)
            self.reach("after_step")
            return value

        return step

    # -- faults ------------------------------------------------------------------------------

    def _roll(self, *kinds: str) -> str | None:
        """Pick at most one of ``kinds`` to inject into this call."""
        for kind in kinds:
            if self.rng.random() < self.rates.get(kind, 0.0):
                return kind
        return None

    def _maybe(
        self, op: str, *kinds: str, params: dict[str, Any] | None = None
    ) -> tuple[AWSResponse, dict[str, Any]] | None:
        """Fail this call with one of ``kinds`` (rolled), or let it through (None)."""
        kind = self._roll(*kinds)
        return None if kind is None else self._inject(kind, op, params)

    def _inject(
        self, kind: str, op: str, params: dict[str, Any] | None = None
    ) -> tuple[AWSResponse, dict[str, Any]]:
        path = self.path_of(op, params or {})
        self.events.write(
            "fault", kind=kind, op=op, path=path, task_id=self.task_id, inv=self.invocation
        )
        return synthetic_error(*_ERRORS[kind])

    def path_of(self, op: str, params: dict[str, Any]) -> str:
        """Which path a call is on: one of ``NEW_PATHS``, or blob, record, continue, message."""
        key = str(params.get("Key", params.get("Prefix", "")))
        if op == "SendMessage":
            kind = send_kind(message_of(params), self.task_id, self._finished)
            return "continue" if kind == "continue" else f"{kind}_send"
        if op in ("ChangeMessageVisibility", "DeleteMessage"):
            return "message"
        if "/blobs/" in key:
            return "blob"
        if "/inbox/" in key:
            if op == "PutObject" and "/inbox/children/" in key:
                return "report_put"
            if op == "PutObject" and key.endswith("/inbox/cancel.json"):
                return "child_cancel_put"
            verb = {"PutObject": "put", "GetObject": "get", "ListObjectsV2": "list"}
            return f"inbox_{verb.get(op, 'delete')}"
        if op == "PutObject" and key.endswith("/record.json"):
            try:
                body = json.loads(params["Body"])
            except (KeyError, ValueError, TypeError):
                return "record"
            if body.get("status") == "waiting":
                return "wait_write" if body.get("task_id") in self._claimed else "hop_write"
            if body.get("status") == "pending" and "IfNoneMatch" in params:
                return "child_create"
        return "record"

    @staticmethod
    def _stash(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["chaos_params"] = dict(params)

    def _before_put(self, context: dict[str, Any], **_: Any) -> Any:
        params = context.get("chaos_params", {})
        if is_blob(params):
            self.reach("before_blob_put")
        conditional = "IfMatch" in params or "IfNoneMatch" in params
        is_record = str(params.get("Key", "")).endswith("/record.json")
        kinds = ["s3_500", "s3_503"]
        if conditional:
            kinds.append("s3_409")
        if is_record and "IfMatch" in params:
            kinds.append("s3_412_own_write")
        kind = self._roll(*kinds)
        if kind == "s3_412_own_write":
            try:
                self.shadow_s3.put_object(**params)
            except ClientError:
                return None  # it would not have landed: let the real call fail on its own
            self._log_write(params)
        return None if kind is None else self._inject(kind, "PutObject", params)

    def _after_put(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        if http_response.status_code >= 300:
            return
        params = context.get("chaos_params", {})
        if is_blob(params):
            self._blob_landed("put", params, "after_blob_put")
            return
        if is_inbox(params):
            key = str(params.get("Key"))
            self.events.write("inbox", key=key, task_id=self.task_id, inv=self.invocation)
            if "/inbox/children/" in key:
                self.reach("after_report_write")  # a finished child's report to its parent
            elif key.endswith("/inbox/cancel.json"):
                self.reach("after_child_cancel")  # a cancelled parent cancels its children
            return
        kind = self._log_write(params)
        if kind is not None:
            self.reach(f"after_{kind}")
        if kind == "persist" and self._new_callback:
            self.reach("after_callback_write")

    def _blob_landed(self, op: str, params: dict[str, Any], point: str) -> None:
        """A blob put, delete or tag landed: log it (for the blob checks), then maybe die."""
        self.events.write(
            "blob", op=op, key=params.get("Key"), task_id=self.task_id, inv=self.invocation
        )
        self.reach(point)

    def _failing(self, op: str, *kinds: str) -> Callable[..., Any]:
        """A ``before-call`` hook that fails ``op`` with one of ``kinds`` (rolled)."""
        return lambda context=None, **_: self._maybe(
            op, *kinds, params=(context or {}).get("chaos_params")
        )

    def _after_blob(self, op: str, point: str) -> Callable[..., None]:
        """An ``after-call`` hook: a blob ``op`` (delete, tag) landed; log it, maybe die."""

        def hook(http_response: Any, context: dict[str, Any], **_: Any) -> None:
            params = context.get("chaos_params", {})
            if http_response.status_code < 300 and is_blob(params):
                self._blob_landed(op, params, point)

        return hook

    def _log_write(self, params: dict[str, Any]) -> str | None:
        """Log a record write that landed; return claim/persist/suspend_write/finish_write."""
        key = str(params.get("Key", ""))
        if not key.endswith("/record.json"):
            return None
        body = json.loads(params["Body"])
        status, task_id = body["status"], body["task_id"]
        if status == "running":
            kind = "persist" if task_id in self._claimed else "claim"
            self._claimed.add(task_id)
        elif status == "suspended":
            kind = "suspend_write"
        elif status == "waiting":
            # A worker that claimed the task makes it wait; one that did not, hops its timer.
            kind = "wait_write" if task_id in self._claimed else "hop_write"
            self._waited = True
        elif status in ("succeeded", "failed", "cancelled"):
            kind = "finish_write"
            self._finished = self._finished or task_id == self.task_id
        elif status == "pending" and "IfNoneMatch" in params:
            kind = "child_create"  # a parent creates its child's record
        else:
            kind = "write"
        tokens = set(body.get("callbacks") or {})
        self._new_callback = kind == "persist" and bool(
            tokens - self._callbacks.get(task_id, set())
        )
        self._callbacks[task_id] = tokens
        self.events.write(
            "write",
            kind=kind,
            status=status,
            task_id=task_id,
            generation=body["generation"],
            turn=body["turn"],
            inv=self.invocation,
        )
        return kind

    def _after_get(self, http_response: Any, **_: Any) -> None:
        if http_response.status_code < 300:
            self.reach("after_get")

    def _before_send(self, context: dict[str, Any], **_: Any) -> Any:
        self.reach("before_send")
        kind = self._roll("sqs_send_error", "sqs_throttle", "sqs_send_lost_reply")
        if kind == "sqs_send_lost_reply":
            self.shadow_sqs.send_message(**context.get("chaos_params", {}))
        return (
            None if kind is None else self._inject(kind, "SendMessage", context.get("chaos_params"))
        )

    def _after_send(
        self, http_response: Any, context: dict[str, Any], parsed: Any = None, **_: Any
    ) -> None:
        if http_response.status_code >= 300:
            return
        self.reach("after_send")
        message = message_of(context.get("chaos_params", {}))
        kind = send_kind(message, self.task_id, self._finished)
        self.events.write(
            "send",
            kind=kind,
            task_id=message.get("task_id"),
            inv=self.invocation,
            by=self.task_id,
            mid=(parsed or {}).get("MessageId"),
            gen=message.get("generation"),
        )
        if kind != "continue":
            self.reach(f"after_{kind}_send" if kind in ("timer", "wake") else f"after_{kind}")

    def _after_list(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        """A listing landed: if it was of an inbox, maybe die (right after a wait, too)."""
        if http_response.status_code >= 300 or not is_inbox(context.get("chaos_params", {})):
            return
        self.reach("after_inbox_list")
        if self._waited:
            self._waited = False
            self.reach("after_wait_list")


# -- the outside world's calls: the harness's own client ----------------------------------------

#: Faults of the harness's own client (``client.signal``, ``complete_callback``,
#: ``fail_callback``, ``cancel``: an inbox object, a read of the record, a wake), and the
#: probability per eligible call. The ``sender_died_*`` kinds stand for the sender's process
#: dying at that point (its call is cut short by :class:`SenderDied`); the harness then
#: retries the call, as an at-least-once sender does.
SENDER_BASE_RATES: dict[str, float] = {
    "sender_put_error": 0.04,  # the inbox object's PutObject: 500 (nothing written)
    "sender_put_lost_reply": 0.04,  # ... written, then 500 (the library's retry finds it)
    "sender_get_error": 0.02,  # GetObject (the record, an answer): 500
    "sender_wake_error": 0.03,  # the wake's SendMessage: 500 (nothing sent)
    "sender_wake_lost_reply": 0.03,  # ... sent, then 500
    "sender_died_after_put": 0.03,  # the inbox object landed; the sender dies
    "sender_died_before_wake": 0.02,  # the sender dies just before sending the wake
    "sender_died_after_wake": 0.02,  # the wake was sent; the sender dies before it returns
}


class SenderDied(BaseException):
    """The harness's sender dies in the middle of a client call (not an ``Exception``: the
    library catches none of it, as it catches nothing of a SIGKILL)."""


class SenderFaults:
    """Faults and deaths of the harness's own client calls, logged to the event log.

    Args:
        events: the shared event log.
        rates: probability per eligible call, per kind of ``SENDER_BASE_RATES``.
        rng: the random source (seeded by the harness).
        shadow_s3: an S3 client without hooks, for writes that land before an error.
        shadow_sqs: an SQS client without hooks, for sends that land before an error.
    """

    def __init__(
        self,
        events: EventLog,
        *,
        rates: dict[str, float],
        rng: random.Random,
        shadow_s3: Any,
        shadow_sqs: Any,
    ) -> None:
        self.events = events
        self.rates = rates
        self.rng = rng
        self.shadow_s3 = shadow_s3
        self.shadow_sqs = shadow_sqs
        self.counts: Counter[str] = Counter()
        #: the task the current call is about (set by the harness around each call).
        self.task_id: str | None = None

    def install(self, s3: Any, sqs: Any) -> None:
        s3.meta.events.register("before-parameter-build.s3.PutObject", Injector._stash)
        s3.meta.events.register("before-call.s3.PutObject", self._before_put)
        s3.meta.events.register("after-call.s3.PutObject", self._after_put)
        s3.meta.events.register("before-call.s3.GetObject", self._before_get)
        sqs.meta.events.register("before-parameter-build.sqs.SendMessage", Injector._stash)
        sqs.meta.events.register("before-call.sqs.SendMessage", self._before_send)
        sqs.meta.events.register("after-call.sqs.SendMessage", self._after_send)

    def _rolls(self, kind: str) -> bool:
        return self.rng.random() < self.rates.get(kind, 0.0)

    def _fault(self, kind: str, op: str, status: int = 500) -> tuple[AWSResponse, dict[str, Any]]:
        self.counts[kind] += 1
        self.events.write("fault", kind=kind, op=op, task_id=self.task_id, inv="harness")
        return synthetic_error(
            status, "InternalError" if op != "SendMessage" else "InternalFailure"
        )

    def _die(self, kind: str) -> None:
        self.counts[kind] += 1
        self.events.write("sender_kill", point=kind, task_id=self.task_id, inv="harness")
        raise SenderDied(kind)

    def _before_put(self, context: dict[str, Any], **_: Any) -> Any:
        params = context.get("chaos_params", {})
        if not is_inbox(params):
            return None
        if self._rolls("sender_put_error"):
            return self._fault("sender_put_error", "PutObject")
        if self._rolls("sender_put_lost_reply"):
            try:
                self.shadow_s3.put_object(**params)
            except ClientError:
                return None  # it would not have landed: let the real call fail on its own
            return self._fault("sender_put_lost_reply", "PutObject")
        return None

    def _after_put(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        params = context.get("chaos_params", {})
        landed = http_response.status_code < 300 and is_inbox(params)
        if landed and self._rolls("sender_died_after_put"):
            self._die("sender_died_after_put")

    def _before_get(self, **_: Any) -> Any:
        return (
            self._fault("sender_get_error", "GetObject")
            if self._rolls("sender_get_error")
            else None
        )

    def _before_send(self, context: dict[str, Any], **_: Any) -> Any:
        if self._rolls("sender_died_before_wake"):
            self._die("sender_died_before_wake")
        if self._rolls("sender_wake_error"):
            return self._fault("sender_wake_error", "SendMessage")
        if self._rolls("sender_wake_lost_reply"):
            self.shadow_sqs.send_message(**context.get("chaos_params", {}))
            return self._fault("sender_wake_lost_reply", "SendMessage")
        return None

    def _after_send(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        if http_response.status_code >= 300:
            return
        message = message_of(context.get("chaos_params", {}))
        self.events.write("sender_wake", task_id=message.get("task_id"), inv="harness")
        if self._rolls("sender_died_after_wake"):
            self._die("sender_died_after_wake")
