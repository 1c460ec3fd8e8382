"""A worker outside Lambda: long-poll SQS and run each continuation with an emulated budget.

For ECS, EC2 or a laptop (``continuum worker MODULE:APP --queue-url URL``). It plays the part
of Lambda's SQS event source and of Lambda itself; the protocol inside ``app.handler`` (fence,
claim, turns, suspend) is exactly the deployed one. Each of a source's slots (a thread) loops:

1. Receive one message, long-polling ``poll_wait_s``.
2. If a stop was asked for, make the message visible again at once, and end.
3. Call the handler with the SQS event Lambda would build and an :class:`InvocationContext`
   whose deadline is the source's budget: one message, one emulated invocation.
4. Delete the message unless the handler reported it failed; a failed one comes back after
   the visibility timeout that its claim set.

On SIGTERM or SIGINT (:mod:`continuum._local.shutdown`) no slot receives again, and every running
invocation's remaining time drops to the grace period less a margin, so each task suspends at
its next step boundary. :meth:`QueueWorker.run` returns 0 once they all have, or 1 when the
grace period ended first (their records fence them, and their messages come back). A worker
killed outright (SIGKILL, a lost host) is a killed Lambda: its messages reappear just after
their invocations' deadlines and the next worker resumes each task from its record.

Preemptible steps run to their end here: the SIGALRM that preempts a step reaches only the main
thread, and the slots are threads. No one kills an invocation at its deadline either: a step
that overruns it finishes late, and if another worker took the task meanwhile, the late
worker's save is refused and it stops (412).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from continuum._define.recurring import run_task_id
from continuum._local.runtime import event_record
from continuum._local.shutdown import InvocationContext, Shutdown
from continuum._local.worker_defaults import DEFAULT_GRACE_S, POLL_WAIT_S
from continuum._record.continuation import is_schedule_fire, peek_task_id
from continuum._worker.sqs_batch import LambdaContext, logger
from continuum.backends.queue import ContinuationQueue, QueueError, QueueMessage

#: How often the supervising main thread looks at the slots and the parent process.
TICK_S = 0.05
#: After a failed receive, a slot waits this long, doubling up to the most, before the next.
RECEIVE_BACKOFF_S = 0.5
RECEIVE_BACKOFF_MAX_S = 20.0
#: The dead-letter function's budget in the deployed stack (its Timeout).
DEAD_LETTER_BUDGET_S = 60.0
#: SQS error codes after which receiving again cannot help: the worker stops.
FATAL_QUEUE_ERRORS = frozenset(
    {
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "AccessDenied",
        "AccessDeniedException",
        "InvalidAddress",
    }
)

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


@dataclass(frozen=True)
class QueueSource:
    """A queue, the handler its messages go to, and the budget of each invocation.

    Attributes:
        name: what the queue holds, for logs ("continuations", "dead letters").
        queue: the queue (``continuum.backends.sqs.SQSContinuationQueue`` on SQS).
        queue_arn: its ARN, as the SQS event names it.
        handler: ``app.handler`` or ``app.dead_letter_handler``.
        budget_s: the deadline of each invocation, in seconds.
        slots: how many messages of this queue run at once.
    """

    name: str
    queue: ContinuationQueue
    queue_arn: str
    handler: Handler
    budget_s: float
    slots: int = 1


@dataclass(frozen=True)
class Processed:
    """What one emulated invocation did: its source, task, outcome and duration."""

    source: str
    task_id: str | None
    failed: bool
    seconds: float
    #: the recurring schedule whose fire it was (``task_id``: the run it starts), or None.
    schedule: str | None = None


def peek_message(body: str) -> tuple[str | None, str | None]:
    """The schedule a message is a fire of (None: a continuation) and the task it names: a
    fire names the run it starts (None when its body is not one a fire sends)."""
    if not is_schedule_fire(body):
        return None, peek_task_id(body)
    try:
        fire = json.loads(body)
        scheduled = datetime.strptime(fire["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        return str(fire["schedule"]), run_task_id(str(fire["schedule"]), scheduled)
    except (ValueError, TypeError, KeyError):
        return None, None


class QueueWorker:
    """Runs the messages of one or more sources until stopped.

    Args:
        sources: the queues to poll, each with its handler, budget and number of slots.
        shutdown: the stop to obey (``continuum._local.shutdown.stop_on_signals`` sets it).
        poll_wait_s: the long poll of each receive, 0 to 20 seconds.
        on_processed: called after each message, from the slot's thread.
        parent_pid: stop (with the grace period) when this process is no longer the parent.
        grace_s: the grace period of a stop this worker begins itself (a fatal queue error,
            the parent gone).

    Example:
        >>> source = QueueSource("continuations", queue, arn, app.handler, 900)  # doctest: +SKIP
        >>> with stop_on_signals(shutdown, grace_s=25):  # doctest: +SKIP
        ...     code = QueueWorker([source], shutdown=shutdown).run()
    """

    def __init__(
        self,
        sources: list[QueueSource],
        *,
        shutdown: Shutdown,
        poll_wait_s: int = POLL_WAIT_S,
        on_processed: Callable[[Processed], None] | None = None,
        parent_pid: int | None = None,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        self.sources = sources
        self.shutdown = shutdown
        self.poll_wait_s = poll_wait_s
        self.on_processed = on_processed
        self.parent_pid = parent_pid
        self.grace_s = grace_s
        #: Why the worker stopped by itself (a queue it cannot read), or None.
        self.error: str | None = None
        # One entry per slot, never added or removed while threads run: the task each runs.
        self._running: dict[tuple[str, int], str | None] = {
            (source.name, i): None for source in sources for i in range(source.slots)
        }

    def running(self) -> list[str]:
        """The ids of the tasks whose messages are being processed now."""
        return [task for task in list(self._running.values()) if task]

    def run(self) -> int:
        """Poll and process until a stop; return 0 if everything running suspended in time."""
        threads = [
            threading.Thread(
                target=self._slot, args=(source, i), name=f"{source.name}-{i}", daemon=True
            )
            for source in self.sources
            for i in range(source.slots)
        ]
        for thread in threads:
            thread.start()
        while not self.shutdown.requested:
            if self.parent_pid is not None and os.getppid() != self.parent_pid:
                self.shutdown.begin(grace_s=self.grace_s, reason="parent process exited")
            time.sleep(TICK_S)
        logger.info(
            f"stopping ({self.shutdown.reason}): suspending what runs",
            extra={"running": self.running(), "grace_s": round(self.shutdown.exit_left_s(), 1)},
        )
        while any(t.is_alive() for t in threads) and self.shutdown.exit_left_s() > 0:
            time.sleep(TICK_S)
        if left := self.running():
            logger.warning(
                "the grace period ended before these tasks suspended; their records fence "
                "them and their messages come back after their visibility timeout",
                extra={"running": left},
            )
            return 1
        return 1 if self.error else 0

    # -- one slot ----------------------------------------------------------------------------

    def _slot(self, source: QueueSource, index: int) -> None:
        backoff_s = RECEIVE_BACKOFF_S
        while not self.shutdown.requested:
            try:
                messages = source.queue.receive(max_messages=1, wait_s=self.poll_wait_s)
            except QueueError as exc:
                if _error_code(exc) in FATAL_QUEUE_ERRORS:
                    self.error = f"cannot receive from the {source.name} queue: {exc}"
                    logger.error(self.error)
                    self.shutdown.begin(grace_s=self.grace_s, reason="queue error")
                    return
                logger.warning(
                    f"receive failed; again in {backoff_s:g}s", extra={"error": str(exc)}
                )
                self._sleep(backoff_s)
                backoff_s = min(backoff_s * 2, RECEIVE_BACKOFF_MAX_S)
                continue
            backoff_s = RECEIVE_BACKOFF_S
            for message in messages:
                if self.shutdown.requested:
                    self._release(source, message)
                else:
                    self._invoke(source, index, message)

    def _invoke(self, source: QueueSource, index: int, message: QueueMessage) -> None:
        started = time.monotonic()
        schedule, task_id = peek_message(message.body)
        self._running[source.name, index] = task_id or message.message_id
        failed = True
        try:
            event = {"Records": [event_record(message, source.queue_arn)]}
            response = source.handler(event, InvocationContext(source.budget_s, self.shutdown))
            reported = {i.get("itemIdentifier") for i in response.get("batchItemFailures", [])}
            failed = message.message_id in reported
            if not failed:
                source.queue.delete(message.receipt_handle)
        except QueueError as exc:
            # Processed, but the acknowledgement failed: the record fences the redelivery.
            logger.warning("could not delete a processed message", extra={"error": str(exc)})
        except Exception:
            # Not a message's failure (the handler reports those) but the handler's own: the
            # message comes back after its visibility timeout, as from a crashed Lambda.
            logger.exception("the handler raised", extra={"message_id": message.message_id})
        finally:
            self._running[source.name, index] = None
        if self.on_processed is not None:
            seconds = time.monotonic() - started
            self.on_processed(Processed(source.name, task_id, failed, seconds, schedule))

    def _release(self, source: QueueSource, message: QueueMessage) -> None:
        """Give back a message received after the stop: visible again at once."""
        try:
            source.queue.set_visibility(message.receipt_handle, 0)
        except QueueError as exc:
            logger.warning("could not release a message", extra={"error": str(exc)})

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.shutdown.requested and time.monotonic() < end:
            time.sleep(TICK_S)


def _error_code(exc: BaseException) -> str | None:
    """The AWS error code behind a QueueError, if there is one."""
    cause = exc.__cause__
    response = getattr(cause, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", "")) or None
    return None


def queue_arn_and_visibility(sqs_client: Any, queue_url: str) -> tuple[str, int]:
    """A queue's ARN and visibility timeout (seconds); raises botocore's error if it is missing."""
    attributes = sqs_client.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["QueueArn", "VisibilityTimeout"]
    )["Attributes"]
    return str(attributes["QueueArn"]), int(attributes.get("VisibilityTimeout", 30))
