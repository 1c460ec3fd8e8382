"""The local twin of the deployed stack: a moto server with the bucket, the two queues and the
schedule group.

``continuum dev`` runs one for as long as it runs: a versioned bucket, a continuation queue
whose visibility timeout is six budgets and which redrives to a dead-letter queue after
``max_receive_count`` receives, as ``infra/template.yaml`` creates them. Other processes
reach it with :meth:`DevStack.environment` (the ``export`` line ``continuum dev`` prints),
which carries the stack's signing key (the user's ``CONTINUUM_SIGNING_KEY``, else one made for
this stack: callback links must be signed, and the workers refuse a start signed with no key,
or another) and names the schedule group, its role and the queue's ARN too, so the workers'
apps get EventBridge Scheduler on moto. moto stores schedules and never fires them: while the
stack runs, a thread of it fires every due schedule (one-time or recurring) into the
continuation queue, every ``FIRE_EVERY_S`` in real time (``ScheduleFirer``).

moto's conditional PutObject checks ``If-Match`` / ``If-None-Match`` and then writes, without
a lock, so two threads of the server can both pass the check; S3 itself is atomic there. The
dev stack makes PutObject atomic in its process, so that concurrent workers see S3's answer.

The server answers only signed SDK calls from this machine (``moto_guard``): never a
browser page, whatever its origin, nor moto's own ``/moto-api``.

Example:
    >>> with DevStack(port=0, budget_s=60) as stack:  # doctest: +SKIP
    ...     print(stack.environment()["AWS_ENDPOINT_URL"])
    http://127.0.0.1:51234
"""

from __future__ import annotations

import functools
import json
import logging
import os
import secrets
import socket
import threading
from typing import TYPE_CHECKING, Any

from continuum._app.backend_config import (
    DEFAULT_PREFIX,
    QUEUE_ARN_ENV,
    SCHEDULE_GROUP_ENV,
    SCHEDULER_ROLE_ENV,
)
from continuum._base.signing_keys import SIGNING_KEY_ENV, split_keys
from continuum.errors import ConfigurationError

if TYPE_CHECKING:
    from continuum._ops.client import Client

#: 5000 is moto_server's default port, and macOS's AirPlay receiver's.
DEV_PORT = 5050
DEV_HOST = "127.0.0.1"
DEV_REGION = "us-east-1"
BUCKET = "continuum-dev"
QUEUE = "continuum-dev"
DEAD_LETTER_QUEUE = "continuum-dev-dead-letters"
#: Receives of one continuation before it goes to the dead-letter queue (the stack's default).
MAX_RECEIVE_COUNT = 5
#: 6 x the dead-letter function's budget, as the stack sets it.
DEAD_LETTER_VISIBILITY_S = 360
#: The stack's schedule group, the role its schedules send with, and how often the stack
#: fires what is due (EventBridge Scheduler fires within the minute; locally, within this).
SCHEDULE_GROUP = "continuum-dev"
SCHEDULER_ROLE_ARN = "arn:aws:iam::123456789012:role/continuum-dev-scheduler"
FIRE_EVERY_S = 1.0
#: Random bytes of the signing key a stack makes for itself (256 bits, as HMAC-SHA256's).
SIGNING_KEY_BYTES = 32
#: Stand-in credentials: moto accepts any, and boto3 needs some.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}

_put_lock = threading.Lock()


class DevStack:
    """A moto server on ``host:port`` with the stack's bucket and queues; a context manager.

    Args:
        host: the address to listen on (loopback by default: nothing here is authenticated).
        port: the port; 0 picks a free one.
        budget_s: the workers' budget: the continuation queue's visibility timeout is 6 x it.
        max_receive_count: receives before a continuation goes to the dead-letter queue.
        signing_key: the key(s) its tasks are signed with, comma-separated (default: the
            ``CONTINUUM_SIGNING_KEY`` of this process's environment, else a new random key).
    """

    def __init__(
        self,
        *,
        host: str = DEV_HOST,
        port: int = DEV_PORT,
        budget_s: float = 900.0,
        max_receive_count: int = MAX_RECEIVE_COUNT,
        signing_key: str | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.signing_key = (
            signing_key
            or os.environ.get(SIGNING_KEY_ENV, "").strip()
            or secrets.token_urlsafe(SIGNING_KEY_BYTES)
        )
        self.budget_s = budget_s
        self.max_receive_count = max_receive_count
        self.endpoint = ""
        self.queue_url = self.dead_letter_queue_url = self.queue_arn = ""
        self._server: Any = None
        self._firing: threading.Thread | None = None
        self._stop_firing = threading.Event()
        self._firer: Any = None

    def __enter__(self) -> DevStack:
        from continuum._local.moto_guard import GuardedMotoServer

        _check_free(self.host, self.port)
        faithful_moto()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        # Behind the guard: a page of another site in this machine's browser must not reach it.
        self._server = GuardedMotoServer(self.host, self.port)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        try:
            self._create()
        except BaseException:
            self._server.stop()
            raise
        self._stop_firing.clear()
        self._make_firer()  # now: a schedule synced from here on fires from its creation
        self._firing = threading.Thread(
            target=self._fire_until_stopped, name="continuum-dev-scheduler", daemon=True
        )
        self._firing.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop_firing.set()
        if self._firing is not None:
            self._firing.join(timeout=10)
        self._server.stop()

    def fire_schedules(self) -> int:
        """Send every due schedule's body to the continuation queue, as EventBridge Scheduler
        would; return how many fired."""
        firer, queue = self._firer or self._make_firer()
        return len(firer.fire_due(queue))

    def _make_firer(self) -> tuple[Any, Any]:
        from continuum.backends.eventbridge import EventBridgeScheduler
        from continuum.backends.memory.scheduler import ScheduleFirer
        from continuum.backends.sqs import SQSContinuationQueue

        scheduler = EventBridgeScheduler(
            self.client("scheduler"),
            group=SCHEDULE_GROUP,
            target_arn=self.queue_arn,
            role_arn=SCHEDULER_ROLE_ARN,
        )
        made = (ScheduleFirer(scheduler), SQSContinuationQueue(self.client("sqs"), self.queue_url))
        self._firer = made
        return made

    def _fire_until_stopped(self) -> None:
        log = logging.getLogger("continuum._local.dev_stack")
        while not self._stop_firing.wait(FIRE_EVERY_S):
            try:
                self.fire_schedules()
            except Exception as exc:  # the next pass tries again; nothing fired is lost
                log.warning("could not fire the schedules: %s", exc)

    def client(self, service: str) -> Any:
        """A boto3 client of ``service`` on this server."""
        import boto3

        return boto3.client(
            service,  # type: ignore[call-overload]
            region_name=DEV_REGION,
            endpoint_url=self.endpoint,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def task_client(self, prefix: str | None = None) -> Client:
        """A client on this stack, with its own boto3 clients: the dev server's pages read the
        records and send callbacks, signals and cancels with it."""
        from continuum._define.settings import Settings
        from continuum._ops.client import Client
        from continuum._record.blob_records import BlobRecords
        from continuum._record.continuation import Continuations
        from continuum.backends.s3 import S3RecordStore
        from continuum.backends.sqs import SQSContinuationQueue

        keys = split_keys(self.signing_key, source="the dev stack's signing key")
        queue = SQSContinuationQueue(self.client("sqs"), self.queue_url)
        return Client(
            BlobRecords(S3RecordStore(self.client("s3"), BUCKET), prefix=prefix or DEFAULT_PREFIX),
            Continuations(queue, keys=keys),
            settings=Settings(signing_keys=keys),
        )

    def environment(self) -> dict[str, str]:
        """The variables that point boto3 and the continuum CLI at this stack."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": DEV_REGION,
            **CREDENTIALS,
            "CONTINUUM_BUCKET": BUCKET,
            "CONTINUUM_QUEUE_URL": self.queue_url,
            SIGNING_KEY_ENV: self.signing_key,
            SCHEDULE_GROUP_ENV: SCHEDULE_GROUP,
            SCHEDULER_ROLE_ENV: SCHEDULER_ROLE_ARN,
            QUEUE_ARN_ENV: self.queue_arn,
        }

    def _create(self) -> None:
        s3, sqs = self.client("s3"), self.client("sqs")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        self.dead_letter_queue_url = sqs.create_queue(
            QueueName=DEAD_LETTER_QUEUE,
            Attributes={"VisibilityTimeout": str(DEAD_LETTER_VISIBILITY_S)},
        )["QueueUrl"]
        dead_letter_arn = sqs.get_queue_attributes(
            QueueUrl=self.dead_letter_queue_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        redrive = {
            "deadLetterTargetArn": dead_letter_arn,
            "maxReceiveCount": self.max_receive_count,
        }
        self.queue_url = sqs.create_queue(
            QueueName=QUEUE,
            Attributes={
                "VisibilityTimeout": str(min(43_200, max(6, round(6 * self.budget_s)))),
                "RedrivePolicy": json.dumps(redrive),
            },
        )["QueueUrl"]
        self.queue_arn = sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        self.client("scheduler").create_schedule_group(Name=SCHEDULE_GROUP)


def _check_free(host: str, port: int) -> None:
    """Fail now, clearly, if the port is taken (moto's server thread would hang instead)."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigurationError(
                f"cannot listen on {host}:{port}: {exc.strerror}",
                hint="another continuum dev may be running there; pass another --stack-port",
            ) from None


def _serialize_s3_puts() -> None:
    """Make moto's conditional PutObject check-and-write atomic (once per process)."""
    from moto.s3.responses import S3Response

    original = S3Response.put_object
    if getattr(original, "continuum_locked", False):
        return

    @functools.wraps(original)
    def put_object(self: Any) -> Any:
        with _put_lock:
            return original(self)

    put_object.continuum_locked = True  # type: ignore[attr-defined]
    S3Response.put_object = put_object  # type: ignore[method-assign]


def _lock_sqs_deletes() -> None:
    """Make moto's SQS DeleteMessage hold the queue's lock (once per process).

    moto's ``Queue.delete_message`` rebuilds the queue's message list and assigns it without
    the lock that ``add_message`` appends under: a message sent while another is deleted can
    vanish (moto 5.2.5; a lost start left 8 child tasks pending for good in a benchmark of
    1,000). Real SQS does not lose messages.
    """
    from moto.sqs.models import Queue

    original = Queue.delete_message
    if getattr(original, "continuum_locked", False):
        return

    @functools.wraps(original)
    def delete_message(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:
            original(self, receipt_handle)

    delete_message.continuum_locked = True  # type: ignore[attr-defined]
    Queue.delete_message = delete_message  # type: ignore[method-assign]


def faithful_moto() -> None:
    """Where moto in this process is less atomic than AWS, make it as atomic (once): a
    conditional PutObject checks and writes under one lock, and an SQS delete never loses a
    message sent meanwhile. For every moto server continuum runs (``continuum dev``, the
    chaos harness, the benchmarks)."""
    _serialize_s3_puts()
    _lock_sqs_deletes()
