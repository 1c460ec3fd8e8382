"""Where an app's records and continuations live: S3 and SQS, or a store and queue given.

The app's configuration says a bucket and a queue URL (as arguments or ``CONTINUUM_BUCKET``
and ``CONTINUUM_QUEUE_URL``), with boto3 clients made on first use unless given; or it says a
:class:`~continuum.RecordStore` and a :class:`~continuum.ContinuationQueue`
directly (the in-memory fakes of ``continuum.testing``, say). This module turns either into the
two seams, and nothing above it knows which it was.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from continuum.backends.queue import ContinuationQueue
from continuum.backends.store import RecordStore
from continuum.errors import ConfigurationError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

#: The key prefix of the records unless configured (``CONTINUUM_PREFIX``).
DEFAULT_PREFIX = "tasks"


class Backends:
    """The configured bucket and queue (or store and queue) of one app."""

    def __init__(
        self,
        *,
        bucket: str | None = None,
        queue_url: str | None = None,
        prefix: str | None = None,
        s3_client: S3Client | None = None,
        sqs_client: SQSClient | None = None,
        store: RecordStore | None = None,
        queue: ContinuationQueue | None = None,
    ) -> None:
        self.bucket, self.queue_url, self._prefix = bucket, queue_url, prefix
        self.s3_client, self.sqs_client = s3_client, sqs_client
        self._store, self._queue = store, queue
        #: the clients made here on first use, not given: "s3", "sqs".
        self._made: set[str] = set()

    def configure(
        self,
        *,
        bucket: str | None = None,
        queue_url: str | None = None,
        prefix: str | None = None,
        s3_client: S3Client | None = None,
        sqs_client: SQSClient | None = None,
        store: RecordStore | None = None,
        queue: ContinuationQueue | None = None,
    ) -> None:
        """Change what is given; a bucket or S3 client replaces a store, and likewise SQS."""
        # ``is not None``: a fake may be falsy (an empty queue has len 0).
        if bucket or s3_client is not None:
            self._store = None
        if queue_url or sqs_client is not None:
            self._queue = None
        self.bucket = bucket or self.bucket
        self.queue_url = queue_url or self.queue_url
        self._prefix = prefix or self._prefix
        if s3_client is not None:
            self.s3_client = s3_client
            self._made.discard("s3")
        if sqs_client is not None:
            self.sqs_client = sqs_client
            self._made.discard("sqs")
        if store is not None:
            self._store = store
        if queue is not None:
            self._queue = queue

    @property
    def prefix(self) -> str:
        return self._prefix or os.environ.get("CONTINUUM_PREFIX") or DEFAULT_PREFIX

    def store(self) -> RecordStore:
        """The record store: the one given, else the bucket on S3.

        Raises:
            ConfigurationError: neither a store nor a bucket is configured.
        """
        if self._store is not None:
            return self._store
        from continuum.backends.s3 import S3RecordStore

        bucket = self.bucket or os.environ.get("CONTINUUM_BUCKET")
        if not bucket:
            raise ConfigurationError(
                "no bucket configured",
                hint="pass Continuum(bucket=...) or set CONTINUUM_BUCKET",
            )
        if self.s3_client is None:
            import boto3

            self.s3_client = boto3.client("s3")
            self._made.add("s3")
        return S3RecordStore(self.s3_client, bucket)

    def queue(self) -> ContinuationQueue:
        """The continuation queue: the one given, else the queue URL on SQS.

        Raises:
            ConfigurationError: neither a queue nor a queue URL is configured.
        """
        if self._queue is not None:
            return self._queue
        from continuum.backends.sqs import SQSContinuationQueue

        queue_url = self.queue_url or os.environ.get("CONTINUUM_QUEUE_URL")
        if not queue_url:
            raise ConfigurationError(
                "no continuation queue configured",
                hint="pass Continuum(queue_url=...) or set CONTINUUM_QUEUE_URL",
            )
        if self.sqs_client is None:
            import boto3

            self.sqs_client = boto3.client("sqs")
            self._made.add("sqs")
        return SQSContinuationQueue(self.sqs_client, queue_url)

    def forget_made_clients(self) -> None:
        """Drop the boto3 clients made here (not those given): the next use makes new ones."""
        if "s3" in self._made:
            self.s3_client = None
        if "sqs" in self._made:
            self.sqs_client = None
        self._made.clear()
