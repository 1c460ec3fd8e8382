"""Stopping on a signal without losing work: every running invocation's deadline comes closer.

Lambda ends an invocation at its deadline, and continuum suspends a task *before* a step that
would not fit in the time left (the budget rule). A process that runs invocations itself (the
worker outside Lambda, ``continuum run``) and is told to stop (ECS's SIGTERM, Ctrl-C) uses the
same rule: from the signal on, every :class:`InvocationContext` reports at most the grace
period, less ``EXIT_MARGIN_S``, as its remaining time. Each running task then suspends at its
next step boundary (record saved, continuation sent), and the process exits with nothing lost.

A signal handler runs between two bytecodes of the main thread, even while that thread holds a
lock. So the handler only assigns attributes (no lock, no I/O but ``os.write``), and the
threads read them.

Example:
    >>> shutdown = Shutdown()
    >>> context = InvocationContext(900, shutdown)
    >>> context.get_remaining_time_in_millis() > 899_000
    True
    >>> shutdown.begin(grace_s=0, reason="SIGINT")
    >>> context.get_remaining_time_in_millis()
    0
"""

from __future__ import annotations

import math
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

#: Seconds of the grace period kept for the process itself once its tasks suspended:
#: releasing messages received but not started, joining threads, exiting. The budget rule
#: already keeps room for the suspension's own write and send.
EXIT_MARGIN_S = 2.0
#: The function name the emulated invocation contexts report (logs, the lease owner's id).
FUNCTION_NAME = "continuum-worker"
#: What an emulated invocation is priced at: the deployed function's memory (the template's
#: FunctionMemory default), so that its billed milliseconds cost what they would on Lambda.
FUNCTION_MEMORY_MB = 1024

Clock = Callable[[], float]


class Shutdown:
    """When this process must be done: set once, by a signal or a caller; read by everyone.

    Attributes:
        reason: what asked for the stop (``"SIGTERM"``), or None while running.
        signals: how many stop signals arrived (a second one means "now").
    """

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self.reason: str | None = None
        self.signals = 0
        self._tasks_deadline = math.inf
        self._exit_deadline = math.inf

    @property
    def requested(self) -> bool:
        """Whether a stop was asked for."""
        return self.reason is not None

    def begin(self, *, grace_s: float, reason: str) -> None:
        """Stop within ``grace_s`` seconds: tasks get ``grace_s - EXIT_MARGIN_S`` of it.

        A second call changes nothing: the first grace period stands.
        """
        if self.reason is not None:
            return
        now = self.clock()
        self._tasks_deadline = now + max(0.0, grace_s - EXIT_MARGIN_S)
        self._exit_deadline = now + max(0.0, grace_s)
        self.reason = reason

    def tasks_deadline(self) -> float:
        """The clock reading by which running tasks must have suspended (inf: no stop)."""
        return self._tasks_deadline

    def exit_left_s(self) -> float:
        """Seconds left before the process must exit (inf while no stop was asked for)."""
        return self._exit_deadline - self.clock()


class InvocationContext:
    """The parts of Lambda's context continuum reads, for an invocation this process emulates.

    Its deadline is ``budget_s`` from its creation, or the stop's, whichever comes first.

    Args:
        budget_s: the invocation's budget in seconds (a Lambda function's timeout).
        shutdown: the process's stop, which may bring the deadline closer.
    """

    def __init__(self, budget_s: float, shutdown: Shutdown) -> None:
        self._shutdown = shutdown
        self._deadline = shutdown.clock() + budget_s
        self.aws_request_id = uuid.uuid4().hex
        self.function_name = FUNCTION_NAME
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = FUNCTION_MEMORY_MB
        self.invoked_function_arn = f"arn:aws:lambda:local:000000000000:function:{FUNCTION_NAME}"
        self.log_group_name = FUNCTION_NAME
        self.log_stream_name = f"{os.getpid()}"

    def get_remaining_time_in_millis(self) -> int:
        deadline = min(self._deadline, self._shutdown.tasks_deadline())
        return max(0, int((deadline - self._shutdown.clock()) * 1000))


@contextmanager
def stop_on_signals(
    shutdown: Shutdown,
    *,
    grace_s: float,
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT),
    again: Callable[[signal.Signals], None] | None = None,
) -> Iterator[Shutdown]:
    """Within the block, the first of ``signals`` begins ``shutdown`` with ``grace_s``.

    A second signal calls ``again(signal)`` (default: exit at once with 128 + its number;
    records fence whatever was still running, as they fence a killed Lambda). The previous
    handlers come back when the block ends. Main thread only.
    """

    def handle(signum: int, _frame: FrameType | None) -> None:
        which = signal.Signals(signum)
        shutdown.signals += 1
        if shutdown.requested:
            (again or _exit_now)(which)
        else:
            shutdown.begin(grace_s=grace_s, reason=which.name)

    previous = {s: signal.signal(s, handle) for s in signals}
    try:
        yield shutdown
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _exit_now(which: signal.Signals) -> None:
    os.write(2, f"\n{which.name} again: exiting now; records fence what was running\n".encode())
    os._exit(128 + which.value)
