"""The scheduler seam's contract, on the in-memory scheduler and on EventBridge Scheduler (moto).

The same tests on both prove the in-memory twin faithful; those that need boto3 itself are
marked moto_only; the pure functions (names, expressions, times) are tested once.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import boto3
import pytest
from botocore.stub import Stubber
from moto.scheduler import models as moto_scheduler

from continuum.backends.eventbridge import EventBridgeScheduler
from continuum.backends.memory.clock import ManualClock
from continuum.backends.memory.queue import InMemoryContinuationQueue
from continuum.backends.memory.scheduler import InMemoryScheduler, ScheduleFirer
from continuum.backends.queue import QueueError
from continuum.backends.recurrence import (
    cron_times,
    parse_cron,
    rate_expression,
    recurring_expression,
)
from continuum.backends.scheduler import (
    SCHEDULED_TIME,
    InvalidSchedule,
    ScheduleConflict,
    ScheduleNotFound,
    SchedulerError,
    ScheduleState,
    TransientSchedulerError,
    parse_scheduled_time,
    wait_schedule_name,
)
from tests.backends.scheduler_harness import (
    GROUP,
    REGION,
    ROLE_ARN,
    MotoClients,
    SchedulerHarness,
    in_memory,
    moto_clients,
    on_moto,
)

BODY = '{"task_id": "t-1", "generation": 3}'
STARTS = f'{{"schedule": "nightly", "scheduled_time": "{SCHEDULED_TIME}"}}'


@pytest.fixture(scope="module")
def clients() -> Iterator[MotoClients]:
    with moto_clients() as made:
        yield made


@pytest.fixture
def h(backend: str, request: pytest.FixtureRequest) -> SchedulerHarness:
    """The scheduler under test: in memory, or on moto (in a group and queue of its own)."""
    if backend == "memory":
        return in_memory()
    harness = on_moto(request.getfixturevalue("clients"))
    # moto dates a schedule's creation and changes by the real clock: by the harness's here, as
    # AWS and `continuum dev` date them by the one clock their firing follows.
    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setattr(moto_scheduler, "unix_time", lambda *_: harness.clock.now)
    return harness


# -- one-time schedules ----------------------------------------------------------------------------


def test_a_one_time_schedule_sends_its_body_to_the_queue_at_its_time_and_is_then_gone(h):
    at = (h.now + timedelta(hours=2)).replace(microsecond=0)
    h.scheduler.schedule_at(name="w1", at=at, message_body=BODY)
    h.clock.now = at.timestamp() - 1
    assert h.fire() == []
    assert h.delivered() == []
    h.advance(1)
    fires = h.fire()
    assert [(f.name, f.body) for f in fires] == [("w1", BODY)]
    assert h.delivered() == [BODY]
    assert h.scheduler.get("w1") is None
    h.advance(3600)
    assert h.fire() == []


def test_a_one_time_schedule_is_stored_as_an_at_expression_in_utc_whole_seconds(h):
    paris = datetime(2031, 6, 1, 10, 30, 5, 250_000, tzinfo=ZoneInfo("Europe/Paris"))
    h.scheduler.schedule_at(name="w1", at=paris, message_body=BODY)
    schedule = h.scheduler.get("w1")
    assert schedule is not None
    # A fraction of a second rounds up: a wait's schedule never ends it early.
    assert schedule.expression == "at(2031-06-01T08:30:06)"
    assert schedule.at == datetime(2031, 6, 1, 8, 30, 6, tzinfo=UTC)
    assert schedule.one_time
    assert schedule.state is ScheduleState.ENABLED
    assert schedule.message_body == BODY


def test_creating_the_same_one_time_schedule_again_is_not_an_error_and_it_fires_once(h):
    at = h.now + timedelta(hours=1)
    h.scheduler.schedule_at(name="w1", at=at, message_body=BODY)
    h.scheduler.schedule_at(name="w1", at=at, message_body=BODY)  # a retry after a lost answer
    assert [s.name for s in h.scheduler.schedules()] == ["w1"]
    h.advance(3601)
    h.fire()
    assert h.delivered() == [BODY]


@pytest.mark.parametrize(
    ("at_later_s", "body"), [(60, BODY), (0, '{"task_id": "t-2"}')], ids=["time", "body"]
)
def test_a_different_schedule_under_a_taken_name_is_refused_and_the_first_is_kept(
    h, at_later_s, body
):
    at = (h.now + timedelta(hours=1)).replace(microsecond=0)
    h.scheduler.schedule_at(name="w1", at=at, message_body=BODY)
    with pytest.raises(ScheduleConflict, match="'w1'"):
        h.scheduler.schedule_at(name="w1", at=at + timedelta(seconds=at_later_s), message_body=body)
    kept = h.scheduler.get("w1")
    assert kept is not None
    assert (kept.at, kept.message_body) == (at, BODY)


def test_a_one_time_schedule_under_a_recurring_schedules_name_is_refused(h):
    h.scheduler.put_recurring(name="nightly", expression="rate(1 day)", message_body=STARTS)
    with pytest.raises(ScheduleConflict, match="'nightly'"):
        h.scheduler.schedule_at(name="nightly", at=h.now + timedelta(hours=1), message_body=BODY)
    h.scheduler.schedule_at(name="w1", at=h.now + timedelta(hours=1), message_body=BODY)
    with pytest.raises(ScheduleConflict, match="'w1'"):
        h.scheduler.put_recurring(name="w1", expression="rate(1 day)", message_body=STARTS)
    assert h.scheduler.get("w1").one_time


def test_a_naive_time_is_refused_naming_the_schedule(h):
    with pytest.raises(InvalidSchedule, match=r"'w1'.*no time zone"):
        h.scheduler.schedule_at(name="w1", at=datetime(2031, 1, 1, 9, 0), message_body=BODY)
    assert h.scheduler.schedules() == []


@pytest.mark.parametrize("name", ["", "a" * 65, "has space", "slash/ed", "colon:ed"])
def test_a_name_eventbridge_refuses_is_refused_before_any_call(h, name):
    with pytest.raises(InvalidSchedule, match="1 to 64 letters"):
        h.scheduler.schedule_at(name=name, at=h.now + timedelta(hours=1), message_body=BODY)
    assert h.scheduler.schedules() == []


def test_an_empty_body_is_refused_naming_the_schedule(h):
    with pytest.raises(InvalidSchedule, match=r"'w1'.*empty"):
        h.scheduler.schedule_at(name="w1", at=h.now + timedelta(hours=1), message_body="")


# -- delete ----------------------------------------------------------------------------------------


def test_deleting_a_schedule_that_is_not_there_is_fine(h):
    h.scheduler.delete("never-made")
    h.scheduler.schedule_at(name="w1", at=h.now + timedelta(minutes=5), message_body=BODY)
    h.scheduler.delete("w1")
    h.scheduler.delete("w1")
    assert h.scheduler.get("w1") is None


def test_a_deleted_schedule_never_fires(h):
    h.scheduler.schedule_at(name="w1", at=h.now + timedelta(minutes=5), message_body=BODY)
    h.scheduler.put_recurring(name="nightly", expression="rate(1 hour)", message_body=STARTS)
    h.scheduler.delete("w1")
    h.scheduler.delete("nightly")
    h.advance(3 * 3600)
    assert h.fire() == []
    assert h.delivered() == []


# -- listing, pause and resume ---------------------------------------------------------------------


def test_the_groups_schedules_are_listed_by_name_with_expression_body_timezone_and_state(h):
    h.scheduler.put_recurring(
        name="nightly", expression="cron(0 2 * * ? *)", message_body=STARTS, timezone="Asia/Tokyo"
    )
    h.scheduler.put_recurring(name="hourly", expression="rate(1 hour)", message_body=STARTS)
    h.scheduler.schedule_at(name="w1", at=h.now + timedelta(hours=1), message_body=BODY)
    h.scheduler.pause("hourly")
    listed = {
        s.name: (s.expression, s.message_body, s.timezone, s.state, s.one_time)
        for s in h.scheduler.schedules()
    }
    assert [s.name for s in h.scheduler.schedules()] == ["hourly", "nightly", "w1"]
    assert listed["nightly"] == (
        "cron(0 2 * * ? *)",
        STARTS,
        "Asia/Tokyo",
        ScheduleState.ENABLED,
        False,
    )
    assert listed["hourly"] == ("rate(1 hour)", STARTS, "UTC", ScheduleState.DISABLED, False)
    assert listed["w1"][1:] == (BODY, "UTC", ScheduleState.ENABLED, True)
    assert [s.name for s in h.scheduler.schedules(name_prefix="n")] == ["nightly"]


def test_a_paused_schedule_does_not_fire_and_a_resumed_one_fires_from_then_on(h):
    h.scheduler.put_recurring(name="hourly", expression="rate(1 hour)", message_body=STARTS)
    first = h.scheduler.get("hourly").created_at.replace(microsecond=0)
    h.fire()  # the first time: at its creation
    h.scheduler.pause("hourly")
    h.advance(5 * 3600 + 60)
    assert h.fire() == []
    h.scheduler.resume("hourly")
    h.advance(3600)
    times = [f.scheduled_time for f in h.fire()]
    assert times == [first + timedelta(hours=6)]  # the paused hours are not caught up


def test_a_schedule_paused_and_resumed_between_two_firings_fires_none_of_its_paused_times(h):
    h.scheduler.put_recurring(name="hourly", expression="rate(1 hour)", message_body=STARTS)
    first = h.scheduler.get("hourly").created_at.replace(microsecond=0)
    h.advance(2 * 3600 + 60)
    assert len(h.fire()) == 3
    h.scheduler.pause("hourly")
    h.advance(5 * 3600)  # no firing while paused: the firer never saw it paused
    h.scheduler.resume("hourly")
    assert h.fire() == []
    h.advance(3600)
    assert [f.scheduled_time for f in h.fire()] == [first + timedelta(hours=8)]


def test_a_schedule_paused_and_resumed_before_any_firing_fires_from_its_resume_on(h):
    h.scheduler.put_recurring(name="hourly", expression="rate(1 hour)", message_body=STARTS)
    first = h.scheduler.get("hourly").created_at.replace(microsecond=0)
    h.scheduler.pause("hourly")
    h.advance(5 * 3600 + 60)
    h.scheduler.resume("hourly")
    assert h.fire() == []
    h.advance(3600)
    assert [f.scheduled_time for f in h.fire()] == [first + timedelta(hours=6)]


def test_a_firer_started_over_existing_schedules_fires_nothing_that_fell_due_before_it_started(h):
    h.scheduler.put_recurring(name="hourly", expression="rate(1 hour)", message_body=STARTS)
    first = h.scheduler.get("hourly").created_at.replace(microsecond=0)
    h.advance(2 * 3600 + 60)
    assert len(h.fire()) == 3
    h.advance(5 * 3600)  # nothing ran meanwhile (`continuum dev` stopped, then started again)
    restarted = ScheduleFirer(h.scheduler, clock=h.clock)
    assert restarted.fire_due(h.queue) == []
    h.advance(3600)
    assert [f.scheduled_time for f in restarted.fire_due(h.queue)] == [first + timedelta(hours=8)]


def test_a_paused_one_time_schedule_does_not_fire_until_resumed_and_keeps_its_time(h):
    at = h.now + timedelta(minutes=10)
    h.scheduler.schedule_at(name="w1", at=at, message_body=BODY)
    h.scheduler.pause("w1")
    h.advance(3600)
    assert h.fire() == []
    h.scheduler.resume("w1")
    schedule = h.scheduler.get("w1")
    assert schedule is not None
    assert schedule.one_time
    assert [f.body for f in h.fire()] == [BODY]
    assert h.scheduler.get("w1") is None


@pytest.mark.parametrize("operation", ["pause", "resume"])
def test_pausing_or_resuming_a_missing_schedule_names_it(h, operation):
    with pytest.raises(ScheduleNotFound, match="'nightly'"):
        getattr(h.scheduler, operation)("nightly")


# -- recurring schedules ---------------------------------------------------------------------------


def test_a_recurring_fire_carries_its_scheduled_time_in_the_body(h):
    h.scheduler.put_recurring(name="nightly", expression="rate(1 day)", message_body=STARTS)
    first = h.scheduler.get("nightly").created_at.replace(microsecond=0)
    h.advance(86400 + 60)
    bodies = [f.body for f in h.fire()]
    assert h.delivered() == bodies
    assert bodies == [
        STARTS.replace(SCHEDULED_TIME, when.strftime("%Y-%m-%dT%H:%M:%SZ"))
        for when in (first, first + timedelta(days=1))
    ]
    assert parse_scheduled_time(bodies[1][-22:-2]) == first + timedelta(days=1)


def test_a_rate_schedule_fires_each_of_its_times_once(h):
    h.scheduler.put_recurring(name="five", expression="rate(5 minutes)", message_body=STARTS)
    first = h.scheduler.get("five").created_at.replace(microsecond=0)
    h.advance(11 * 60)
    assert [f.scheduled_time for f in h.fire()] == [
        first + timedelta(minutes=m) for m in (0, 5, 10)
    ]
    assert h.fire() == []
    h.advance(5 * 60)
    assert [f.scheduled_time for f in h.fire()] == [first + timedelta(minutes=15)]
    assert len(h.delivered()) == 4


def test_a_cron_schedule_fires_at_its_times_in_its_time_zone(h):
    h.scheduler.put_recurring(
        name="nine", expression="cron(0 9 * * ? *)", message_body=STARTS, timezone="Europe/Paris"
    )
    h.advance(2 * 86400)
    times = [f.scheduled_time.astimezone(ZoneInfo("Europe/Paris")) for f in h.fire()]
    assert len(times) == 2
    assert {(t.hour, t.minute, t.second) for t in times} == {(9, 0, 0)}


@pytest.mark.parametrize(
    ("days", "fired"),
    [
        # Paris skips from 02:00 to 03:00 on 2027-03-28: that day has no 02:30.
        ((26, 3, 30), ["2027-03-27T02:30:00+01:00", "2027-03-29T02:30:00+02:00"]),
        # Paris lives 02:00 to 03:00 twice on 2027-10-31: 02:30 fires once, the first time.
        (
            (29, 10, 2),
            ["2027-10-30T02:30:00+02:00", "2027-10-31T02:30:00+02:00", "2027-11-01T02:30:00+01:00"],
        ),
    ],
    ids=["spring-gap", "autumn-overlap"],
)
def test_a_cron_fires_what_eventbridge_fires_across_a_daylight_saving_change(h, days, fired):
    paris = ZoneInfo("Europe/Paris")
    h.scheduler.put_recurring(
        name="night", expression="cron(30 2 * * ? *)", message_body=STARTS, timezone="Europe/Paris"
    )
    first, month, last = days
    h.clock.now = datetime(2027, month, first, 12, tzinfo=paris).timestamp()
    h.fire()  # every time up to the day before
    end_month = month if last > first else month + 1
    h.clock.now = datetime(2027, end_month, last, tzinfo=paris).timestamp()  # midnight
    assert [f.scheduled_time.astimezone(paris).isoformat() for f in h.fire()] == fired


@pytest.mark.parametrize(
    ("before", "after", "minute"),
    [("cron(0 * * * ? *)", "cron(30 * * * ? *)", 30), ("rate(1 hour)", "cron(45 * * * ? *)", 45)],
)
def test_a_changed_recurring_schedule_fires_from_the_change_on_never_its_past(
    h, before, after, minute
):
    h.scheduler.put_recurring(name="hourly", expression=before, message_body=STARTS)
    h.advance(10 * 3600)
    assert len(h.fire()) >= 10
    h.advance_to_minute(5)  # clear of :30 and :45, whatever the real time the clock began at
    h.fire()
    h.scheduler.put_recurring(name="hourly", expression=after, message_body=STARTS)  # a reload
    h.advance(60)
    assert h.fire() == []  # EventBridge fires the next time after the change, not those before
    h.advance(3600)
    fired = [f.scheduled_time for f in h.fire()]
    assert len(fired) == 1
    assert fired[0].minute == minute
    assert fired[0] > h.now - timedelta(hours=1)


def test_replacing_a_recurring_schedule_changes_its_expression_and_keeps_it_paused(h):
    h.scheduler.put_recurring(name="nightly", expression="rate(1 hour)", message_body=STARTS)
    h.scheduler.pause("nightly")
    h.scheduler.put_recurring(
        name="nightly", expression="cron(0 3 * * ? *)", message_body="v2", timezone="Asia/Tokyo"
    )
    replaced = h.scheduler.get("nightly")
    assert replaced is not None
    assert (replaced.expression, replaced.message_body, replaced.timezone, replaced.state) == (
        "cron(0 3 * * ? *)",
        "v2",
        "Asia/Tokyo",
        ScheduleState.DISABLED,
    )
    h.scheduler.put_recurring(
        name="nightly", expression="rate(1 hour)", message_body=STARTS, state=ScheduleState.ENABLED
    )
    assert h.scheduler.get("nightly").state is ScheduleState.ENABLED


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("every day", "neither 'cron"),
        ("rate(0 minutes)", "positive count"),
        ("rate(1 minutes)", "singular for 1"),
        ("rate(5 minute)", "plural above"),
        ("rate(30 seconds)", "neither 'cron"),
        ("cron(0 9 * * *)", "six fields"),
        ("cron(0 9 * * * *)", "exactly one of day-of-month and day-of-week"),
        ("cron(0 9 ? * ? *)", "exactly one of day-of-month and day-of-week"),
        ("cron(61 9 * * ? *)", "minutes field '61' has 61, outside 0 to 59"),
        ("cron(0 24 * * ? *)", "hours field"),
        ("cron(0 9 * FOO ? *)", "month field 'FOO'"),
        ("cron(0 9 ? * 2#1 *)", "L, W or #"),
        ("cron(0 9 15W * ? *)", "L, W or #"),
        ("cron(0/0 9 * * ? *)", "step"),
        ("cron(0 9 20-10 * ? *)", "backwards"),
        ("cron(? 9 * * ? *)", "minutes field"),
    ],
)
def test_a_malformed_recurring_expression_is_refused_naming_the_schedule_and_the_fault(
    h, expression, why
):
    with pytest.raises(InvalidSchedule, match="'nightly'") as raised:
        h.scheduler.put_recurring(name="nightly", expression=expression, message_body=STARTS)
    assert why in str(raised.value)
    assert h.scheduler.get("nightly") is None


def test_an_unknown_time_zone_is_refused_naming_the_schedule(h):
    with pytest.raises(InvalidSchedule, match=r"'nightly'.*Mars/Olympus"):
        h.scheduler.put_recurring(
            name="nightly", expression="rate(1 day)", message_body=STARTS, timezone="Mars/Olympus"
        )


def test_a_firer_that_catches_up_keeps_only_the_latest_missed_times(h):
    h.scheduler.put_recurring(name="five", expression="rate(5 minutes)", message_body=STARTS)
    first = h.scheduler.get("five").created_at.replace(microsecond=0)
    firer = ScheduleFirer(h.scheduler, clock=h.clock, catch_up=1)
    h.advance(3600 + 60)
    assert [f.scheduled_time for f in firer.fire_due(h.queue)] == [first + timedelta(hours=1)]
    h.advance(5 * 60)
    assert [f.scheduled_time for f in firer.fire_due(h.queue)] == [first + timedelta(minutes=65)]


class FailingSends:
    """A queue whose sends fail after the first ``good`` ones."""

    def __init__(self, queue, good: int):
        self.queue = queue
        self.good = good

    def send(self, body: str, *, delay_s: int = 0) -> str:
        if self.good <= 0:
            raise QueueError("send failed: injected")
        self.good -= 1
        return self.queue.send(body, delay_s=delay_s)


def test_a_fire_whose_send_fails_is_delivered_by_the_next_firing_and_nothing_twice(h):
    h.scheduler.schedule_at(name="w1", at=h.now + timedelta(minutes=1), message_body=BODY)
    h.scheduler.put_recurring(name="hourly", expression="rate(1 hour)", message_body=STARTS)
    h.advance(2 * 3600 + 120)
    # Due, in time order: hourly's first time (its creation), w1, then two more hourly times.
    with pytest.raises(QueueError):
        h.firer.fire_due(FailingSends(h.queue, good=2))
    assert h.scheduler.get("w1") is None  # delivered, then deleted
    h.fire()
    first = h.scheduler.get("hourly").created_at.replace(microsecond=0)
    bodies = h.delivered()
    assert sorted(bodies) == sorted(
        [BODY]
        + [
            STARTS.replace(
                SCHEDULED_TIME, (first + timedelta(hours=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
            )
            for n in range(3)
        ]
    )


def test_a_create_the_fault_hook_fails_stores_nothing():
    def fail(operation: str, name: str) -> None:
        if operation == "schedule_at":
            raise TransientSchedulerError("injected", schedule=name)

    scheduler = InMemoryScheduler(clock=ManualClock(), on_call=fail)
    at = datetime(2031, 1, 1, tzinfo=UTC)
    with pytest.raises(TransientSchedulerError, match="'w1'"):
        scheduler.schedule_at(name="w1", at=at, message_body=BODY)
    assert scheduler.schedules() == []


def test_the_next_fire_time_is_the_soonest_of_the_enabled_schedules(h):
    assert h.firer.next_due_at() is None
    at = (h.now + timedelta(days=3)).replace(microsecond=0)
    h.scheduler.schedule_at(name="w1", at=at, message_body=BODY)
    h.scheduler.put_recurring(name="daily", expression="rate(1 day)", message_body=STARTS)
    first = h.scheduler.get("daily").created_at.replace(microsecond=0)
    assert h.firer.next_due_at() == first
    h.fire()
    assert h.firer.next_due_at() == first + timedelta(days=1)
    h.scheduler.pause("daily")
    assert h.firer.next_due_at() == at


# -- EventBridge Scheduler itself ------------------------------------------------------------------


@pytest.mark.moto_only("reads the schedule back with boto3: what AWS is asked to create")
def test_on_aws_a_wait_schedule_deletes_itself_after_its_fire_and_targets_the_queue(h):
    h.scheduler.schedule_at(name="w1", at=h.now + timedelta(hours=1), message_body=BODY)
    raw = h.scheduler.client.get_schedule(Name="w1", GroupName=h.scheduler.group)
    assert raw["ActionAfterCompletion"] == "DELETE"
    assert raw["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert raw["ScheduleExpressionTimezone"] == "UTC"
    assert raw["Target"]["Arn"] == h.scheduler.target_arn
    assert raw["Target"]["Arn"].startswith("arn:aws:sqs:")
    assert raw["Target"]["RoleArn"] == ROLE_ARN
    assert raw["Target"]["Input"] == BODY


def test_on_aws_pausing_a_wait_schedule_asks_for_delete_after_completion_again():
    # moto ignores ActionAfterCompletion on UpdateSchedule, and AWS resets what is left out.
    client = boto3.client("scheduler", region_name=REGION)
    scheduler = EventBridgeScheduler(client, group=GROUP, target_arn="a", role_arn=ROLE_ARN)
    target = {"Arn": "arn:aws:sqs:us-east-1:123456789012:q", "RoleArn": ROLE_ARN, "Input": BODY}
    read = {
        "Name": "w1",
        "GroupName": GROUP,
        "ScheduleExpression": "at(2031-01-01T09:00:00)",
        "ScheduleExpressionTimezone": "UTC",
        "State": "ENABLED",
        "Target": target,
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "ActionAfterCompletion": "DELETE",
    }
    with Stubber(client) as stub:
        stub.add_response("get_schedule", read, {"Name": "w1", "GroupName": GROUP})
        stub.add_response(
            "update_schedule",
            {"ScheduleArn": "arn:aws:scheduler:us-east-1:123456789012:schedule/g/w1"},
            {
                "Name": "w1",
                "GroupName": GROUP,
                "ScheduleExpression": "at(2031-01-01T09:00:00)",
                "ScheduleExpressionTimezone": "UTC",
                "ActionAfterCompletion": "DELETE",
                "FlexibleTimeWindow": {"Mode": "OFF"},
                "Target": target,
                "State": "DISABLED",
            },
        )
        scheduler.pause("w1")
        stub.assert_no_pending_responses()


@pytest.mark.moto_only("pausing goes through UpdateSchedule, which replaces the whole schedule")
def test_on_aws_pausing_a_wait_schedule_keeps_its_target_and_its_delete_after_completion(h):
    h.scheduler.schedule_at(name="w1", at=h.now + timedelta(hours=1), message_body=BODY)
    h.scheduler.pause("w1")
    raw = h.scheduler.client.get_schedule(Name="w1", GroupName=h.scheduler.group)
    assert raw["State"] == "DISABLED"
    assert raw["Target"]["Input"] == BODY
    assert raw["Target"]["RoleArn"] == ROLE_ARN


def test_a_schedule_group_that_does_not_exist_is_a_scheduler_error_naming_it(clients):
    missing = EventBridgeScheduler(
        clients.scheduler, group="no-such-group", target_arn="a", role_arn="r"
    )
    at = datetime.now(UTC) + timedelta(hours=1)
    with pytest.raises(SchedulerError, match=r"'w1'.*'no-such-group' does not exist"):
        missing.schedule_at(name="w1", at=at, message_body=BODY)
    with pytest.raises(SchedulerError, match=r"'w1'.*'no-such-group' does not exist"):
        missing.get("w1")


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("ThrottlingException", 400, TransientSchedulerError),
        ("InternalServerException", 500, TransientSchedulerError),
        ("ServiceQuotaExceededException", 402, SchedulerError),
        ("AccessDeniedException", 403, SchedulerError),
        ("ValidationException", 400, InvalidSchedule),
    ],
)
def test_eventbridge_failures_are_scheduler_errors_naming_the_schedule(code, status, error):
    client = boto3.client("scheduler", region_name=REGION)
    scheduler = EventBridgeScheduler(client, group=GROUP, target_arn="a", role_arn=ROLE_ARN)
    with Stubber(client) as stub:
        stub.add_client_error("create_schedule", code, "no", http_status_code=status)
        with pytest.raises(error, match="'w1'") as raised:
            scheduler.schedule_at(
                name="w1", at=datetime.now(UTC) + timedelta(hours=1), message_body=BODY
            )
    assert raised.type is error
    assert raised.value.schedule == "w1"


def test_a_recurring_schedule_created_and_deleted_by_another_caller_meanwhile_is_worth_a_retry():
    client = boto3.client("scheduler", region_name=REGION)
    scheduler = EventBridgeScheduler(client, group=GROUP, target_arn="a", role_arn=ROLE_ARN)
    with Stubber(client) as stub:
        stub.add_client_error("get_schedule", "ResourceNotFoundException", "Schedule x gone")
        stub.add_client_error("create_schedule", "ConflictException", "Schedule x exists")
        stub.add_client_error("get_schedule", "ResourceNotFoundException", "Schedule x gone")
        with pytest.raises(TransientSchedulerError, match=r"'nightly'.*try again"):
            scheduler.put_recurring(name="nightly", expression="rate(1 day)", message_body=STARTS)
        stub.assert_no_pending_responses()


def test_a_delete_that_fails_for_another_reason_than_a_missing_schedule_says_so():
    client = boto3.client("scheduler", region_name=REGION)
    scheduler = EventBridgeScheduler(client, group=GROUP, target_arn="a", role_arn=ROLE_ARN)
    with Stubber(client) as stub:
        stub.add_client_error("delete_schedule", "ResourceNotFoundException", "Schedule w1 gone")
        scheduler.delete("w1")
        stub.add_client_error("delete_schedule", "ThrottlingException", "slow down")
        with pytest.raises(TransientSchedulerError, match="'w1'"):
            scheduler.delete("w1")


# -- the pure parts: names, expressions, times -----------------------------------------------------


def test_a_waits_schedule_name_is_the_same_at_every_retry_and_differs_per_generation_and_wait():
    name = wait_schedule_name(task_id="order-42", generation=7, wait="sleep:ship")
    assert name == wait_schedule_name(task_id="order-42", generation=7, wait="sleep:ship")
    assert name.startswith("order-42-g7-")
    others = {
        wait_schedule_name(task_id="order-42", generation=8, wait="sleep:ship"),
        wait_schedule_name(task_id="order-42", generation=7, wait="callback:ok"),
        wait_schedule_name(task_id="order-43", generation=7, wait="sleep:ship"),
    }
    assert name not in others
    assert len(others) == 3


def test_a_waits_schedule_name_is_one_eventbridge_takes_whatever_the_task_id(h):
    long_odd = "tenant/ä:" + "x" * 200
    name = wait_schedule_name(task_id=long_odd, generation=123456789, wait="sleep")
    h.scheduler.schedule_at(name=name, at=h.now + timedelta(hours=1), message_body=BODY)
    assert [s.name for s in h.scheduler.schedules()] == [name]
    assert len(name) <= 64


@pytest.mark.parametrize(
    ("every", "expression"),
    [
        (timedelta(minutes=1), "rate(1 minute)"),
        (timedelta(minutes=90), "rate(90 minutes)"),
        (timedelta(hours=1), "rate(1 hour)"),
        (timedelta(hours=36), "rate(36 hours)"),
        (timedelta(days=1), "rate(1 day)"),
        (timedelta(weeks=2), "rate(14 days)"),
    ],
)
def test_every_becomes_a_rate_in_the_largest_unit_that_divides_it(every, expression):
    assert rate_expression("report", every) == expression
    assert recurring_expression("report", every=every) == expression


@pytest.mark.parametrize(
    "every", [timedelta(0), timedelta(seconds=30), timedelta(seconds=90), timedelta(minutes=-5)]
)
def test_an_every_eventbridge_cannot_express_is_refused_naming_the_schedule(every):
    with pytest.raises(InvalidSchedule, match=r"'report'.*whole minutes"):
        rate_expression("report", every)


def test_a_schedule_is_declared_with_exactly_one_of_cron_and_every():
    assert recurring_expression("r", cron="cron(0 9 * * ? *)") == "cron(0 9 * * ? *)"
    with pytest.raises(InvalidSchedule, match=r"'r'.*exactly one"):
        recurring_expression("r")
    with pytest.raises(InvalidSchedule, match=r"'r'.*exactly one"):
        recurring_expression("r", cron="cron(0 9 * * ? *)", every=timedelta(hours=1))


def test_a_cron_in_a_time_zone_follows_its_daylight_saving_change():
    cron = parse_cron("nine", "cron(0 9 * * ? *)")
    after = datetime(2031, 3, 29, 0, 0, tzinfo=UTC)  # Paris moves to summer time on the 30th
    times = cron_times(cron, "Europe/Paris", after, after + timedelta(days=2))
    assert [t.hour for t in times] == [8, 7]


@pytest.mark.parametrize(
    ("expression", "first_times"),
    [
        ("cron(0/15 * * * ? *)", ["00:00", "00:15", "00:30"]),
        ("cron(30 8-9 * * ? *)", ["08:30", "09:30", "1 08:30"]),
        ("cron(0 12 ? * MON-FRI *)", ["1 12:00", "2 12:00", "3 12:00"]),  # 2031-06-01: a Sunday
        ("cron(0 0 L * ? *)", ["29 00:00", "60 00:00"]),  # the last of June, then of July
        ("cron(0 6 1,15 JAN,JUN ? 2031)", ["06:00", "14 06:00"]),
    ],
)
def test_cron_fields_allow_what_eventbridge_documents(expression, first_times):
    after = datetime(2031, 6, 1, 0, 0, tzinfo=UTC) - timedelta(microseconds=1)
    times = cron_times(parse_cron("c", expression), "UTC", after, after + timedelta(days=62))
    day0 = datetime(2031, 6, 1, tzinfo=UTC)

    def spelled(t: datetime) -> str:
        days = (t - day0).days
        return f"{days} {t:%H:%M}" if days else f"{t:%H:%M}"

    assert [spelled(t) for t in times[: len(first_times)]] == first_times


def test_the_in_memory_scheduler_fires_on_its_own_clock():
    clock = ManualClock(1_900_000_000.0)
    scheduler = InMemoryScheduler(clock=clock)
    queue = InMemoryContinuationQueue(clock=clock)
    at = datetime.fromtimestamp(clock.now, UTC) + timedelta(days=30)
    scheduler.schedule_at(name="w1", at=at, message_body=BODY)
    assert scheduler.due() == []
    clock.advance(30 * 86400)
    assert [f.name for f in scheduler.due()] == ["w1"]
    assert [f.name for f in scheduler.fire_due(queue)] == ["w1"]
    assert queue.bodies() == [BODY]
    assert len(scheduler) == 0
