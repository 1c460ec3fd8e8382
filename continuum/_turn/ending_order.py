"""The order the asyncio tasks of an async turn ended in: kept in the journal, replayed.

Live, each asyncio task of the turn that ends with a value or an error takes the next number,
kept in its entry (``ended``). On replay its steps answer at once, so the tasks would end in
the order they were made, and what ``gather`` raises (or ``asyncio.wait`` returns first) could
differ from what the live turn saw. So a replayed task that ended live waits until every task
that ended before it, and runs now, has ended again. A task that ends another way (a suspension,
a wait, a cancellation) lets the others go on, and an old record without the numbers orders
nothing.
"""

from __future__ import annotations

import asyncio

from continuum._record.model import EntryKind, JournalEntry, walk
from continuum._steps.control_flow import Abort
from continuum._steps.failures import error_info
from continuum._steps.turn_state import TurnState
from continuum.errors import NonDeterminismError


class EndingOrder:
    """The endings of one turn's asyncio tasks: the recorded places of those running now, the
    replayed ones holding their end, and the number the next live ending takes."""

    __slots__ = ("next", "running", "waiters")

    def __init__(self, journal: list[JournalEntry]) -> None:
        recorded = [
            entry.ended
            for entry in walk(journal)
            if entry.kind == EntryKind.CONTEXT and entry.ended is not None
        ]
        self.next = max(recorded) + 1 if recorded else 0
        #: the recorded places of the asyncio tasks made again and not over yet.
        self.running: set[int] = set()
        self.waiters: dict[int, asyncio.Future[None]] = {}

    def started(self, entry: JournalEntry) -> None:
        """``entry``'s asyncio task was made (again): one that ended live holds the others'."""
        if entry.ended is not None:
            self.running.add(entry.ended)

    async def ended(self, entry: JournalEntry, state: TurnState) -> None:
        """``entry``'s asyncio task ends now with a value or an error: number a live ending;
        hold a replayed one while a task that ended before it live runs (made again, and not
        over): only those made can end, so a task never waits for one that never comes.

        Raises:
            Abort: one that ended before it live is still running when the invocation must
                save: the code between steps is not deterministic.
        """
        mine = entry.ended
        if mine is None:
            entry.ended, self.next = self.next, self.next + 1
            return
        if min(self.running, default=mine) >= mine:
            return
        waiter = self.waiters[mine] = asyncio.get_running_loop().create_future()
        left = state.scope.budget.grace_s(state.scope.record.save_stats)
        try:
            async with asyncio.timeout(left):
                await waiter
        except TimeoutError:
            raise Abort(error_info(_out_of_order(state, entry), state.scope.record.turn)) from None
        finally:
            self.waiters.pop(mine, None)

    def drop(self, entry: JournalEntry) -> None:
        """``entry``'s asyncio task is over, whatever ended it: the next in order may end."""
        if entry.ended in self.running:
            self.running.discard(entry.ended)
            if self.running:
                waiter = self.waiters.get(min(self.running))
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)


def _out_of_order(state: TurnState, entry: JournalEntry) -> NonDeterminismError:
    return NonDeterminismError(
        f"turn {state.scope.record.turn} replayed asyncio task {entry.key!r} to its end, but an "
        "asyncio task that ended before it in the live turn did not end again",
        task_id=state.scope.record.task_id,
        step=entry.key,
        hint="code between steps must be deterministic: make the same asyncio tasks, and "
        "await the same things, on every replay",
    )
