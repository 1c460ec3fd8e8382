"""One scheduler to test, on either backend, with a clock the test moves and a queue to read.

``memory``: an InMemoryScheduler on a ManualClock, firing into an in-memory queue.
``moto``: an EventBridgeScheduler on moto (a schedule group, an SQS queue as target), fired by
a ScheduleFirer on the same ManualClock into that SQS queue (moto stores schedules, never fires).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
from moto import mock_aws

from continuum.backends.eventbridge import EventBridgeScheduler
from continuum.backends.memory.clock import ManualClock
from continuum.backends.memory.queue import InMemoryContinuationQueue
from continuum.backends.memory.scheduler import InMemoryScheduler, ScheduleFirer
from continuum.backends.queue import ContinuationQueue
from continuum.backends.scheduler import ContinuationScheduler, Fire
from continuum.backends.sqs import SQSContinuationQueue

REGION = "us-east-1"
GROUP = "continuum-test"
ROLE_ARN = "arn:aws:iam::123456789012:role/continuum-scheduler"


@dataclass
class SchedulerHarness:
    """A scheduler, the firing of it, the queue its fires go to, and the clock of both."""

    scheduler: ContinuationScheduler
    firer: ScheduleFirer
    queue: ContinuationQueue
    clock: ManualClock

    @property
    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.now, UTC)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def advance_to_minute(self, minute: int) -> None:
        """On to the next ``minute`` past an hour (the clock starts at the real now, so a
        test whose next minute must not cross a given one first moves clear of it)."""
        now = self.now
        self.advance(((minute - now.minute) % 60 or 60) * 60 - now.second - now.microsecond / 1e6)

    def fire(self) -> list[Fire]:
        """Fire what is due now."""
        return self.firer.fire_due(self.queue)

    def delivered(self) -> list[str]:
        """The bodies the queue holds, taken out of it."""
        bodies: list[str] = []
        while messages := self.queue.receive(max_messages=10):
            for message in messages:
                bodies.append(message.body)
                self.queue.delete(message.receipt_handle)
        return bodies


@dataclass
class MotoClients:
    """boto3's SQS and scheduler clients inside one moto mock, made once for many tests."""

    sqs: Any
    scheduler: Any


@contextlib.contextmanager
def moto_clients() -> Iterator[MotoClients]:
    """moto's SQS and EventBridge Scheduler, and a client of each (costly to make: share them)."""
    with mock_aws():
        yield MotoClients(
            boto3.client("sqs", region_name=REGION), boto3.client("scheduler", region_name=REGION)
        )


def new_clock() -> ManualClock:
    """A clock at the real now plus two seconds.

    moto dates a schedule by the real clock, and a rate's first time (its creation) must not
    lie after the harness's now.
    """
    return ManualClock(time.time() + 2)


def in_memory() -> SchedulerHarness:
    """An InMemoryScheduler on a ManualClock, firing into an in-memory queue."""
    clock = new_clock()
    memory = InMemoryScheduler(clock=clock)
    return SchedulerHarness(memory, memory.firer, InMemoryContinuationQueue(clock=clock), clock)


def on_moto(clients: MotoClients) -> SchedulerHarness:
    """An EventBridgeScheduler in a group of its own, targeting a queue of its own."""
    unique = uuid.uuid4().hex[:12]
    queue_url = clients.sqs.create_queue(QueueName=f"continuations-{unique}")["QueueUrl"]
    queue_arn = clients.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    group = f"{GROUP}-{unique}"
    clients.scheduler.create_schedule_group(Name=group)
    aws = EventBridgeScheduler(
        clients.scheduler, group=group, target_arn=queue_arn, role_arn=ROLE_ARN
    )
    clock = ManualClock(time.time())
    firer = ScheduleFirer(aws, clock=clock)  # started before moto dates any schedule
    clock.advance(2)  # as new_clock's
    return SchedulerHarness(aws, firer, SQSContinuationQueue(clients.sqs, queue_url), clock)
