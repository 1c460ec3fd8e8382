"""``sync_schedules``: the group's recurring schedules become what the app declares, on the
in-memory scheduler and on EventBridge Scheduler (moto), and their fires start runs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from freezegun import freeze_time

from continuum import ConfigurationError, sync_schedules
from continuum.backends.scheduler import ScheduleState, wait_schedule_name
from tests.backends.scheduler_harness import MotoClients, in_memory, moto_clients, on_moto
from tests.schedules.conftest import KEY, build, fire_body

PREFIX = "_schedule."


@pytest.fixture(scope="module")
def clients() -> Iterator[MotoClients]:
    with moto_clients() as made:
        yield made


@pytest.fixture(params=["memory", "moto"])
def h(request: pytest.FixtureRequest):
    """A scheduler to sync into: in memory, or on moto."""
    if request.param == "memory":
        return in_memory()
    return on_moto(request.getfixturevalue("clients"))


@pytest.fixture
def s():
    return build("memory")


def names(h) -> list[str]:
    return [schedule.name for schedule in h.scheduler.schedules()]


def test_a_sync_creates_the_declared_schedules_and_a_second_changes_nothing(h, s):
    report = sync_schedules(s.app, h.scheduler)
    assert (report.created, report.changed) == (["nightly", "often"], True)
    nightly = h.scheduler.get(PREFIX + "nightly")
    assert nightly is not None
    assert (nightly.expression, nightly.timezone, nightly.state) == (
        "cron(0 2 * * ? *)",
        "UTC",
        ScheduleState.ENABLED,
    )
    assert nightly.message_body == fire_body("nightly", h.now).replace(
        f'"at":"{h.now:%Y-%m-%dT%H:%M:%SZ}"', '"at":"<aws.scheduler.scheduled-time>"'
    )
    again = sync_schedules(s.app, h.scheduler)
    assert (again.unchanged, again.changed) == (["nightly", "often"], False)


def test_a_sync_updates_what_changed_and_deletes_what_is_no_longer_declared(h, s):
    sync_schedules(s.app, h.scheduler)
    wait = wait_schedule_name(task_id="order-1", generation=2, wait="sleep:ship")
    h.scheduler.schedule_at(name=wait, at=h.now + timedelta(days=3), message_body='{"w":1}')
    h.scheduler.put_recurring(name="someone-elses", expression="rate(1 day)", message_body="x")
    later = build("memory")
    later.app.registry.schedules.pop("often")
    later.app.registry.schedules.pop("nightly")
    later.app.schedule("nightly", "report", cron="cron(0 3 * * ? *)", input={"region": "eu"},
                       timezone="Europe/Paris")  # fmt: skip
    report = sync_schedules(later.app, h.scheduler)
    assert (report.updated, report.deleted, report.created) == (["nightly"], ["often"], [])
    assert sorted(names(h)) == sorted([PREFIX + "nightly", wait, "someone-elses"])
    nightly = h.scheduler.get(PREFIX + "nightly")
    assert nightly is not None
    assert (nightly.expression, nightly.timezone) == ("cron(0 3 * * ? *)", "Europe/Paris")
    assert not sync_schedules(later.app, h.scheduler).changed


def test_a_schedule_moved_by_a_sync_fires_from_the_move_on_never_its_past(h, s):
    s.app.registry.schedules.pop("often")
    s.app.registry.schedules.pop("nightly")
    s.app.schedule("hourly", "report", cron="cron(0 * * * ? *)", input={"region": "eu"})
    sync_schedules(s.app, h.scheduler)
    h.advance(10 * 3600)
    assert len(h.fire()) == 10
    h.advance_to_minute(5)  # clear of :30, whatever the real time the clock began at
    h.fire()
    moved = build("memory")  # the app after a `continuum dev` reload: on the half hour
    moved.app.registry.schedules.pop("often")
    moved.app.registry.schedules.pop("nightly")
    moved.app.schedule("hourly", "report", cron="cron(30 * * * ? *)", input={"region": "eu"})
    assert sync_schedules(moved.app, h.scheduler).updated == ["hourly"]
    h.advance(60)
    assert h.fire() == []
    h.advance(3600)
    assert [f.scheduled_time.minute for f in h.fire()] == [30]


def test_a_new_signing_key_signs_the_bodies_again(h, s):
    sync_schedules(s.app, h.scheduler)
    s.app.update_settings(signing_keys=("new-key", KEY))
    assert sync_schedules(s.app, h.scheduler).updated == ["nightly", "often"]


def test_a_paused_schedule_stays_paused_across_a_sync_even_when_its_declaration_changed(h, s):
    sync_schedules(s.app, h.scheduler)
    h.scheduler.pause(PREFIX + "nightly")
    assert sync_schedules(s.app, h.scheduler).paused == ["nightly"]
    s.app.registry.schedules.pop("nightly")
    s.app.schedule("nightly", "report", cron="cron(30 2 * * ? *)", input={"region": "eu"})
    report = sync_schedules(s.app, h.scheduler)
    assert (report.updated, report.paused) == (["nightly"], ["nightly"])
    nightly = h.scheduler.get(PREFIX + "nightly")
    assert nightly is not None
    assert (nightly.expression, nightly.state) == ("cron(30 2 * * ? *)", ScheduleState.DISABLED)


def test_a_schedule_of_an_unknown_task_or_a_bad_input_fails_the_sync_before_any_change(h, s):
    s.app.schedule("orphan", "missing", every=timedelta(hours=1))
    with pytest.raises(ConfigurationError, match="schedule 'orphan': unknown task 'missing'"):
        sync_schedules(s.app, h.scheduler)
    s.app.registry.schedules.pop("orphan")
    s.app.schedule("early", "later", every=timedelta(hours=1), input={"x": 1})
    s.app.registry.schedules.pop("early")
    s.app.registry.add_schedule(
        s.app.registry.schedules["nightly"].__class__(
            name="bad", task_name="report", expression="rate(1 hour)", input={"pages": "x"},
            timezone="UTC", overlap="skip",
        )
    )  # fmt: skip
    with pytest.raises(ConfigurationError, match="schedule 'bad': its input for task 'report'"):
        sync_schedules(s.app, h.scheduler)
    assert names(h) == []


def test_each_fire_of_a_synced_schedule_starts_one_run(h, s):
    sync_schedules(s.app, h.scheduler)
    h.advance(10 * 60)  # "often" fires every five minutes from its creation
    fired = h.fire()  # "nightly" too, where the ten minutes pass 02:00
    bodies = [f.body for f in fired if f.name == PREFIX + "often"]
    assert len(bodies) == 3  # at its creation, then five and ten minutes on
    assert h.delivered() == [f.body for f in fired]
    with freeze_time(h.now):  # the worker's clock is where the scheduler's is
        outcomes = [s.deliver(body) for body in bodies + bodies[:1]]
    assert outcomes == ["schedule-started"] * 3 + ["duplicate"]
    assert len(s.task_ids()) == 3
