"""The virtual clock: the time its cheap reads give is the time freezegun gives the task."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

from freezegun import freeze_time

from tests.support import VirtualTime, now_s, utcnow

START = datetime(2030, 1, 1, tzinfo=UTC)


def test_its_cheap_read_agrees_with_the_patched_clock_as_it_ticks_and_jumps():
    clock = VirtualTime(START)
    with clock.running():
        before, read, after = time.time(), clock.now_s(), time.time()
        assert before <= read <= after
        assert abs(read - START.timestamp()) < 5
        clock.advance(86_400)
        assert abs(clock.now_s() - time.time()) < 0.01
        assert abs(clock.now_s() - (START.timestamp() + 86_400)) < 5
        clock.wait_until(START.timestamp() + 2 * 86_400, poll_s=1)
        assert clock.now_s() >= START.timestamp() + 2 * 86_400
        assert abs(datetime.now(UTC).timestamp() - clock.now_s()) < 0.01


def test_a_stopped_clock_reads_the_same_on_both_and_resumes_where_it_left():
    clock = VirtualTime(START, tick=False)
    with clock.running():
        assert clock.now_s() == time.time() == START.timestamp()
        clock.advance(90.5)
        assert clock.now_s() == time.time() == START.timestamp() + 90.5
    assert abs(clock.now_s() - time.time()) < 1  # outside it: the real clock, on both
    with clock.running():
        assert time.time() == START.timestamp() + 90.5


def test_move_to_takes_naive_times_as_utc_and_aware_ones_in_any_zone():
    clock = VirtualTime(START, tick=False)
    with clock.running():
        clock.move_to(datetime(2031, 6, 1, 12, 0, 0, 250_000))  # naive: UTC
        assert time.time() == datetime(2031, 6, 1, 12, 0, 0, 250_000, tzinfo=UTC).timestamp()
        plus_two = timezone(timedelta(hours=2))
        clock.move_to(datetime(2031, 6, 1, 14, 0, tzinfo=plus_two))
        assert time.time() == datetime(2031, 6, 1, 12, 0, tzinfo=UTC).timestamp()
        assert datetime.now(UTC) == datetime(2031, 6, 1, 12, 0, tzinfo=UTC)
        clock.move_to(START - timedelta(days=1))  # backwards too
        assert time.time() == START.timestamp() - 86_400


def test_continuum_reads_the_same_virtual_time_as_the_task_and_the_real_one_after():
    clock = VirtualTime(START, tick=False)
    with clock.running():
        clock.advance(3600)
        assert now_s() == time.time() == START.timestamp() + 3600
        assert utcnow() == datetime.now(UTC) == START + timedelta(hours=1)
        assert utcnow().tzinfo is UTC
        with clock.running():  # re-entrant: still the one clock
            assert now_s() == START.timestamp() + 3600
    assert abs(now_s() - time.time()) < 1
    assert abs(utcnow().timestamp() - time.time()) < 1


def test_a_tests_own_freeze_time_applies_to_continuums_reads_too():
    with freeze_time("2031-03-04 05:06:07"):
        assert now_s() == datetime(2031, 3, 4, 5, 6, 7, tzinfo=UTC).timestamp()
        assert utcnow() == datetime(2031, 3, 4, 5, 6, 7, tzinfo=UTC)
