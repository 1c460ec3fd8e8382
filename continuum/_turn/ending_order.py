"""The order the asyncio tasks of an async turn ended in: kept in the journal, replayed.

Live, each asyncio task of the turn that ends with a value or an error takes the next number,
kept in its entry (``ended``). On replay its steps answer at once, so the tasks would end in
the order they were made, and what ``gather`` raises (or ``asyncio.wait`` returns first) could
differ from what the live turn saw. So a replayed task that ended before waits until those that
ended before it have ended again. A task that ends another way (a suspension, a wait, a
cancellation) lets the others go on, and an old record without the numbers orders nothing.
"""

from __future__ import annotations

import asyncio

from continuum._fanout.context_runner import error_info
from continuum._record.model import EntryKind, JournalEntry, walk
from continuum._steps.signals import Abort
from continuum._steps.turn_state import TurnState
from continuum.errors import NonDeterminismError


class EndingOrder:
    """The endings of one turn's asyncio tasks: those recorded and not yet replayed, in order,
    and the number the next live ending takes."""

    __slots__ = ("next", "pending", "waiters")

    def __init__(self, journal: list[JournalEntry]) -> None:
        recorded = sorted(
            entry.ended
            for entry in walk(journal)
            if entry.kind == EntryKind.CONTEXT and entry.ended is not None
        )
        self.pending: list[int] = recorded
        self.next = recorded[-1] + 1 if recorded else 0
        self.waiters: dict[int, asyncio.Future[None]] = {}

    async def ended(self, entry: JournalEntry, state: TurnState) -> None:
        """``entry``'s asyncio task ends now with a value or an error: number a live ending;
        hold a replayed one until those recorded before it have ended again.

        Raises:
            Abort: one that ended before it live is still not back when the invocation must
                save: the code between steps is not deterministic.
        """
        mine = entry.ended
        if mine is None:
            entry.ended, self.next = self.next, self.next + 1
            return
        if mine not in self.pending or self.pending[0] == mine:
            return
        waiter = self.waiters[mine] = asyncio.get_running_loop().create_future()
        budget, record = state.budget, state.record
        left = budget.remaining() - budget.save_cost(record.save_stats) - budget.margin_s
        try:
            async with asyncio.timeout(max(left, 0.0)):
                await waiter
        except TimeoutError:
            raise Abort(error_info(_out_of_order(state, entry), record.turn)) from None
        finally:
            self.waiters.pop(mine, None)

    def drop(self, entry: JournalEntry) -> None:
        """``entry``'s asyncio task is over, whatever ended it: the next in order may end."""
        if entry.ended in self.pending:
            self.pending.remove(entry.ended)
            if self.pending:
                waiter = self.waiters.get(self.pending[0])
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)


def _out_of_order(state: TurnState, entry: JournalEntry) -> NonDeterminismError:
    return NonDeterminismError(
        f"turn {state.record.turn} replayed asyncio task {entry.key!r} to its end, but an "
        "asyncio task that ended before it in the live turn did not end again",
        task_id=state.record.task_id,
        step=entry.key,
        hint="code between steps must be deterministic: make the same asyncio tasks, and "
        "await the same things, on every replay",
    )
