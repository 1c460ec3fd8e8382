"""Time for the local runtime: the real clock, or a virtual one that jumps to the next due message.

Locally nothing else happens while a task waits, so waiting in real time is only waiting. With
the virtual clock (freezegun, which moves moto's clocks too) the runtime jumps to the moment
the next message becomes visible whenever nothing can run now: a task that sleeps 30 days
finishes in seconds, and its timers, hops and deadlines all fire as they would on AWS.

:class:`DueTimes` wraps the app's continuation queue to learn when each message it sent will
become visible (moto does not say); the in-memory queue knows it exactly.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from continuum._base import clock as now
from continuum._base.frozen_clocks import give_fake_dates_their_schemas
from continuum.backends.queue import ContinuationQueue, QueueMessage
from continuum.errors import ConfigurationError

#: After a jump, land this far past the due time, so the message is surely visible.
JUMP_PAST_S = 0.001
#: Modules that keep the real clock on the virtual one (freezegun's ``ignore``): pytest's own
#: timing, so that a test that runs tasks on the virtual clock still gets true durations
#: (``--durations``, junit); and Powertools' parser models, which continuum does not use but
#: its batch utilities import: freezegun's scan of every loaded module reads each attribute,
#: and the parser's lazy ``models`` package would then import all of its pydantic event models;
#: and asyncio, whose event loop schedules by ``time.monotonic``: on a clock that moves only
#: when a wait jumps it, an async step's ``asyncio.sleep`` would never end.
KEEP_REAL_TIME = ("_pytest.timing", "aws_lambda_powertools.utilities.parser", "asyncio")


#: Naive UTC, as freezegun's factory times are.
_EPOCH = datetime(1970, 1, 1)


class DueTimes:
    """A ContinuationQueue that remembers when the messages sent through it become visible."""

    def __init__(self, queue: ContinuationQueue) -> None:
        self.queue = queue
        self.max_delay_s = queue.max_delay_s
        self._due: list[float] = []
        self._lock = threading.Lock()

    def note(self, at: float) -> None:
        """Something becomes visible at ``at`` (epoch s)."""
        with self._lock:
            heapq.heappush(self._due, at)

    def next_due(self, after: float) -> float | None:
        """The earliest known time after ``after`` at which a message becomes visible."""
        with self._lock:
            while self._due and self._due[0] <= after:
                heapq.heappop(self._due)
            return self._due[0] if self._due else None

    def send(self, body: str, *, delay_s: int = 0) -> str:
        message_id = self.queue.send(body, delay_s=delay_s)
        self.note(now.now_s() + min(max(0, delay_s), self.max_delay_s))
        return message_id

    def set_visibility(self, receipt_handle: str, seconds: int) -> None:
        self.queue.set_visibility(receipt_handle, seconds)
        self.note(now.now_s() + seconds)

    def receive(self, *, max_messages: int = 1, wait_s: int = 0) -> list[QueueMessage]:
        return self.queue.receive(max_messages=max_messages, wait_s=wait_s)

    def delete(self, receipt_handle: str) -> None:
        self.queue.delete(receipt_handle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)


class RealTime:
    """The wall clock: waiting means sleeping."""

    virtual = False

    @contextmanager
    def running(self) -> Iterator[None]:
        yield

    def wait_until(self, due: float, *, poll_s: float) -> None:
        time.sleep(max(0.0, min(poll_s, due - time.time())))


class VirtualTime:
    """A virtual clock from ``start`` (default: now): ticks with the wall clock, and jumps.

    With ``tick=False`` it moves only when told (a jump, ``advance``, ``move_to``), so two runs
    from the same start read the same times.

    Requires freezegun (``pip install 'continuum-lambda[local]'``).
    """

    virtual = True

    def __init__(self, start: datetime | None = None, *, tick: bool = True) -> None:
        try:
            from freezegun import freeze_time
        except ImportError as exc:  # pragma: no cover - freezegun is in the local extra
            raise ConfigurationError(
                "the virtual clock needs freezegun",
                hint="pip install 'continuum-lambda[local]', or run with --real-time",
            ) from exc
        from freezegun.api import real_datetime

        give_fake_dates_their_schemas()
        # Its models subclass the record's: built inside the clock, pydantic < 2.14 would
        # resolve their inherited datetime fields against the fake and refuse them.
        import continuum._ops.status  # noqa: F401

        self._freeze_time = freeze_time
        #: freezegun's unpatched datetime: the factory's times stay real datetimes, whose
        #: arithmetic is C (a FakeDatetime's is Python, on every read of the clock).
        self._datetime: type[datetime] = real_datetime
        self._resume_at = start or datetime.now(UTC)
        self._tick = tick
        self._freezer: Any = None
        self._factory: Any = None
        self._depth = 0

    @contextmanager
    def running(self) -> Iterator[None]:
        """Run the block on the virtual clock (re-entrant). Between blocks the virtual clock
        stands still: the next block resumes where the last one left it."""
        if self._depth == 0:
            self._freezer = self._freeze_time(
                self._real(self._resume_at), tick=self._tick, ignore=list(KEEP_REAL_TIME)
            )
            self._factory = self._freezer.start()
            now.run(self)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                now.stop(self)
                self._resume_at = self._factory().replace(tzinfo=UTC)
                self._freezer.stop()
                self._freezer = self._factory = None

    def now_s(self) -> float:
        """The virtual time in epoch seconds, as ``time.time()`` reads it inside ``running``
        (the real one outside), read from freezegun's factory directly: without the call-stack
        walk of freezegun's patched functions (``continuum._base.clock`` reads it so)."""
        factory = self._factory
        if factory is None:
            return time.time()
        naive: datetime = factory()  # UTC
        return (naive - _EPOCH).total_seconds()

    def now_utc(self) -> datetime:
        """The virtual time as an aware UTC datetime (a real one, not freezegun's fake)."""
        factory = self._factory
        if factory is None:
            return datetime.now(UTC)
        naive: datetime = factory()
        return naive.replace(tzinfo=UTC)

    def wait_until(self, due: float, *, poll_s: float) -> None:
        """Jump to ``due`` at once (only inside ``running``)."""
        self.advance(due + JUMP_PAST_S - self.now_s())

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward (only inside ``running``)."""
        if self._factory is not None and seconds > 0:
            # Not factory.tick(): on a ticking clock it drops the time ticked since the last
            # move (freezegun 1.5); move_to the virtual now plus the jump instead.
            self._factory.move_to(self._factory() + timedelta(seconds=seconds))

    def move_to(self, when: datetime) -> None:
        """Set the clock to ``when``, backwards too (only inside ``running``)."""
        if self._factory is not None:
            self._factory.move_to(self._real(when))

    def _real(self, when: datetime) -> datetime:
        """``when`` (naive: UTC) as a real datetime, not freezegun's fake: so the factory's
        stay real."""
        if when.tzinfo is not None:
            when = when.astimezone(UTC)
        return self._datetime(*when.timetuple()[:6], when.microsecond, tzinfo=UTC)
