"""Continuum: the registry of tasks and steps, their settings, and the Lambda entry points.

The app only assembles: it keeps the tasks and steps, one frozen :class:`Settings`, and where
records and continuations live, and hands each collaborator (the worker, the client, the
dead-letter handler) the few of those it uses.

Example:
    >>> from pydantic import BaseModel
    >>> from continuum import Continuum, TaskContext
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
from typing import TYPE_CHECKING, Any, TypeVar

from continuum._app.backend_config import BackendConfig, Backends
from continuum._app.decorators import Decorators
from continuum._app.options import (
    CONTINUUM_SIGNATURE,
    continuum_keywords,
    keywords_of,
    split_options,
)
from continuum._define.observers import Observer, Observers
from continuum._define.settings import Settings
from continuum._define.steps import Step
from continuum._record.continuation import Continuations
from continuum._record.persistence import Records
from continuum._turn.tasks import Registry, Task
from continuum._worker.metering import Meter
from continuum._worker.sqs_batch import LambdaContext
from continuum._worker.worker import Worker
from continuum.errors import ConfigurationError

if TYPE_CHECKING:
    from datetime import timedelta

    from continuum._define.recurring import ScheduleDeclaration
    from continuum._ops.client import Client
    from continuum._waits.link_endpoint import LinkEndpoint
    from continuum.backends.scheduler import ContinuationScheduler

ObserverT = TypeVar("ObserverT", bound=Observer)


class Continuum(Decorators):
    """An app: tasks, steps, where their records and continuations live, and how they run.

    Takes ``bucket`` and ``queue_url`` (or the environment's) and, as keywords, where else
    records and continuations live (the fields of ``BackendConfig``: ``prefix``,
    ``s3_client``, ``sqs_client``, ``store``, ``queue``, ``records``), the budget rule, limits
    and margins (the fields of :class:`continuum.Settings`: ``confidence``,
    ``safety_margin_s``, ...), and ``signing_key``. Each is documented once, as its field;
    ``help(Continuum)`` lists them.

    Raises:
        TypeError: a keyword it does not take.
        ConfigurationError: a value of the wrong type, or out of range.
    """

    @continuum_keywords
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        options = split_options(CONTINUUM_SIGNATURE, *args, **kwargs)
        self.registry = Registry()
        self._settings = options.settings
        self._keys_given = options.signing_key is not None
        self._keys_read = False  # read from the environment (signing.load_signing_keys)
        self._backends = Backends(options.backends)
        #: counts the store and queue calls each message makes (``record.usage``).
        self.meter = Meter()
        #: hooks on what the worker does (``app.observe``).
        self.observers = Observers()
        self._records: Records | None = None
        self._continuations: Continuations | None = None
        self._worker: Worker | None = None
        self._links: LinkEndpoint | None = None

    # -- registration ------------------------------------------------------------------------

    @property
    def tasks(self) -> dict[str, Task[Any]]:
        return self.registry.tasks

    @property
    def steps(self) -> dict[str, Step[Any, Any]]:
        return self.registry.steps

    def schedule(
        self,
        name: str,
        task: Task[Any] | str,
        *,
        cron: str | None = None,
        every: timedelta | None = None,
        input: Any = None,
        timezone: str = "UTC",
        overlap: str = "skip",
    ) -> ScheduleDeclaration:
        """Declare a recurring schedule: each of its times starts one run of ``task``.

        ``continuum schedules sync`` (or ``sync_schedules``) makes the stack's schedules what
        the app declares. A run's task id is ``{name}-{yyyymmddThhmmssZ}``, its scheduled
        time, so that a fire delivered twice starts it once.

        Args:
            name: the schedule's name: letters, digits, ``.``, ``_``, ``-`` (54 at most).
            task: the task each fire starts (a registered task, or its name).
            cron: an EventBridge Scheduler cron expression, ``"cron(0 9 * * ? *)"``.
            every: a period instead (a ``timedelta`` of whole minutes): ``rate(...)``.
            input: the run's input, validated against the task's state model (None: the
                model's defaults).
            timezone: the IANA time zone ``cron`` is read in.
            overlap: "skip" (a fire while the previous run has not finished starts nothing,
                and says so) or "allow".

        Raises:
            ConfigurationError: naming the schedule: a bad name, expression, time zone,
                overlap or input, not exactly one of ``cron`` and ``every``, or a taken name.
        """
        # Imported here: a worker whose app declares no schedule never loads it.
        from continuum._define.recurring import check_input, declare_schedule

        if not isinstance(task, Task | str):
            raise ConfigurationError(
                f"schedule {name!r}: task= is a registered task or its name, got "
                f"{type(task).__name__}"
            )
        task_name = task.name if isinstance(task, Task) else task
        declaration = declare_schedule(
            name,
            task_name,
            cron=cron,
            every=every,
            input=input,
            timezone=timezone,
            overlap=overlap,
        )
        known = task if isinstance(task, Task) else self.registry.tasks.get(task_name)
        if known is not None:  # a task registered later is checked when the schedules sync
            declaration = dataclasses.replace(
                declaration, input=check_input(declaration, known.state_model)
            )
        self.registry.add_schedule(declaration)
        return declaration

    # -- settings, and where records and continuations live ----------------------------------

    @property
    def settings(self) -> Settings:
        """The app's settings, with the signing keys resolved."""
        if not self._keys_given and not self._settings.signing_keys:
            from continuum._base.signing_keys import load_signing_keys

            keys = load_signing_keys()
            if keys:
                self._settings = dataclasses.replace(self._settings, signing_keys=keys)
            self._keys_given = self._keys_read = True
        return self._settings

    @keywords_of(Settings)
    def update_settings(self, **changes: Any) -> None:
        """Change settings (validated as at construction); the next message uses them."""
        self._settings = dataclasses.replace(self.settings, **changes)
        self._records = self._continuations = self._worker = self._links = None

    def register_snapstart_hooks(self) -> bool:
        """Register this app's Lambda SnapStart hooks (see ``continuum._app.snapstart``).

        Before the snapshot, they load what the first message would; after a restore, they
        reseed ``random`` and have the app remake its clients, worker and keys. The handler
        module calls it once the app is loaded.

        Returns:
            Whether they were registered: False outside Lambda's python3.12+ runtimes, which
            alone ship ``snapshot_restore_py``.
        """
        from continuum._app.snapstart import register

        return register(self)

    def _forget_environment(self) -> None:
        """Forget what was made for this execution environment: the boto3 clients the app
        made, the worker with its warm records, and the signing keys read from the environment
        (``continuum._app.snapstart``: a restored snapshot is another environment)."""
        self._backends.forget_made_clients()
        if self._keys_read:
            self._settings = dataclasses.replace(self._settings, signing_keys=())
            self._keys_given = self._keys_read = False
        self._records = self._continuations = self._worker = self._links = None

    @keywords_of(BackendConfig)
    def configure(self, *args: Any, **kwargs: Any) -> None:
        """Point the app at a bucket and queue, or at a store and queue (local runs, tests):
        what is given changes, the rest stays (a bucket replaces a store, and so on)."""
        self._backends.configure(BackendConfig(*args, **kwargs))
        self._records = self._continuations = self._worker = self._links = None

    @property
    def records(self) -> Records:
        """The task records (S3, or the store given, or the ``records`` given as they are)."""
        if self._records is None:
            given = self._backends.config.records
            if given is not None:
                self._records = given
                return given
            # imported here: the handler's cold import does not need the blob store's records
            from continuum._record.blob_records import BlobRecords

            settings = self.settings
            self._records = BlobRecords(
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

    def scheduler(self) -> ContinuationScheduler | None:
        """The continuation scheduler (EventBridge Scheduler, or the one given), or None when
        none is configured."""
        return self._backends.scheduler()

    # -- entry points ------------------------------------------------------------------------

    def handler(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        """The Lambda entry point for an SQS event source with ReportBatchItemFailures."""
        return self._ready_worker().handle_batch(event, context)

    def _ready_worker(self) -> Worker:
        """The worker of this app's configuration, made on first use."""
        if self._worker is None:
            self._worker = Worker(
                self.registry,
                self.records,
                self.continuations,
                self.settings,
                child_client=self.client,
                meter=self.meter,
                observers=self.observers,
                scheduler=self.scheduler(),
            )
        return self._worker

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
        from continuum._worker.dead_letter import DeadLetters  # only the dead-letter Lambda

        return DeadLetters(self.records, self.continuations).handle_batch(event, context)

    def callback_link_handler(
        self, event: dict[str, Any], context: LambdaContext
    ) -> dict[str, Any]:
        """The Lambda entry point of the callback link function URL (payload format 2.0): a
        GET shows a callback's request, a POST answers it (``docs/approval-links.md``)."""
        from continuum._waits.link_endpoint import LinkEndpoint, handle_function_url_event

        if self._links is None:
            self._links = LinkEndpoint.of(self)
        return handle_function_url_event(self._links, event)

    def client(self) -> Client:
        """A client to start tasks and read their status and results."""
        # Imported on first use (an import holds its module's lock, so thread safely): a
        # worker needs it only when a task starts or cancels a child.
        from continuum._ops.client import Client

        return Client(
            self.records, self.continuations, registry=self.registry, settings=self.settings
        )
