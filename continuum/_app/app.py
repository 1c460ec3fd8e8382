"""Continuum: the registry of tasks and steps, their settings, and the Lambda entry points.

The app only assembles: it keeps the tasks and steps, one frozen :class:`Settings`, and where
records and continuations live, and hands each collaborator (the worker, the client, the
dead-letter handler) the few of those it uses.

Example:
    >>> app = Continuum()  # bucket and queue from CONTINUUM_BUCKET and CONTINUUM_QUEUE_URL
    >>> @app.step
    ... def fetch(url: str) -> str: ...
    >>> class Crawl(BaseModel):
    ...     urls: list[str]
    ...     pages: list[str] = []
    >>> @app.task(state=Crawl)
    ... def crawl(ctx: TaskContext[Crawl]) -> list[str] | None:
    ...     ctx.state.pages.append(fetch(ctx.state.urls[len(ctx.state.pages)]))
    ...     return ctx.state.pages if len(ctx.state.pages) == len(ctx.state.urls) else None
    >>> handler = app.handler  # the Lambda entry point for the SQS event source
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from continuum._app.backend_config import Backends
from continuum._app.decorators import Decorators
from continuum._define.observers import Observer, Observers
from continuum._define.settings import (
    DEFAULT_CONFIDENCE,
    DEFAULT_INBOX_POLL_S,
    DEFAULT_MAX_IDLE_SUSPENSIONS,
    DEFAULT_MAX_STATE_BYTES,
    DEFAULT_MAX_STEP_CRASHES,
    DEFAULT_PERSIST_EVERY_S,
    DEFAULT_PREEMPTIBLE_CONFIDENCE,
    DEFAULT_STEP_S,
    DEFAULT_VISIBILITY_MARGIN_S,
    SAFETY_MARGIN_S,
    Settings,
)
from continuum._define.steps import Step
from continuum._record.codec import DEFAULT_INLINE_LIMIT_BYTES
from continuum._record.continuation import Continuations, parse_keys
from continuum._record.records import Records
from continuum._turn.tasks import Registry, Task
from continuum._worker.metering import Meter
from continuum._worker.sqs_batch import LambdaContext
from continuum._worker.worker import Worker
from continuum.backends.queue import ContinuationQueue
from continuum.backends.store import RecordStore

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

    from continuum._ops.client import Client

ObserverT = TypeVar("ObserverT", bound=Observer)


class Continuum(Decorators):
    """An app: tasks, steps, where their records and continuations live, and how they run.

    Args:
        bucket: the S3 bucket of the records (default: ``CONTINUUM_BUCKET``).
        queue_url: the SQS continuation queue (default: ``CONTINUUM_QUEUE_URL``).
        prefix: the key prefix of the records (default: ``CONTINUUM_PREFIX`` or ``tasks``).
        s3_client: a boto3 S3 client (default: one made on first use).
        sqs_client: a boto3 SQS client (default: one made on first use).
        store: a record store instead of S3 (``continuum.testing.InMemoryRecordStore``).
        queue: a continuation queue instead of SQS (``InMemoryContinuationQueue``).
        confidence, safety_margin_s, default_step_s, persist_every_s, inline_limit_bytes,
        max_state_bytes, visibility_margin_s, preemptible_confidence, max_step_crashes,
        max_idle_suspensions, inbox_poll_s: the budget rule, limits and margins; see
            :class:`continuum.Settings` for each.
        signing_key: sign continuation messages with HMAC-SHA256 and refuse unsigned or
            forged ones. Several keys (a list, or a comma-separated string) rotate: the first
            signs, any verifies. Default: ``continuum._base.signing_keys.load_signing_keys()`` (from
            ``CONTINUUM_SIGNING_KEY``, an SSM parameter or a secret); none means no signing.
    """

    def __init__(
        self,
        bucket: str | None = None,
        queue_url: str | None = None,
        *,
        prefix: str | None = None,
        s3_client: S3Client | None = None,
        sqs_client: SQSClient | None = None,
        store: RecordStore | None = None,
        queue: ContinuationQueue | None = None,
        confidence: float = DEFAULT_CONFIDENCE,
        safety_margin_s: float = SAFETY_MARGIN_S,
        default_step_s: float = DEFAULT_STEP_S,
        persist_every_s: float = DEFAULT_PERSIST_EVERY_S,
        inline_limit_bytes: int = DEFAULT_INLINE_LIMIT_BYTES,
        max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
        visibility_margin_s: int | None = DEFAULT_VISIBILITY_MARGIN_S,
        preemptible_confidence: float = DEFAULT_PREEMPTIBLE_CONFIDENCE,
        max_step_crashes: int = DEFAULT_MAX_STEP_CRASHES,
        max_idle_suspensions: int = DEFAULT_MAX_IDLE_SUSPENSIONS,
        inbox_poll_s: float = DEFAULT_INBOX_POLL_S,
        signing_key: str | Sequence[str] | None = None,
    ) -> None:
        self.registry = Registry()
        self._settings = Settings(
            confidence=confidence,
            safety_margin_s=safety_margin_s,
            default_step_s=default_step_s,
            persist_every_s=persist_every_s,
            inline_limit_bytes=inline_limit_bytes,
            max_state_bytes=max_state_bytes,
            visibility_margin_s=visibility_margin_s,
            preemptible_confidence=preemptible_confidence,
            max_step_crashes=max_step_crashes,
            max_idle_suspensions=max_idle_suspensions,
            inbox_poll_s=inbox_poll_s,
            signing_keys=parse_keys(signing_key),
        )
        self._keys_given = signing_key is not None
        self._backends = Backends(
            bucket=bucket,
            queue_url=queue_url,
            prefix=prefix,
            s3_client=s3_client,
            sqs_client=sqs_client,
            store=store,
            queue=queue,
        )
        #: counts the store and queue calls each message makes (``record.usage``).
        self.meter = Meter()
        #: hooks on what the worker does (``app.observe``).
        self.observers = Observers()
        self._records: Records | None = None
        self._continuations: Continuations | None = None
        self._worker: Worker | None = None

    # -- registration ------------------------------------------------------------------------

    @property
    def tasks(self) -> dict[str, Task[Any]]:
        return self.registry.tasks

    @property
    def steps(self) -> dict[str, Step[Any, Any]]:
        return self.registry.steps

    # -- settings, and where records and continuations live ----------------------------------

    @property
    def settings(self) -> Settings:
        """The app's settings, with the signing keys resolved."""
        if not self._keys_given and not self._settings.signing_keys:
            from continuum._base.signing_keys import load_signing_keys

            keys = load_signing_keys()
            if keys:
                self._settings = dataclasses.replace(self._settings, signing_keys=keys)
            self._keys_given = True
        return self._settings

    def update_settings(self, **changes: Any) -> None:
        """Change settings (validated as at construction); the next message uses them."""
        self._settings = dataclasses.replace(self.settings, **changes)
        self._records = self._continuations = self._worker = None

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
        """Point the app at a bucket and queue, or at a store and queue (local runs, tests)."""
        self._backends.configure(
            bucket=bucket,
            queue_url=queue_url,
            prefix=prefix,
            s3_client=s3_client,
            sqs_client=sqs_client,
            store=store,
            queue=queue,
        )
        self._records = self._continuations = self._worker = None

    @property
    def records(self) -> Records:
        """The task records (S3, or the store given)."""
        if self._records is None:
            settings = self.settings
            self._records = Records(
                self.meter.wrap(self._backends.store()),
                prefix=self._backends.prefix,
                inline_limit=settings.inline_limit_bytes,
                max_value_bytes=settings.max_state_bytes,
            )
        return self._records

    @property
    def continuations(self) -> Continuations:
        """Where continuations are sent (SQS, or the queue given), and their signing keys."""
        if self._continuations is None:
            queue = self.meter.wrap(self._backends.queue())
            self._continuations = Continuations(queue, keys=self.settings.signing_keys)
        return self._continuations

    # -- entry points ------------------------------------------------------------------------

    def handler(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        """The Lambda entry point for an SQS event source with ReportBatchItemFailures."""
        if self._worker is None:
            self._worker = Worker(
                self.registry,
                self.records,
                self.continuations,
                self.settings,
                meter=self.meter,
                observers=self.observers,
            )
        return self._worker.handle_batch(event, context)

    def observe(self, observer: ObserverT) -> ObserverT:
        """Register an observer of what the worker does (``continuum.Observer``); returns it.

        Example:
            >>> class Steps(Observer):
            ...     def step_ended(self, event):
            ...         print(event.key, event.outcome, event.duration_s)
            >>> app.observe(Steps())  # doctest: +SKIP
        """
        self.observers.add(observer)
        return observer

    def dead_letter_handler(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        """The Lambda entry point for the dead-letter queue: fails or continues each task."""
        from continuum._worker.dead_letter import DeadLetters  # see client()

        return DeadLetters(self.records, self.continuations).handle_batch(event, context)

    def client(self) -> Client:
        """A client to start tasks and read their status and results."""
        # The client and the dead-letter handler are imported on first use (thread safely:
        # an import holds its module's lock until it is done): a worker handling messages
        # needs neither, and they cost about 1.5 ms of its cold import.
        from continuum._ops.client import Client

        return Client(
            self.records, self.continuations, registry=self.registry, settings=self.settings
        )
