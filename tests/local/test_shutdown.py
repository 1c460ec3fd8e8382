"""A stop brings every invocation's deadline to the grace period, less the exit margin."""

from __future__ import annotations

import os
import signal

import pytest

from continuum._local.shutdown import EXIT_MARGIN_S, InvocationContext, Shutdown, stop_on_signals
from continuum.testing import ManualClock


def test_a_context_has_its_budget_until_a_stop_and_the_grace_less_the_margin_after():
    clock = ManualClock(100.0)
    shutdown = Shutdown(clock)
    context = InvocationContext(900, shutdown)
    clock.advance(10)
    assert context.get_remaining_time_in_millis() == 890_000
    shutdown.begin(grace_s=25, reason="SIGTERM")
    assert context.get_remaining_time_in_millis() == (25 - EXIT_MARGIN_S) * 1000
    assert shutdown.exit_left_s() == 25
    late = InvocationContext(900, shutdown)  # a message received after the stop
    assert late.get_remaining_time_in_millis() == (25 - EXIT_MARGIN_S) * 1000
    clock.advance(30)
    assert context.get_remaining_time_in_millis() == 0
    assert context.aws_request_id != late.aws_request_id  # each invocation owns its lease


def test_the_first_stop_stands_and_a_grace_shorter_than_the_margin_leaves_nothing():
    clock = ManualClock()
    shutdown = Shutdown(clock)
    assert not shutdown.requested
    shutdown.begin(grace_s=1, reason="SIGINT")
    shutdown.begin(grace_s=120, reason="SIGTERM")
    assert (shutdown.requested, shutdown.reason) == (True, "SIGINT")
    assert InvocationContext(900, shutdown).get_remaining_time_in_millis() == 0
    assert shutdown.exit_left_s() == 1


def test_a_signal_begins_the_stop_and_a_second_one_calls_again():
    shutdown = Shutdown()
    again: list[signal.Signals] = []
    previous = signal.getsignal(signal.SIGUSR1)
    with stop_on_signals(shutdown, grace_s=5, signals=(signal.SIGUSR1,), again=again.append):
        os.kill(os.getpid(), signal.SIGUSR1)
        assert (shutdown.reason, shutdown.signals, again) == ("SIGUSR1", 1, [])
        os.kill(os.getpid(), signal.SIGUSR1)
        assert again == [signal.SIGUSR1]
    assert signal.getsignal(signal.SIGUSR1) is previous


@pytest.mark.parametrize("grace_s", [0, 3, 30])
def test_exit_left_counts_down_the_whole_grace(grace_s):
    clock = ManualClock()
    shutdown = Shutdown(clock)
    shutdown.begin(grace_s=grace_s, reason="test")
    clock.advance(1)
    assert shutdown.exit_left_s() == grace_s - 1
