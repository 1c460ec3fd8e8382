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
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, cast, overload

from pydantic import BaseModel

from continuum.batch import LambdaContext
from continuum.budget import (
    DEFAULT_CONFIDENCE,
    DEFAULT_PREEMPTIBLE_CONFIDENCE,
    DEFAULT_STEP_S,
    SAFETY_MARGIN_S,
)
from continuum.client import Client
from continuum.codec import DEFAULT_INLINE_LIMIT_BYTES
from continuum.context import TaskContext
from continuum.continuation import Continuations, parse_keys
from continuum.dead_letter import DeadLetters
from continuum.errors import ConfigurationError
from continuum.queue import ContinuationQueue
from continuum.records import Records
from continuum.settings import (
    DEFAULT_MAX_CONTINUATIONS,
    DEFAULT_MAX_IDLE_SUSPENSIONS,
    DEFAULT_MAX_STATE_BYTES,
    DEFAULT_MAX_STEP_CRASHES,
    DEFAULT_PERSIST_EVERY_S,
    DEFAULT_VISIBILITY_MARGIN_S,
    Settings,
)
from continuum.steps import Step, StepOptions
from continuum.store import RecordStore
from continuum.tasks import Registry, Task
from continuum.worker import Worker

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=BaseModel)


class StepDecorator(Protocol):
    """``@app.step(...)`` with options: turns a function into a Step of the same signature."""

    def __call__(self, fn: Callable[P, R], /) -> Step[P, R]: ...


class Continuum:
    """An app: tasks, steps, where their records and continuations live, and how they run.

    Args:
        bucket: the S3 bucket of the records (default: ``CONTINUUM_BUCKET``).
        queue_url: the SQS continuation queue (default: ``CONTINUUM_QUEUE_URL``).
        prefix: the key prefix of the records (default: ``CONTINUUM_PREFIX`` or ``tasks``).
        s3_client: a boto3 S3 client (default: one made on first use).
        sqs_client: a boto3 SQS client (default: one made on first use).
        store: a record store instead of S3 (``continuum.testing.InMemoryRecordStore``).
        queue: a continuation queue instead of SQS (``InMemoryContinuationQueue``).
        confidence: the share of a step's durations the budget rule covers.
        safety_margin_s: seconds kept free beyond the predicted step and save.
        default_step_s: the assumed duration of a step never seen before.
        persist_every_s: save the journal at least this often while steps complete.
        inline_limit_bytes: states and results larger than this go to compressed blobs.
        max_state_bytes: the largest state, task result or step result accepted (JSON bytes).
        visibility_margin_s: seconds after this invocation's deadline at which its message
            reappears if the worker dies (the claim sets the message's visibility with one
            ChangeMessageVisibility call). None keeps the queue's visibility timeout: one AWS
            call less per continuation, but a dead worker's task waits that long.
        preemptible_confidence: the confidence of the budget rule for preemptible steps.
        max_step_crashes: consecutive worker deaths at one step after which the task fails.
        max_idle_suspensions: consecutive suspensions without progress after which it fails.
        signing_key: sign continuation messages with HMAC-SHA256 and refuse unsigned or
            forged ones. Several keys (a list, or a comma-separated string) rotate: the first
            signs, any verifies. Default: ``continuum.secrets.load_signing_keys()`` (from
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
            signing_keys=parse_keys(signing_key),
        )
        self._keys_given = signing_key is not None
        self._bucket, self._queue_url, self._prefix = bucket, queue_url, prefix
        self._s3_client, self._sqs_client = s3_client, sqs_client
        self._store, self._queue = store, queue
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

    def task(
        self,
        *,
        state: type[S],
        name: str | None = None,
        version: int = 1,
        max_continuations: int = DEFAULT_MAX_CONTINUATIONS,
        confidence: float | None = None,
        safety_margin_s: float | None = None,
    ) -> Callable[[Callable[[TaskContext[S]], Any]], Task[S]]:
        """Register a task over the state model ``state``.

        The function is called once per turn; it returns None to take another turn and
        anything else (JSON-serialisable) to finish with that result. ``confidence`` and
        ``safety_margin_s`` override the app's budget rule for this task. Generator and async
        functions are refused (ConfigurationError).
        """

        def register(fn: Callable[[TaskContext[S]], Any]) -> Task[S]:
            task = Task(
                fn=fn,
                name=name or fn.__name__,
                state_model=state,
                version=version,
                max_continuations=max_continuations,
                confidence=confidence,
                safety_margin_s=safety_margin_s,
            )
            self.registry.add_task(task)
            return task

        return register

    @overload
    def step(self, fn: Callable[P, R], /) -> Step[P, R]: ...

    @overload
    def step(
        self,
        *,
        name: str | None = None,
        effect: bool = False,
        retries: int = 0,
        backoff_s: float = 0.5,
        retry_on: tuple[type[BaseException], ...] = (Exception,),
        preemptible: bool = False,
    ) -> StepDecorator: ...

    def step(  # type: ignore[misc]  # mypy cannot match a ParamSpec overload implementation
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        name: str | None = None,
        effect: bool = False,
        retries: int = 0,
        backoff_s: float = 0.5,
        retry_on: tuple[type[BaseException], ...] = (Exception,),
        preemptible: bool = False,
    ) -> Step[P, R] | StepDecorator:
        """Register a step, bare (``@app.step``) or with options (``@app.step(effect=True)``).

        See :class:`continuum.StepOptions` for what each option does.
        """

        def register(f: Callable[P, R]) -> Step[P, R]:
            options = StepOptions(
                name=name or f.__name__,
                effect=effect,
                retries=retries,
                backoff_s=backoff_s,
                retry_on=retry_on,
                preemptible=preemptible,
            )
            step = Step(fn=f, options=options)
            self.registry.add_step(step)
            return step

        if fn is not None:
            return register(fn)
        return cast(StepDecorator, register)

    # -- settings, and where records and continuations live ----------------------------------

    @property
    def settings(self) -> Settings:
        """The app's settings, with the signing keys resolved."""
        if not self._keys_given and not self._settings.signing_keys:
            from continuum.secrets import load_signing_keys

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
        if bucket or s3_client:
            self._store = None
        if queue_url or sqs_client:
            self._queue = None
        self._bucket = bucket or self._bucket
        self._queue_url = queue_url or self._queue_url
        self._prefix = prefix or self._prefix
        self._s3_client = s3_client or self._s3_client
        self._sqs_client = sqs_client or self._sqs_client
        # `is not None`: an empty in-memory queue is falsy (it has a length).
        self._store = store if store is not None else self._store
        self._queue = queue if queue is not None else self._queue
        self._records = self._continuations = self._worker = None

    @property
    def records(self) -> Records:
        """The task records (S3, or the store given)."""
        if self._records is None:
            settings = self.settings
            prefix = self._prefix or os.environ.get("CONTINUUM_PREFIX") or "tasks"
            self._records = Records(
                self._store if self._store is not None else self._s3_store(),
                prefix=prefix,
                inline_limit=settings.inline_limit_bytes,
                max_value_bytes=settings.max_state_bytes,
            )
        return self._records

    @property
    def continuations(self) -> Continuations:
        """Where continuations are sent (SQS, or the queue given), and their signing keys."""
        if self._continuations is None:
            queue = self._queue if self._queue is not None else self._sqs_queue()
            self._continuations = Continuations(queue, keys=self.settings.signing_keys)
        return self._continuations

    def _s3_store(self) -> RecordStore:
        from continuum.s3 import S3RecordStore

        bucket = self._bucket or os.environ.get("CONTINUUM_BUCKET")
        if not bucket:
            raise ConfigurationError(
                "no bucket configured",
                hint="pass Continuum(bucket=...) or set CONTINUUM_BUCKET",
            )
        if self._s3_client is None:
            import boto3

            self._s3_client = boto3.client("s3")
        return S3RecordStore(self._s3_client, bucket)

    def _sqs_queue(self) -> ContinuationQueue:
        from continuum.sqs import SQSContinuationQueue

        queue_url = self._queue_url or os.environ.get("CONTINUUM_QUEUE_URL")
        if not queue_url:
            raise ConfigurationError(
                "no continuation queue configured",
                hint="pass Continuum(queue_url=...) or set CONTINUUM_QUEUE_URL",
            )
        if self._sqs_client is None:
            import boto3

            self._sqs_client = boto3.client("sqs")
        return SQSContinuationQueue(self._sqs_client, queue_url)

    # -- entry points ------------------------------------------------------------------------

    def handler(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        """The Lambda entry point for an SQS event source with ReportBatchItemFailures."""
        if self._worker is None:
            self._worker = Worker(self.registry, self.records, self.continuations, self.settings)
        return self._worker.handle_batch(event, context)

    def dead_letter_handler(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        """The Lambda entry point for the dead-letter queue: fails or continues each task."""
        return DeadLetters(self.records, self.continuations).handle_batch(event, context)

    def client(self) -> Client:
        """A client to start tasks and read their status and results."""
        return Client(
            self.records, self.continuations, registry=self.registry, settings=self.settings
        )
