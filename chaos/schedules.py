"""Schedules under faults: long waits handed to EventBridge Scheduler, which misbehaves.

The workers' queue reaches ``TIMER_MAX_DELAY_S`` (2 s), so every wait longer than that (a nap, a
callback's timeout) is handed to a one-time schedule in the moto server's group
(``worker_scheduler``). moto never fires schedules; the harness does (:class:`Fires`, called
from its loop), and misbehaves as EventBridge Scheduler may:

- **create fails**: a worker's create raises (a throttle, or an error that is not transient)
  at ``CREATE_FAILURE_RATE``: the worker must fall back to the hop chain;
- **double fire**: a fire is sent twice;
- **late fire**: a fire is held back and sent up to ``LATE_S`` after its time;
- **stale fire**: the body of a schedule seen earlier (fired, or deleted by a wake) is sent
  again later, when its task has moved on.

The harness's invariants still hold (nothing stranded, no step run twice, no storm); the
figures say how often each happened.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3

from chaos.faults import EventLog
from chaos.server import client_options
from continuum.backends.eventbridge import EventBridgeScheduler
from continuum.backends.memory.scheduler import ScheduleFirer
from continuum.backends.scheduler import (
    ContinuationScheduler,
    Schedule,
    SchedulerError,
    TransientSchedulerError,
)

GROUP = "chaos"
ROLE_ARN = "arn:aws:iam::123456789012:role/chaos-scheduler"
#: Per create, in a worker: the create raises (half of them transient).
CREATE_FAILURE_RATE = 0.15
#: Per fire, in the harness.
DOUBLE_RATE = 0.15
LATE_RATE = 0.15
STALE_RATE = 0.2
#: A late fire comes up to this long after its time; a stale one this long after it was seen.
LATE_S = 3.0
STALE_S = 4.0
#: How often the harness fires what is due (each pass lists the group and reads each schedule).
FIRE_EVERY_S = 0.25


def create_group(endpoint: str) -> None:
    """The schedule group of the run, on the moto server."""
    boto3.client("scheduler", **client_options(endpoint)).create_schedule_group(Name=GROUP)


class FailingCreates:
    """A worker's scheduler whose creates fail at a rate (logged as ``schedule_fault``)."""

    def __init__(self, inner: ContinuationScheduler, rng: random.Random, events: EventLog) -> None:
        self.inner = inner
        self.rng = rng
        self.events = events

    def schedule_at(self, *, name: str, at: datetime, message_body: str) -> None:
        if self.rng.random() < CREATE_FAILURE_RATE:
            transient = self.rng.random() < 0.5
            self.events.write("schedule_fault", kind="create_failed", schedule=name)
            error = TransientSchedulerError if transient else SchedulerError
            raise error("injected: the create failed", schedule=name)
        self.inner.schedule_at(name=name, at=at, message_body=message_body)
        self.events.write("schedule", kind="created", schedule=name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def worker_scheduler(
    endpoint: str, queue_arn: str, seed: int, run_dir: str
) -> ContinuationScheduler:
    """The scheduler of a worker process: the run's group on the moto server, failing creates."""
    client = boto3.client("scheduler", **client_options(endpoint))
    scheduler = EventBridgeScheduler(client, group=GROUP, target_arn=queue_arn, role_arn=ROLE_ARN)
    events = EventLog(os.path.join(run_dir, "events.jsonl"))
    return FailingCreates(scheduler, random.Random(seed ^ 0x5C4ED), events)


def _task_of(body: str) -> str:
    try:
        return str(json.loads(body).get("task_id"))
    except (ValueError, AttributeError):
        return ""


class _Seen:
    """The group's schedules as the firer lists them: which vanished since the last listing
    (fired, or deleted by a wake), with their bodies (for stale fires)."""

    def __init__(self, inner: EventBridgeScheduler) -> None:
        self.inner = inner
        self.bodies: dict[str, str] = {}
        self.vanished: list[str] = []  # bodies

    def schedules(self, *, name_prefix: str = "") -> list[Schedule]:
        found = self.inner.schedules(name_prefix=name_prefix)
        names = {s.name for s in found}
        self.vanished += [body for name, body in self.bodies.items() if name not in names]
        self.bodies = {s.name: s.message_body for s in found}
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass
class Fires:
    """Fires the run's schedules into the continuation queue, misbehaving at the seed's rates."""

    endpoint: str
    queue_url: str
    queue_arn: str
    rng: random.Random
    counts: dict[str, int] = field(
        default_factory=lambda: {"fired": 0, "double": 0, "late": 0, "stale": 0}
    )

    def __post_init__(self) -> None:
        options = client_options(self.endpoint)
        scheduler = EventBridgeScheduler(
            boto3.client("scheduler", **options),
            group=GROUP,
            target_arn=self.queue_arn,
            role_arn=ROLE_ARN,
        )
        self.seen = _Seen(scheduler)
        self.firer = ScheduleFirer(self.seen)
        self.sqs = boto3.client("sqs", **options)
        self.held: list[tuple[float, str, str]] = []  # (when, kind, body)
        self._next = 0.0

    def busy(self, finished: Callable[[str], bool]) -> bool:
        """Whether a held fire, or a schedule of a task not ``finished``, is still to come
        (the queue may look empty). A schedule left behind a finished task fires once, into
        the fence, and deletes itself: the run does not wait for it (``left_behind``)."""
        return bool(self.held) or not all(map(finished, self.left_behind().values()))

    def left_behind(self) -> dict[str, str]:
        """The group's schedules at the last listing: name -> the task its fire names."""
        return {name: _task_of(body) for name, body in self.seen.bodies.items()}

    def pump(self) -> None:
        """Fire what is due (some twice, some late), and send the held fires that are due."""
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + FIRE_EVERY_S
        for due in [h for h in self.held if h[0] <= now]:
            self.held.remove(due)
            self._send(due[2])
            self.counts[due[1]] += 1
        # this object is the firer's queue (``send``): some fires are held back
        for fire in self.firer.fire_due(self, now=datetime.now(UTC)):  # type: ignore[arg-type]
            self.counts["fired"] += 1
            if self.rng.random() < DOUBLE_RATE:
                self._send(fire.body)
                self.counts["double"] += 1
        for body in self.seen.vanished:  # fired, or deleted by a wake: it may come again
            if self.rng.random() < STALE_RATE:
                self.held.append((now + self.rng.uniform(0.5, STALE_S), "stale", body))
        self.seen.vanished.clear()

    def send(self, body: str, *, delay_s: int = 0) -> str:
        """The firer's queue: a fire is sent now, or held back (late)."""
        if self.rng.random() < LATE_RATE:
            self.held.append((time.monotonic() + self.rng.uniform(1.0, LATE_S), "late", body))
            return "held"
        return self._send(body)

    def _send(self, body: str) -> str:
        return str(self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=body)["MessageId"])

    def figures(self, events: list[dict[str, Any]]) -> list[tuple[str, Any, str]]:
        created = sum(1 for e in events if e["ev"] == "schedule" and e.get("kind") == "created")
        failed = sum(1 for e in events if e["ev"] == "schedule_fault")
        return [
            ("schedules created", created, "schedules"),
            ("schedule creates failed (fell back to hops)", failed, "creates"),
            ("schedule fires", self.counts["fired"], "fires"),
            ("schedule fires doubled", self.counts["double"], "fires"),
            ("schedule fires late", self.counts["late"], "fires"),
            ("schedule fires stale (after the task moved on)", self.counts["stale"], "fires"),
            ("schedule fires still held at the end", len(self.held), "fires"),
            (
                "schedules left at the end (each fires once, fenced)",
                len(self.left_behind()),
                "schedules",
            ),
            ("schedules left, by name", " ".join(sorted(self.left_behind())) or "none", ""),
        ]
