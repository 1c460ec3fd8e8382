"""``app.schedule(...)``: a declaration is checked where it is written, naming the schedule."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import BaseModel

from continuum import ConfigurationError, Continuum, TaskContext


class Report(BaseModel):
    region: str
    days: int = 1


def make_app() -> Continuum:
    app = Continuum()

    @app.task(state=Report)
    def report(ctx: TaskContext[Report]) -> str:
        return ctx.state.region

    return app


def test_a_cron_schedule_is_declared_in_the_registry_with_its_input_as_json():
    app = make_app()
    declared = app.schedule(
        "nightly", app.tasks["report"], cron="cron(0 2 * * ? *)", input=Report(region="eu")
    )
    assert app.registry.schedules == {"nightly": declared}
    assert declared.expression == "cron(0 2 * * ? *)"
    assert declared.input == {"region": "eu", "days": 1}
    assert (declared.timezone, declared.overlap, declared.task_name) == ("UTC", "skip", "report")
    assert declared.schedule_name == "_schedule.nightly"


def test_every_becomes_a_rate_and_a_task_may_be_named():
    app = make_app()
    declared = app.schedule(
        "hourly", "report", every=timedelta(hours=2), input={"region": "us"}, overlap="allow"
    )
    assert declared.expression == "rate(2 hours)"
    assert declared.overlap == "allow"


def test_a_task_registered_after_its_schedule_is_checked_later():
    app = Continuum()
    declared = app.schedule("early", "later", every=timedelta(minutes=5), input={"x": 1})
    assert declared.input == {"x": 1}  # sync checks it against the task once it exists


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({}, "exactly one of cron=... and every=..."),
        ({"cron": "cron(0 9 * * ? *)", "every": timedelta(hours=1)}, "exactly one"),
        ({"cron": "0 9 * * *"}, "neither 'cron(...)'"),
        ({"cron": "cron(0 9 * * * *)"}, "exactly one of day-of-month and day-of-week"),
        ({"every": timedelta(seconds=30)}, "at least one minute"),
        ({"every": 60}, "every= is a timedelta"),
        ({"cron": "cron(0 9 * * ? *)", "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"cron": "cron(0 9 * * ? *)", "overlap": "queue"}, "overlap='queue'"),
        ({"cron": "cron(0 9 * * ? *)", "input": {"days": 3}}, "region"),
        ({"cron": "cron(0 9 * * ? *)", "input": None}, "does not validate against Report"),
    ],
)
def test_a_bad_declaration_raises_a_clear_error_naming_the_schedule(kwargs, says):
    app = make_app()
    kwargs.setdefault("input", {"region": "eu"})
    with pytest.raises(ConfigurationError) as raised:
        app.schedule("weekly", "report", **kwargs)
    assert "schedule 'weekly'" in str(raised.value)
    assert says in str(raised.value)
    assert app.registry.schedules == {}


@pytest.mark.parametrize("name", ["", "-lead", "has space", "x" * 55, "a/b"])
def test_a_name_that_cannot_start_a_task_id_is_refused(name):
    with pytest.raises(ConfigurationError, match="a schedule's name is 1 to 54"):
        make_app().schedule(name, "report", every=timedelta(hours=1), input={"region": "eu"})


def test_two_schedules_may_not_share_a_name_and_the_task_must_be_a_task_or_a_name():
    app = make_app()
    app.schedule("a", "report", every=timedelta(hours=1), input={"region": "eu"})
    with pytest.raises(ConfigurationError, match="two schedules are named 'a'"):
        app.schedule("a", "report", every=timedelta(hours=2), input={"region": "eu"})
    with pytest.raises(ConfigurationError, match="task= is a registered task or its name"):
        app.schedule("b", print, every=timedelta(hours=1))  # type: ignore[arg-type]
