"""Which continuation scheduler an app has: the one given, EventBridge from the stack's
environment, or none (long waits hop on delayed messages)."""

from __future__ import annotations

import boto3
import pytest

from continuum import Continuum
from continuum.backends.eventbridge import EventBridgeScheduler
from continuum.errors import ConfigurationError
from continuum.testing import InMemoryScheduler

STACK = {
    "CONTINUUM_SCHEDULE_GROUP": "continuum-stack",
    "CONTINUUM_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
    "CONTINUUM_QUEUE_ARN": "arn:aws:sqs:us-east-1:123456789012:continuations",
}


@pytest.fixture(autouse=True)
def no_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in STACK:
        monkeypatch.delenv(name, raising=False)


def test_no_scheduler_unless_configured() -> None:
    assert Continuum(bucket="b", queue_url="q").scheduler() is None


def test_the_scheduler_given_is_the_apps() -> None:
    scheduler = InMemoryScheduler()
    app = Continuum(bucket="b", queue_url="q", scheduler=scheduler)
    assert app.scheduler() is scheduler
    app.configure(bucket="other")
    assert app.scheduler() is scheduler


def test_the_stack_environment_makes_an_eventbridge_scheduler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in STACK.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("scheduler", region_name="us-east-1")
    app = Continuum(bucket="b", queue_url="q", scheduler_client=client)
    scheduler = app.scheduler()
    assert isinstance(scheduler, EventBridgeScheduler)


def test_a_partial_environment_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTINUUM_SCHEDULE_GROUP", "continuum-stack")
    with pytest.raises(ConfigurationError, match="CONTINUUM_SCHEDULER_ROLE_ARN") as raised:
        Continuum(bucket="b", queue_url="q").scheduler()
    assert "CONTINUUM_QUEUE_ARN" in str(raised.value)
