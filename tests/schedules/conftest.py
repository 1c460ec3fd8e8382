"""A small app with schedules, and fires handed to its worker as a scheduler would send them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from continuum import Continuum, Observer, TaskContext
from continuum.backends.scheduler import SCHEDULED_TIME, scheduled_time_text
from tests.conftest import sqs_event
from tests.support import LocalLambdaContext, LocalRuntime, utcnow

KEY = "schedule-test-key"


class Report(BaseModel):
    region: str
    pages: int = 0


class Outcomes(Observer):
    """The outcome of each message the worker handled."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def message_handled(self, event: Any) -> None:
        self.seen.append(event.outcome)


@dataclass
class Scheduled:
    """An app with a schedule per overlap, its runtime, and the outcomes of its messages."""

    app: Continuum
    runtime: LocalRuntime
    outcomes: Outcomes = field(default_factory=Outcomes)

    def fire(self, schedule: str, at: datetime, *, keys: tuple[str, ...] = (KEY,)) -> str:
        """Hand the worker the fire of ``schedule`` for ``at``; return its outcome."""
        return self.deliver(fire_body(schedule, at, keys=keys))

    def deliver(self, body: str) -> str:
        before = len(self.outcomes.seen)
        result = self.app.handler(sqs_event(body), LocalLambdaContext(30))
        assert result == {"batchItemFailures": []}, result
        (outcome,) = self.outcomes.seen[before:]
        return outcome

    def task_ids(self) -> list[str]:
        return self.runtime.observer.task_ids()

    def finish(self, task_id: str) -> None:
        self.runtime.drive(task_id)
        assert self.runtime.record(task_id).status.finished


def fire_body(schedule: str, at: datetime, *, keys: tuple[str, ...] = (KEY,)) -> str:
    """A schedule's signed body with its scheduled time written in, as EventBridge sends it."""
    from tests.support import schedule_fire_body

    return schedule_fire_body(schedule, keys=keys).replace(SCHEDULED_TIME, scheduled_time_text(at))


def build(backend: str) -> Scheduled:
    app = Continuum(signing_key=KEY)

    @app.task(state=Report)
    def report(ctx: TaskContext[Report]) -> int:
        ctx.state.pages += 1
        return ctx.state.pages

    app.schedule("nightly", report, cron="cron(0 2 * * ? *)", input={"region": "eu"})
    app.schedule("often", report, every=timedelta(minutes=5), input={"region": "us"},
                 overlap="allow")  # fmt: skip
    runtime = LocalRuntime(app, budget_s=30, backend=backend)  # type: ignore[arg-type]
    scheduled = Scheduled(app, runtime)
    app.observe(scheduled.outcomes)
    return scheduled


def hour_ago(hours: int = 1) -> datetime:
    return (utcnow() - timedelta(hours=hours)).replace(minute=0, second=0, microsecond=0)


__all__ = ["KEY", "UTC", "Scheduled", "build", "fire_body", "hour_ago"]
