"""The Lambda edge: an SQS batch event in, one delivery per message, partial failures out.

Powertools' BatchProcessor runs each message's handler; a handler that raises is reported in
``batchItemFailures`` (SQS retries that message alone) and never fails its neighbours. The
outcome of each message is logged and, with ``POWERTOOLS_METRICS_NAMESPACE`` set, counted as a
CloudWatch metric (EMF log lines).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, cast

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from continuum._define.observers import MessageHandled, Observer
from continuum.backends.queue import ContinuationQueue, QueueError
from continuum.errors import ContinuumError

logger = Logger(service="continuum")


class LambdaContext(Protocol):
    """What continuum reads of Lambda's context object (the local runtime emulates it)."""

    @property
    def aws_request_id(self) -> str: ...

    def get_remaining_time_in_millis(self) -> int: ...


class Delivery(NamedTuple):
    """One SQS message as the worker sees it."""

    body: str
    message_id: str
    receipt_handle: str | None = None
    receive_count: int = 1

    @classmethod
    def from_sqs(cls, message: SQSRecord) -> Delivery:
        return cls(
            body=message.body,
            message_id=message.message_id,
            receipt_handle=message.receipt_handle,
            receive_count=int(message.attributes.approximate_receive_count or 1),
        )


def process_sqs_batch(
    event: dict[str, Any], context: LambdaContext | None, handle: Callable[[Delivery], str]
) -> dict[str, Any]:
    """Run ``handle`` on each message of an SQS batch; report the ones that raised."""
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def record_handler(record: SQSRecord) -> str:  # Powertools passes it as ``record=``
        return handle(Delivery.from_sqs(record))

    response = process_partial_response(
        event=event,
        record_handler=record_handler,
        processor=processor,
        context=cast(Any, context),
    )
    return dict(response)


class OutcomeMetrics(Observer):
    """Counts what happened to each message, and tasks' ends and durations (Powertools, EMF).

    Off unless ``POWERTOOLS_METRICS_NAMESPACE`` is set (the SAM template sets it), so local
    runs and tests print no metric lines. Metrics: one count per message outcome
    (``suspended``, ``succeeded``, ``failed``, ``stale``, ``fenced``, ...; dimension
    ``service``); ``TaskSucceeded`` and ``TaskFailed`` (dimensions ``service`` and ``task``,
    and ``TaskFailed`` also by ``service`` alone, which the alarm reads); and
    ``InvocationDuration`` in milliseconds per message (``service`` and ``task``).
    """

    def __init__(self) -> None:
        self.namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE")
        self._metrics: Any = None
        if self.namespace:
            from aws_lambda_powertools import Metrics

            self._metrics = Metrics(service="continuum")

    def message_handled(self, event: MessageHandled) -> None:
        self.count(event.outcome, task=event.task_name, duration_ms=event.duration_ms)

    def batch_done(self, event: None) -> None:
        self.flush()

    def count(self, outcome: str, *, task: str | None = None, duration_ms: float = 0.0) -> None:
        if self._metrics is None:
            return
        from aws_lambda_powertools.metrics import MetricUnit, single_metric

        self._metrics.add_metric(name=outcome, unit=MetricUnit.Count, value=1)
        if outcome == "failed":
            self._metrics.add_metric(name="TaskFailed", unit=MetricUnit.Count, value=1)
        if task is None:
            return
        per_task = {"service": "continuum", "task": task}
        ends = {"succeeded": "TaskSucceeded", "failed": "TaskFailed"}
        metrics = [("InvocationDuration", MetricUnit.Milliseconds, duration_ms)]
        if outcome in ends:
            metrics.append((ends[outcome], MetricUnit.Count, 1.0))
        for name, unit, value in metrics:
            with single_metric(
                name=name,
                unit=unit,
                value=value,
                namespace=self.namespace,
                default_dimensions=per_task,
            ):
                pass

    def flush(self) -> None:
        if self._metrics is not None:
            self._metrics.flush_metrics(raise_on_empty_metrics=False)


def memory_mb(context: LambdaContext) -> int:
    """The function's memory, as Lambda's context says it (0 when it does not)."""
    try:
        return int(getattr(context, "memory_limit_in_mb", 0) or 0)
    except (TypeError, ValueError):
        return 0


def remaining_s(context: LambdaContext | None) -> float:
    """Seconds left in this invocation, from the Lambda context."""
    if context is None:
        raise ContinuumError("the handler needs the Lambda context to know its deadline")
    return float(context.get_remaining_time_in_millis()) / 1000.0


def shorten_visibility(
    queue: ContinuationQueue, delivery: Delivery, left_s: float, margin_s: int | None
) -> None:
    """If this invocation dies, its message should come back just after its deadline
    (``left_s`` + ``margin_s``), not after the queue's visibility timeout (six times the
    function timeout). None: keep the queue's."""
    if delivery.receipt_handle is None or margin_s is None:
        return
    try:
        queue.set_visibility(delivery.receipt_handle, math.ceil(left_s) + margin_s)
    except QueueError as exc:
        # Only recovery speed depends on it: the record still fences every delivery.
        logger.warning("could not shorten the message's visibility", extra={"error": str(exc)})


def clear_log_keys() -> None:
    """Forget the last message's log keys, in this thread only (workers may run threads)."""
    clear = getattr(logger, "thread_safe_clear_keys", None)
    if clear is not None:
        clear()
    else:  # pragma: no cover - an older Powertools
        logger.remove_keys(["correlation_id", "task_id", "generation"])


def log_keys(**keys: Any) -> None:
    append = getattr(logger, "thread_safe_append_keys", None) or logger.append_keys
    append(**keys)
