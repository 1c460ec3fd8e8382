"""Continuum: the registry of tasks and steps, their configuration, and the Lambda entry point.

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

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar, cast, overload

from pydantic import BaseModel, TypeAdapter

from continuum.budget import (
    DEFAULT_CONFIDENCE,
    DEFAULT_PREEMPTIBLE_CONFIDENCE,
    DEFAULT_STEP_S,
    SAFETY_MARGIN_S,
)
from continuum.context import TaskContext
from continuum.errors import ConfigurationError
from continuum.queue import ContinuationQueue
from continuum.record import DEFAULT_INLINE_LIMIT_BYTES
from continuum.steps import Step, StepOptions, return_adapter
from continuum.store import RecordStore
from continuum.turns import DEFAULT_MAX_STEP_CRASHES

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

    from continuum.client import Client

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=BaseModel)

#: A task that continues more often than this fails: it is probably not making progress.
DEFAULT_MAX_CONTINUATIONS = 10_000
#: Save the journal at least this often (seconds of work) so a crash loses little.
DEFAULT_PERSIST_EVERY_S = 60.0
#: The largest state or result accepted, as JSON (blobs are compressed beyond the inline limit).
DEFAULT_MAX_STATE_BYTES = 64 * 1024 * 1024
#: Suspensions in a row that complete no step before a task fails: it cannot make progress.
DEFAULT_MAX_IDLE_SUSPENSIONS = 5


class StepDecorator(Protocol):
    """``@app.step(...)`` with options: turns a function into a Step of the same signature."""

    def __call__(self, fn: Callable[P, R], /) -> Step[P, R]: ...


@dataclass
class Task(Generic[S]):
    """A decorated task: a function called turn after turn over a typed state."""

    fn: Callable[[TaskContext[S]], Any]
    name: str
    state_model: type[S]
    app: Continuum
    version: int = 1
    max_continuations: int = DEFAULT_MAX_CONTINUATIONS
    confidence: float | None = None
    safety_margin_s: float | None = None
    _result_adapter: TypeAdapter[Any] | None = field(default=None, init=False, repr=False)

    @property
    def result_adapter(self) -> TypeAdapter[Any]:
        """Converts the task's result to JSON, following its return annotation."""
        if self._result_adapter is None:
            self._result_adapter = return_adapter(self.fn, what=f"task {self.name!r}")
        return self._result_adapter

    def __call__(self, ctx: TaskContext[S]) -> Any:
        return self.fn(ctx)


class Continuum:
    """An app: tasks, steps, where their records and continuations live, and how they run.

    Args:
        bucket: the S3 bucket of the records (default: ``CONTINUUM_BUCKET``).
        queue_url: the SQS continuation queue (default: ``CONTINUUM_QUEUE_URL``).
        prefix: the key prefix of the records (default: ``CONTINUUM_PREFIX`` or ``tasks``).
        s3_client: a boto3 S3 client (default: one made on first use).
        sqs_client: a boto3 SQS client (default: one made on first use).
        confidence: the share of a step's durations the budget rule covers.
        safety_margin_s: seconds kept free beyond the predicted step and save.
        default_step_s: the assumed duration of a step never seen before.
        persist_every_s: save the journal at least this often while steps complete.
        inline_limit_bytes: states and results larger than this go to compressed blobs.
        max_state_bytes: the largest state, task result or step result accepted (JSON bytes).
        visibility_margin_s: seconds after this invocation's deadline at which its message
            reappears if the worker dies (the claim shortens the message's visibility with one
            ChangeMessageVisibility call). None keeps the queue's visibility timeout: one AWS
            call less per continuation, but a dead worker's task waits that long.
        preemptible_confidence: the confidence of the budget rule for preemptible steps.
        max_step_crashes: consecutive worker deaths at one step after which the task fails.
        max_idle_suspensions: consecutive suspensions without progress after which it fails.
        signing_key: sign continuation messages with HMAC-SHA256 and reject unsigned or
            forged ones (default: ``CONTINUUM_SIGNING_KEY``; unset means no signing).
    """

    def __init__(
        self,
        bucket: str | None = None,
        queue_url: str | None = None,
        *,
        prefix: str | None = None,
        s3_client: S3Client | None = None,
        sqs_client: SQSClient | None = None,
        confidence: float = DEFAULT_CONFIDENCE,
        safety_margin_s: float = SAFETY_MARGIN_S,
        default_step_s: float = DEFAULT_STEP_S,
        persist_every_s: float = DEFAULT_PERSIST_EVERY_S,
        inline_limit_bytes: int = DEFAULT_INLINE_LIMIT_BYTES,
        max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
        visibility_margin_s: int | None = 5,
        preemptible_confidence: float = DEFAULT_PREEMPTIBLE_CONFIDENCE,
        max_step_crashes: int = DEFAULT_MAX_STEP_CRASHES,
        max_idle_suspensions: int = DEFAULT_MAX_IDLE_SUSPENSIONS,
        signing_key: str | None = None,
    ) -> None:
        self.tasks: dict[str, Task[Any]] = {}
        self.steps: dict[str, Step[Any, Any]] = {}
        self._bucket = bucket
        self._queue_url = queue_url
        self._prefix = prefix
        self._s3_client = s3_client
        self._sqs_client = sqs_client
        self.confidence = confidence
        self.safety_margin_s = safety_margin_s
        self.default_step_s = default_step_s
        self.persist_every_s = persist_every_s
        self.inline_limit_bytes = inline_limit_bytes
        self.max_state_bytes = max_state_bytes
        self.visibility_margin_s = visibility_margin_s
        self.preemptible_confidence = preemptible_confidence
        self.max_step_crashes = max_step_crashes
        self.max_idle_suspensions = max_idle_suspensions
        self._signing_key = signing_key
        self._store: RecordStore | None = None
        self._queue: ContinuationQueue | None = None
        self._worker: Any = None

    # -- registration ------------------------------------------------------------------------

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
        ``safety_margin_s`` override the app's budget rule for this task.
        """

        def register(fn: Callable[[TaskContext[S]], Any]) -> Task[S]:
            task_name = name or fn.__name__
            if task_name in self.tasks:
                raise ConfigurationError(f"two tasks are named {task_name!r}")
            task = Task(
                fn=fn,
                name=task_name,
                state_model=state,
                app=self,
                version=version,
                max_continuations=max_continuations,
                confidence=confidence,
                safety_margin_s=safety_margin_s,
            )
            self.tasks[task_name] = task
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

        See :class:`continuum.steps.StepOptions` for what each option does.
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
            if options.name in self.steps:
                raise ConfigurationError(f"two steps are named {options.name!r}")
            step = Step(fn=f, options=options)
            self.steps[options.name] = step
            return step

        if fn is not None:
            return register(fn)
        return cast(StepDecorator, register)

    # -- where records and continuations live ------------------------------------------------

    def configure(
        self,
        *,
        bucket: str | None = None,
        queue_url: str | None = None,
        prefix: str | None = None,
        s3_client: S3Client | None = None,
        sqs_client: SQSClient | None = None,
    ) -> None:
        """Point the app at a bucket and queue (the local runtime and tests use this)."""
        self._bucket = bucket or self._bucket
        self._queue_url = queue_url or self._queue_url
        self._prefix = prefix or self._prefix
        self._s3_client = s3_client or self._s3_client
        self._sqs_client = sqs_client or self._sqs_client
        self._store = None
        self._queue = None
        self._worker = None

    @property
    def store(self) -> RecordStore:
        if self._store is None:
            bucket = self._bucket or os.environ.get("CONTINUUM_BUCKET")
            if not bucket:
                raise ConfigurationError(
                    "no bucket configured",
                    hint="pass Continuum(bucket=...) or set CONTINUUM_BUCKET",
                )
            if self._s3_client is None:
                import boto3

                self._s3_client = boto3.client("s3")
            prefix = self._prefix or os.environ.get("CONTINUUM_PREFIX") or "tasks"
            self._store = RecordStore(
                s3_client=self._s3_client,
                bucket=bucket,
                prefix=prefix.strip("/"),
                max_value_bytes=self.max_state_bytes,
                inline_limit=self.inline_limit_bytes,
            )
        return self._store

    @property
    def queue(self) -> ContinuationQueue:
        if self._queue is None:
            queue_url = self._queue_url or os.environ.get("CONTINUUM_QUEUE_URL")
            if not queue_url:
                raise ConfigurationError(
                    "no continuation queue configured",
                    hint="pass Continuum(queue_url=...) or set CONTINUUM_QUEUE_URL",
                )
            if self._sqs_client is None:
                import boto3

                self._sqs_client = boto3.client("sqs")
            signing_key = self._signing_key or os.environ.get("CONTINUUM_SIGNING_KEY") or None
            self._queue = ContinuationQueue(
                sqs_client=self._sqs_client, queue_url=queue_url, signing_key=signing_key
            )
        return self._queue

    # -- entry points ------------------------------------------------------------------------

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The Lambda entry point for an SQS event source with ReportBatchItemFailures."""
        if self._worker is None:
            from continuum.worker import Worker

            self._worker = Worker(self)
        result: dict[str, Any] = self._worker.handle_batch(event, context)
        return result

    def dead_letter_handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The Lambda entry point for the dead-letter queue: marks each task ``failed``."""
        from continuum.dead_letter import DeadLetters

        result: dict[str, Any] = DeadLetters(self).handle_batch(event, context)
        return result

    def client(self) -> Client:
        """A client to start tasks and read their status and results."""
        from continuum.client import Client

        return Client(self)
