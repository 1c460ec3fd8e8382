"""``continuum schedules list | sync | pause | resume | trigger``, run as a user runs them, on
moto (the stack's bucket, queue and schedule group from the environment)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from continuum.backends.scheduler import wait_schedule_name
from continuum.cli import main
from tests.support import moto_backend

ROLE = "arn:aws:iam::123456789012:role/continuum-scheduler"
APP = "tests.schedules.cli_app:app"
T0 = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)


@pytest.fixture
def stack(monkeypatch) -> Iterator[dict[str, str]]:
    """A bucket, a queue and a schedule group on moto, named by the environment."""
    with moto_backend():
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        for name in ("AWS_ENDPOINT_URL", "CONTINUUM_QUEUE_ARN", "CONTINUUM_SIGNING_KEY"):
            monkeypatch.delenv(name, raising=False)
        boto3.client("s3").create_bucket(Bucket="records")
        sqs = boto3.client("sqs")
        queue_url = sqs.create_queue(QueueName="continuations")["QueueUrl"]
        boto3.client("scheduler").create_schedule_group(Name="tasks-schedules")
        env = {
            "CONTINUUM_BUCKET": "records",
            "CONTINUUM_QUEUE_URL": queue_url,
            "CONTINUUM_SCHEDULE_GROUP": "tasks-schedules",
            "CONTINUUM_SCHEDULER_ROLE_ARN": ROLE,
            "CONTINUUM_APP": APP,
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        yield env


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["schedules", *argv])
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def schedules() -> dict[str, dict]:
    client = boto3.client("scheduler")
    listed = client.list_schedules(GroupName="tasks-schedules")["Schedules"]
    return {
        s["Name"]: client.get_schedule(GroupName="tasks-schedules", Name=s["Name"]) for s in listed
    }


def test_sync_makes_the_groups_schedules_what_the_app_declares_and_leaves_waits_alone(
    capsys, stack
):
    wait = wait_schedule_name(task_id="t-1", generation=1, wait="sleep:a")
    boto3.client("scheduler").create_schedule(
        Name=wait, GroupName="tasks-schedules", ScheduleExpression="at(2030-01-01T00:00:00)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": "arn:aws:sqs:us-east-1:123456789012:continuations", "RoleArn": ROLE,
                "Input": "{}"},
    )  # fmt: skip
    code, out, err = run(capsys, "sync")
    assert (code, err) == (0, "")
    assert out.splitlines() == ["created morning", "created tick"]
    made = schedules()
    assert sorted(made) == sorted(["_schedule.morning", "_schedule.tick", wait])
    morning = made["_schedule.morning"]
    assert morning["ScheduleExpression"] == "cron(0 9 * * ? *)"
    assert morning["ScheduleExpressionTimezone"] == "Europe/Paris"
    assert morning["Target"]["Arn"] == "arn:aws:sqs:us-east-1:123456789012:continuations"
    assert morning["Target"]["RoleArn"] == ROLE
    assert '"schedule":"morning"' in morning["Target"]["Input"]
    code, out, _ = run(capsys, "sync")
    assert (code, out.splitlines()[-1]) == (0, "the schedules are what the app declares: "
                                                "nothing changed")  # fmt: skip


@pytest.mark.slow  # drives five CLI commands on moto with a real fire
def test_list_pause_resume_and_trigger_with_overlap(capsys, stack, monkeypatch):
    run(capsys, "sync")
    code, out, _ = run(capsys, "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "EXPRESSION", "TIMEZONE", "STATE", "NEXT", "FIRE",
                                "LAST", "RUN", "LAST", "SKIP"]  # fmt: skip
    assert lines[1].startswith("morning  cron(0 9 * * ? *)  Europe/Paris  ENABLED")
    assert lines[2].startswith("tick")
    assert re.search(r"ENABLED  \d{4}-\d\d-\d\d 0[78]:00Z", lines[1])  # 9:00 in Paris
    assert lines[1].split()[-2:] == ["-", "-"]  # no run, no skip

    assert run(capsys, "pause", "morning")[:2] == (0, "paused morning\n")
    assert "DISABLED" in run(capsys, "list")[1].splitlines()[1]
    assert run(capsys, "resume", "morning")[:2] == (0, "resumed morning\n")

    import continuum._base.clock as clock

    monkeypatch.setattr(clock, "utcnow", lambda: T0)
    assert run(capsys, "trigger", "morning")[:2] == (0, "started morning-20260105T080000Z\n")
    assert run(capsys, "trigger", "morning")[1] == (
        "morning-20260105T080000Z was started already (a fire at this second): nothing new\n"
    )
    monkeypatch.setattr(clock, "utcnow", lambda: T0 + timedelta(minutes=1))
    code, out, _ = run(capsys, "trigger", "morning")
    assert code == 0
    assert out == (
        "skipped: the previous run morning-20260105T080000Z has not finished "
        "(overlap='skip'); nothing started\n"
    )
    row = run(capsys, "list")[1].splitlines()[1]
    assert "morning-20260105T080000Z (pending)" in row
    assert "2026-01-05T08:01:00Z (while morning-20260105T080000Z ran), 1 in all" in row
    queue = boto3.client("sqs")
    received = queue.receive_message(QueueUrl=stack["CONTINUUM_QUEUE_URL"])["Messages"]
    assert '"task_id":"morning-20260105T080000Z"' in received[0]["Body"]


def test_mistakes_are_one_line_errors(capsys, stack, monkeypatch):
    code, _, err = run(capsys, "pause", "never-synced")
    assert code == 2
    assert err.startswith("error: no schedule 'never-synced' in the group 'tasks-schedules'")
    code, _, err = run(capsys, "trigger", "evening")
    assert code == 2
    assert err == "error: the app declares no schedule 'evening' (it declares: morning, tick)\n"
    monkeypatch.delenv("CONTINUUM_SCHEDULER_ROLE_ARN")
    code, _, err = run(capsys, "sync")
    assert code == 2
    assert err.startswith("error: no scheduler role: pass --scheduler-role-arn")
    monkeypatch.delenv("CONTINUUM_SCHEDULE_GROUP")
    assert run(capsys, "list")[2].startswith("error: no schedule group: pass --schedule-group")
