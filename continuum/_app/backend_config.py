"""Where an app's records and continuations live: S3 and SQS, or a store and queue given.

The app's configuration (:class:`BackendConfig`) says a bucket and a queue URL (as arguments,
or the environment variables named here), with boto3 clients made on first use unless given;
or it says a :class:`~continuum.RecordStore` and a :class:`~continuum.ContinuationQueue`
directly (the in-memory fakes of ``continuum.testing``, say), or a ``Records`` of another
shape in place of the blob store. :class:`Backends` turns either into the seams, and nothing
above it knows which it was.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from continuum.backends.queue import ContinuationQueue
from continuum.backends.store import RecordStore
from continuum.errors import ConfigurationError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

    from continuum._record.persistence import Records
    from continuum.backends.eventbridge import SchedulerClient
    from continuum.backends.scheduler import ContinuationScheduler

#: The environment variables an app reads where its configuration does not say.
BUCKET_ENV = "CONTINUUM_BUCKET"
QUEUE_URL_ENV = "CONTINUUM_QUEUE_URL"
PREFIX_ENV = "CONTINUUM_PREFIX"
#: The EventBridge Scheduler group of the stack, the role its schedules send with, and the
#: ARN of the continuation queue they send to: all three, or no scheduler.
SCHEDULE_GROUP_ENV = "CONTINUUM_SCHEDULE_GROUP"
SCHEDULER_ROLE_ENV = "CONTINUUM_SCHEDULER_ROLE_ARN"
QUEUE_ARN_ENV = "CONTINUUM_QUEUE_ARN"
#: The key prefix of the records unless configured (or ``CONTINUUM_PREFIX``).
DEFAULT_PREFIX = "tasks"


@dataclass(frozen=True, kw_only=True)
class BackendConfig:
    """Where an app's records and continuations live; each field is a keyword of
    :class:`continuum.Continuum` and of ``app.configure`` (None: not said)."""

    #: The S3 bucket of the records (default: ``CONTINUUM_BUCKET``).
    bucket: str | None = field(default=None, kw_only=False)
    #: The SQS continuation queue (default: ``CONTINUUM_QUEUE_URL``).
    queue_url: str | None = field(default=None, kw_only=False)
    #: The key prefix of the records (default: ``CONTINUUM_PREFIX``, else ``tasks``).
    prefix: str | None = None
    #: A boto3 S3 client (default: one made on first use).
    s3_client: S3Client | None = None
    #: A boto3 SQS client (default: one made on first use).
    sqs_client: SQSClient | None = None
    #: A record store instead of S3 (``continuum.testing.InMemoryRecordStore``).
    store: RecordStore | None = None
    #: A continuation queue instead of SQS (``InMemoryContinuationQueue``).
    queue: ContinuationQueue | None = None
    #: A continuation scheduler instead of EventBridge Scheduler (``InMemoryScheduler``).
    scheduler: ContinuationScheduler | None = None
    #: A boto3 EventBridge Scheduler client (default: one made on first use).
    scheduler_client: SchedulerClient | None = None
    #: The task records themselves, a ``Records`` not on a blob store (a table, say), in
    #: place of ``store``/``bucket``/``s3_client``; used as given (``prefix`` does not apply).
    records: Records | None = None

    def __post_init__(self) -> None:
        if self.records is None:
            return
        # a Protocol is not checkable at run time: the methods every caller needs first
        if not all(callable(getattr(self.records, name, None)) for name in ("load", "swap")):
            raise ConfigurationError(
                f"records= is a Records (load, create, swap, ...), got "
                f"{type(self.records).__name__}",
                hint="pass a Records, or store= / bucket= for records on a blob store",
            )
        said = [
            name
            for name, given in (
                ("store", self.store is not None),
                ("bucket", bool(self.bucket)),
                ("s3_client", self.s3_client is not None),
            )
            if given
        ]
        if said:
            raise ConfigurationError(
                f"records= and {', '.join(n + '=' for n in said)} both say where the task "
                f"records live",
                hint="pass records= for a Records of your own, or store= / bucket= for the "
                "blob store, not both",
            )

    def changed_by(self, changes: BackendConfig) -> BackendConfig:
        """This configuration with what ``changes`` says; a bucket or S3 client replaces a
        store, a store, bucket or S3 client replaces records and records replace all three,
        and a queue URL or SQS client a queue."""
        store, queue, scheduler, records = self.store, self.queue, self.scheduler, self.records
        bucket, s3_client = self.bucket, self.s3_client
        # ``is not None``: a fake may be falsy (an empty queue has len 0).
        if changes.bucket or changes.s3_client is not None:
            store = None
        if changes.bucket or changes.s3_client is not None or changes.store is not None:
            records = None
        if changes.records is not None:
            store, bucket, s3_client = None, None, None
        if changes.queue_url or changes.sqs_client is not None:
            queue = None
        if changes.scheduler_client is not None:
            scheduler = None
        return BackendConfig(
            bucket if not changes.bucket else changes.bucket,
            self.queue_url if not changes.queue_url else changes.queue_url,
            prefix=changes.prefix or self.prefix,
            s3_client=s3_client if changes.s3_client is None else changes.s3_client,
            sqs_client=self.sqs_client if changes.sqs_client is None else changes.sqs_client,
            store=store if changes.store is None else changes.store,
            queue=queue if changes.queue is None else changes.queue,
            scheduler=scheduler if changes.scheduler is None else changes.scheduler,
            scheduler_client=(
                self.scheduler_client
                if changes.scheduler_client is None
                else changes.scheduler_client
            ),
            records=records if changes.records is None else changes.records,
        )


class Backends:
    """The configured bucket and queue (or store and queue) of one app, as the two seams."""

    def __init__(self, config: BackendConfig) -> None:
        self.config = config
        #: the clients made here on first use, not given: "s3", "sqs".
        self._made: set[str] = set()

    def configure(self, changes: BackendConfig) -> None:
        """Change what ``changes`` says (see :meth:`BackendConfig.changed_by`)."""
        self.config = self.config.changed_by(changes)
        if changes.s3_client is not None:
            self._made.discard("s3")
        if changes.sqs_client is not None:
            self._made.discard("sqs")
        if changes.scheduler_client is not None:
            self._made.discard("scheduler")

    def forget_made_clients(self) -> None:
        """Drop the boto3 clients made here (not those given): the next use makes new ones."""
        if "s3" in self._made:
            self.config = dataclasses.replace(self.config, s3_client=None)
        if "sqs" in self._made:
            self.config = dataclasses.replace(self.config, sqs_client=None)
        if "scheduler" in self._made:
            self.config = dataclasses.replace(self.config, scheduler_client=None)
        self._made.clear()

    @property
    def prefix(self) -> str:
        return self.config.prefix or os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX

    def store(self) -> RecordStore:
        """The record store: the one given, else the bucket on S3.

        Raises:
            ConfigurationError: neither a store nor a bucket is configured.
        """
        config = self.config
        if config.store is not None:
            return config.store
        from continuum.backends.s3 import S3RecordStore

        bucket = config.bucket or os.environ.get(BUCKET_ENV)
        if not bucket:
            raise ConfigurationError(
                "no bucket configured", hint=f"pass Continuum(bucket=...) or set {BUCKET_ENV}"
            )
        s3_client = config.s3_client
        if s3_client is None:
            import boto3

            s3_client = boto3.client("s3")  # kept: the app's client from now on
            self.config = dataclasses.replace(config, s3_client=s3_client)
            self._made.add("s3")
        return S3RecordStore(s3_client, bucket)

    def queue(self) -> ContinuationQueue:
        """The continuation queue: the one given, else the queue URL on SQS.

        Raises:
            ConfigurationError: neither a queue nor a queue URL is configured.
        """
        config = self.config
        if config.queue is not None:
            return config.queue
        from continuum.backends.sqs import SQSContinuationQueue

        queue_url = config.queue_url or os.environ.get(QUEUE_URL_ENV)
        if not queue_url:
            raise ConfigurationError(
                "no continuation queue configured",
                hint=f"pass Continuum(queue_url=...) or set {QUEUE_URL_ENV}",
            )
        sqs_client = config.sqs_client
        if sqs_client is None:
            import boto3

            sqs_client = boto3.client("sqs")
            self.config = dataclasses.replace(config, sqs_client=sqs_client)
            self._made.add("sqs")
        return SQSContinuationQueue(sqs_client, queue_url)

    def scheduler(self) -> ContinuationScheduler | None:
        """The continuation scheduler: the one given, else EventBridge Scheduler when the
        environment names the stack's schedule group, the scheduler's role and the queue's ARN;
        else None (long waits then hop on delayed messages).

        Raises:
            ConfigurationError: the environment names some of the three, not all.
        """
        config = self.config
        if config.scheduler is not None:
            return config.scheduler
        names = (SCHEDULE_GROUP_ENV, SCHEDULER_ROLE_ENV, QUEUE_ARN_ENV)
        group = os.environ.get(SCHEDULE_GROUP_ENV)
        role_arn = os.environ.get(SCHEDULER_ROLE_ENV)
        queue_arn = os.environ.get(QUEUE_ARN_ENV)
        if not (group or role_arn or queue_arn):
            return None
        if not (group and role_arn and queue_arn):
            missing = [name for name in names if not os.environ.get(name)]
            raise ConfigurationError(
                f"the scheduler's environment is incomplete: {', '.join(missing)} not set",
                hint=f"set all of {', '.join(names)}, or none (no scheduler)",
            )
        from continuum.backends.eventbridge import EventBridgeScheduler

        client = config.scheduler_client
        if client is None:
            import boto3

            client = boto3.client("scheduler")
            self.config = dataclasses.replace(config, scheduler_client=client)
            self._made.add("scheduler")
        return EventBridgeScheduler(client, group=group, target_arn=queue_arn, role_arn=role_arn)
