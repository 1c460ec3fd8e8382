"""A rollback during the run: a worker of the older release takes messages for a while.

The fleet runs ``sleeper`` at version 2 (``chaos.flows``). For the first ``ROLLBACK_S``
seconds of the run an older worker in the harness, whose ``sleeper`` is version 1, takes the
messages of sleeper tasks it receives, as a worker of a rolled-back release would: their
starts, continuations, wakes and the early timers of their sleeps. It must leave each record
untouched (no claim, no hop) and send the message again; once the rollback ends, the fleet
(rolled forward) resumes the task. The older ``sleeper`` fails its task if it ever runs, so
the sleeper's checked ending catches a worker that ran a newer record; every record write the
older worker makes is counted as a violation (it must make none).

Messages of other tasks that it receives go straight back to the queue, as a fresh copy (the
original deleted): the older release differs only in ``sleeper``, so a real one would have run
them as the fleet does. Bouncing the original instead (visibility 0) spent one of its receives
each time; polled every 50 ms, the older worker drove messages of a backlog to the dead-letter
queue before any fleet worker saw them.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import boto3
from pydantic import BaseModel

from chaos.base import TIMER_MAX_DELAY_S
from chaos.base import app as newer_app
from chaos.checks import Report
from chaos.server import Resources, as_queue_message
from continuum import Continuum, TaskContext
from continuum._local.runtime import LocalLambdaContext, event_record
from continuum._turn.tasks import Task
from continuum.backends.sqs import SQSContinuationQueue

#: How long the rollback lasts (seconds from the start of the run).
ROLLBACK_S = 20.0
#: The task whose older version the older worker runs.
ROLLED = "sleeper"
OLDER_WROTE = "records an older worker wrote"


class _Any(BaseModel):
    model_config = {"extra": "allow"}


def _older_sleeper(ctx: TaskContext[Any]) -> Any:
    raise AssertionError("version-1 code ran a record that version 2 wrote")


def older_app() -> Continuum:
    """The chaos app as the older release had it: ``sleeper`` at version 1."""
    settings = newer_app.settings
    older = Continuum(
        default_step_s=settings.default_step_s,
        persist_every_s=settings.persist_every_s,
        visibility_margin_s=settings.visibility_margin_s,
        inline_limit_bytes=settings.inline_limit_bytes,
        safety_margin_s=settings.safety_margin_s,
        inbox_poll_s=settings.inbox_poll_s,
        max_state_bytes=settings.max_state_bytes,
    )
    for name, task in newer_app.registry.tasks.items():
        if name != ROLLED:
            older.registry.tasks[name] = task
    older.registry.tasks[ROLLED] = Task(_older_sleeper, ROLLED, _Any, version=1)
    return older


class OlderWorker:
    """The older release's worker, for the first ``ROLLBACK_S`` seconds of the run."""

    def __init__(self, resources: Resources, options: dict[str, Any]) -> None:
        self.sqs = boto3.client("sqs", **options)
        s3 = boto3.client("s3", **options)
        self.writes: list[str] = []
        s3.meta.events.register("before-call.s3.PutObject", self._note_write)
        self.app = older_app()
        queue = SQSContinuationQueue(boto3.client("sqs", **options), resources.queue_url)
        queue.max_delay_s = TIMER_MAX_DELAY_S  # as the fleet's: a message left comes back soon
        self.app.configure(bucket=resources.bucket, s3_client=s3, queue=queue)
        self.queue_url = resources.queue_url
        self.queue_arn = resources.queue_arn
        self.outcomes: Counter[str] = Counter()

    def _note_write(self, params: dict[str, Any], **_: Any) -> None:
        key = str(params.get("Key", ""))
        if key.endswith("/record.json"):
            self.writes.append(key)

    def pump(self) -> None:
        """Take one batch (while the rollback lasts): a sleeper's messages are handled by the
        older code; the others go back to the queue at once."""
        response = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=5, WaitTimeSeconds=0
        )
        for message in response.get("Messages", []):
            task_id = str(json.loads(message["Body"]).get("task_id", ""))
            receipt = message["ReceiptHandle"]
            if not task_id.startswith(f"{ROLLED}-"):
                self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=message["Body"])
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt)
                self.outcomes["handed on"] += 1
                continue
            event = {"Records": [event_record(as_queue_message(message), self.queue_arn)]}
            result = self.app.handler(event, LocalLambdaContext(5.0))
            if result.get("batchItemFailures"):
                self.outcomes["retried"] += 1
                continue
            self.outcomes["handled"] += 1
            self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt)

    def check(self, report: Report) -> None:
        report.add("older worker messages handled", self.outcomes["handled"], "messages")
        report.add("older worker messages handed on", self.outcomes["handed on"], "messages")
        for key in self.writes:
            report.violate(OLDER_WROTE, key)
        report.add(OLDER_WROTE, len(self.writes), "records")
