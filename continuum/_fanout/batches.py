"""Batches: ``ctx.parallel`` and ``ctx.map``, branches or items in threads of one invocation.

Each branch or item runs in its own child context (``branches.py``), at most
``max_concurrency`` at once. The batch's journal entry holds one child per started item,
keyed by its index, so keys do not depend on which thread finishes first. When an item cannot
go on in this invocation (the budget, a wait), the others stop at their next boundary and the
task suspends or waits; on replay finished items return their results and only the unfinished
continue. A cancel request stops the batch and raises TaskCancelledError where it was called.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from continuum._base.clock import now_s
from continuum._base.json_values import from_json, to_json
from continuum._define.completion import (
    BatchResult,
    Completion,
    CompletionReason,
    Item,
    check_concurrency,
)
from continuum._fanout.branches import (
    Branch,
    Ended,
    adapter_of,
    called,
    check_state,
    context_ended,
    enter,
    entered,
    state_of,
)
from continuum._record.model import EntryKind, ErrorInfo, JournalEntry
from continuum._record.waiting_for import Waiter
from continuum._steps.control_flow import Abort, ControlFlow, Fenced, Suspend, Wait
from continuum._steps.failures import error_info
from continuum._steps.turn_state import Halt
from continuum._waits.kinds.registry import TURN_WAITS
from continuum._waits.wait_calls import wait_ended
from continuum.errors import ContinuumError, TaskCancelledError

if TYPE_CHECKING:
    from continuum._fanout.parent_runner import ParentRunner

#: The most threads one batch runs at once when ``max_concurrency`` does not say.
DEFAULT_BATCH_THREADS = 32


def run_batch(
    runner: ParentRunner,
    branches: Sequence[Branch],
    *,
    label: str,
    max_concurrency: int | None,
    completion: Completion | None,
) -> BatchResult:
    """``ctx.parallel`` and ``ctx.map``: run the branches as a batch (module docstring)."""
    limit = check_concurrency(max_concurrency, task_id=runner.task_id)
    adapters = [adapter_of(b.fn) for b in branches]
    with runner.state.scope.lock:
        key, entry, done = enter(runner.state, label, EntryKind.BATCH)
        if done:
            return _rebuilt(entry.result, adapters)
    assert entry.children is not None
    batch = _Batch(runner, entry, key, branches, adapters, limit, completion)
    try:
        return batch.run()
    finally:
        batch.halt.detach()


async def run_batch_async(
    runner: ParentRunner,
    branches: Sequence[Branch],
    *,
    label: str,
    max_concurrency: int | None,
    completion: Completion | None,
) -> BatchResult:
    """``ctx.parallel_async`` and ``ctx.map_async``: the branches as a batch of asyncio tasks
    on the invocation's loop (each awaited if it is ``async def``), journaled as a batch of
    threads is."""
    limit = check_concurrency(max_concurrency, task_id=runner.task_id)
    adapters = [adapter_of(b.fn) for b in branches]
    with runner.state.scope.lock:
        key, entry, done = enter(runner.state, label, EntryKind.BATCH)
        if done:
            return _rebuilt(entry.result, adapters)
    assert entry.children is not None
    batch = _Batch(runner, entry, key, branches, adapters, limit, completion)
    try:
        return await batch.run_async()
    finally:
        batch.halt.detach()


class _Batch:
    """One batch's run: its items on threads, and what their endings make of it."""

    def __init__(
        self,
        runner: ParentRunner,
        entry: JournalEntry,
        key: str,
        branches: Sequence[Branch],
        adapters: list[tuple[TypeAdapter[Any], bool]],
        limit: int | None,
        completion: Completion | None,
    ) -> None:
        self.runner, self.entry, self.key = runner, entry, key
        self.branches, self.adapters = branches, adapters
        self.limit, self.completion = limit, completion
        # A cancel delivered under it reaches the asyncio tasks of the turn too, and back.
        self.halt = Halt(outer=runner.state.halt)
        self.state_before = state_of(runner)
        assert entry.children is not None
        self.children = {int(c.key): c for c in entry.children}
        self.items: dict[int, Item] = {
            i: _item(c, branches[i].name) for i, c in self.children.items() if not c.partial
        }

    def run(self) -> BatchResult:
        n = len(self.branches)
        threads = min(self.limit or DEFAULT_BATCH_THREADS, max(1, n))
        pending: dict[Future[Ended], int] = {}
        ends = _Ends()
        reason = self._verdict()
        upcoming = iter(i for i in range(n) if i not in self.items)
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="continuum-batch") as pool:
            while True:
                while reason is None and not self.halt.is_set() and len(pending) < threads:
                    index = next(upcoming, None)
                    if index is None:
                        break
                    pending[pool.submit(self._item_thread, index)] = index
                if not pending:
                    break
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    self._took(pending.pop(future), future.result(), ends)
                reason = self._verdict()
        return self._outcome(ends.raised, ends.waiters, reason)

    async def run_async(self) -> BatchResult:
        n = len(self.branches)
        at_once = min(self.limit or n, max(1, n))
        loop = asyncio.get_running_loop()
        pending: dict[asyncio.Task[Ended], int] = {}
        ends = _Ends()
        reason = self._verdict()
        upcoming = iter(i for i in range(n) if i not in self.items)
        while True:
            while reason is None and not self.halt.is_set() and len(pending) < at_once:
                index = next(upcoming, None)
                if index is None:
                    break
                # Made directly, not by the loop's task factory: an item journals in the
                # batch's entry, not as an asyncio task of its caller.
                task = asyncio.Task(self._item_task(index), loop=loop)
                pending[task] = index
            if not pending:
                break
            finished, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                self._took(pending.pop(task), task.result(), ends)
            reason = self._verdict()
        return self._outcome(ends.raised, ends.waiters, reason)

    def _took(self, index: int, ended: Ended, ends: _Ends) -> None:
        """An item ended: keep its result, or what stops the batch."""
        state = self.runner.state
        state.progress = state.progress or ended.progress
        if ended.unwinding is None:
            self._finish(index, ended)
            return
        ends.raised.append(ended.unwinding)
        if not isinstance(ended.unwinding, Wait):
            self.halt.stop(str(ended.unwinding))
        ends.waiters.extend(ended.waiters)

    def _item_thread(self, index: int) -> Ended:
        child, branch = self._item_runner(index), self.branches[index]
        try:
            value = child.run(branch.fn, branch.args)
        except (ControlFlow, Exception) as exc:
            return self._ended_by(exc, child)
        return Ended(value=value, progress=True)

    async def _item_task(self, index: int) -> Ended:
        child, branch = self._item_runner(index), self.branches[index]
        task = asyncio.current_task()
        assert task is not None
        self.halt.tasks[task] = child.state
        try:
            value = await child.run_awaited(called(branch.fn, child.context, branch.args))
        except (ControlFlow, Exception) as exc:
            return self._ended_by(exc, child)
        return Ended(value=value, progress=True)

    def _item_runner(self, index: int) -> ParentRunner:
        """The child runner of item ``index``, in its entry of the batch (made now if new)."""
        runner, branch = self.runner, self.branches[index]
        state = runner.state
        path = f"{state.path}{self.key}/{index}/"
        with state.scope.lock:
            entry = self.children.get(index)
            replaying = entry is not None and bool(entry.children)
            if entry is None:
                entry = JournalEntry(str(index), branch.name or "item", kind=EntryKind.CONTEXT)
                entry.partial, entry.children, entry.since = True, [], now_s()
                assert self.entry.children is not None
                self.entry.children.append(entry)
                self.children[index] = entry
                if state.scope.observers is not None:
                    task_id, turn = state.scope.record.task_id, state.turn
                    from continuum._define.events import ContextStarted

                    event = ContextStarted(
                        task_id, "item", entry.name, path, turn, entry.since, index
                    )
                    state.emit("context_started", event)
            entered(state, "item", entry.name, path, replaying=replaying, index=index)
        assert entry.children is not None
        return runner.child(entry.children, path, self.halt)

    def _ended_by(self, exc: BaseException, child: ParentRunner) -> Ended:
        """How an item that raised ``exc`` ended."""
        if isinstance(exc, Wait):
            return Ended(unwinding=exc, waiters=list(exc.waiters), progress=child.state.progress)
        if isinstance(exc, TaskCancelledError):
            self.halt.stop("the task was cancelled", cancelled=True)
            return Ended(unwinding=exc, progress=True)
        if isinstance(exc, ControlFlow):
            return Ended(unwinding=exc, progress=child.state.progress)
        error = error_info(exc, self.runner.state.scope.record.turn)
        error.message = error.message[:2000]
        return Ended(error=error, progress=True)

    def _finish(self, index: int, ended: Ended) -> None:
        entry, (adapter, typed) = self.children[index], self.adapters[index]
        with self.runner.state.scope.lock:
            if ended.error is None:
                try:
                    entry.result = to_json(
                        adapter,
                        ended.value,
                        what=f"the result of item {index} of {self.key!r}",
                        task_id=self.runner.task_id,
                        typed=typed,
                    )
                except ContinuumError as exc:
                    ended.error = ErrorInfo(type=type(exc).__name__, message=exc.message)
            if ended.error is not None:
                entry.ok, entry.error, entry.result = False, ended.error, None
            entry.partial, entry.children = False, None
            state = self.runner.state
            path = f"{state.path}{self.key}/{index}/"
            context_ended(state, "item", entry, path, ended.error, index)
        self.items[index] = _item(entry, self.branches[index].name)

    def _abandon(self) -> None:
        """The policy decided: tell the observers that each item started and not finished,
        and each wait it was in, ended unneeded (``abandoned``)."""
        state = self.runner.state
        if state.scope.observers is None:
            return
        for index, entry in sorted(self.children.items()):
            if not entry.partial or entry.children is None:
                continue
            path = f"{state.path}{self.key}/{index}/"
            item = self.runner.child(entry.children, path, self.halt).state
            for inner in entry.children:
                if inner.partial and inner.kind in TURN_WAITS:
                    state.emit("wait_ended", wait_ended(item, inner, 0.0, outcome="abandoned"))
            context_ended(state, "item", entry, path, None, index, outcome="abandoned")

    def _verdict(self) -> CompletionReason | None:
        if self.completion is None:
            return None
        succeeded = sum(item.status == "succeeded" for item in self.items.values())
        failed = len(self.items) - succeeded
        return self.completion.verdict(succeeded=succeeded, failed=failed, total=len(self.branches))

    def _outcome(
        self, raised: list[BaseException], waiters: list[Waiter], reason: CompletionReason | None
    ) -> BatchResult:
        state = self.runner.state
        for kind in (Fenced, Abort):
            for unwinding in raised:
                if isinstance(unwinding, kind):
                    raise state.unwind(unwinding)
        check_state(self.runner, self.state_before, "a branch or item of batch", self.key)
        if any(isinstance(s, TaskCancelledError) for s in raised):
            raise state.cancelled_error()
        if reason is not None:
            # The policy decided: an item still waiting or cut short is not needed.
            raised, waiters = [], []
            self._abandon()
        suspends = [s for s in raised if isinstance(s, Suspend) and "another branch" not in str(s)]
        if suspends or any(isinstance(s, Suspend) for s in raised):
            first = suspends[0] if suspends else raised[0]
            assert isinstance(first, Suspend)
            raise state.unwind(Suspend(first.reason, delay_s=first.delay_s))
        if waiters:
            raise state.unwind(Wait(waiters, f"{len(waiters)} waits in batch {self.key!r}"))
        result = BatchResult(
            items=[self.items[i] for i in sorted(self.items)],
            completion_reason=reason or "all_completed",
            given=len(self.branches),
        )
        with state.scope.lock:
            self.entry.result = result.model_dump(mode="json")
            self.entry.partial, self.entry.children = False, None
            context_ended(state, "batch", self.entry, f"{state.path}{self.key}/")
        return _rebuilt(self.entry.result, self.adapters)


class _Ends:
    """What stopped the items of a batch that did not finish: control-flow exceptions, and waits."""

    __slots__ = ("raised", "waiters")

    def __init__(self) -> None:
        self.raised: list[BaseException] = []
        self.waiters: list[Waiter] = []


def _item(entry: JournalEntry, name: str | None) -> Item:
    if entry.ok:
        return Item(index=int(entry.key), status="succeeded", result=entry.result, name=name)
    return Item(index=int(entry.key), status="failed", error=entry.error, name=name)


def _rebuilt(stored: Any, adapters: list[tuple[TypeAdapter[Any], bool]]) -> BatchResult:
    """A batch's result from its journaled JSON, each result the type its function returns."""
    result = BatchResult.model_validate(stored)
    for item in result.items:
        if item.status == "succeeded" and item.index < len(adapters):
            item.result = from_json(adapters[item.index][0], item.result)
    return result
