"""Batches: ``ctx.parallel`` and ``ctx.map``, branches or items in threads of one invocation.

Each branch or item runs in its own child context (``branches.py``), at most
``max_concurrency`` at once. The batch's journal entry holds one child per started item,
keyed by its index, so keys do not depend on which thread finishes first. When an item cannot
go on in this invocation (the budget, a wait), the others stop at their next boundary and the
task suspends or waits; on replay finished items return their results and only the unfinished
continue. A cancel request stops the batch and raises TaskCancelledError where it was called.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

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
    check_state,
    context_ended,
    enter,
    state_of,
    type_of,
)
from continuum._fanout.context_runner import ContextRunner
from continuum._record.model import EntryKind, ErrorInfo, JournalEntry
from continuum._record.waiting_for import Waiter
from continuum._steps.signals import Abort, ControlFlow, Fenced, Suspend, Wait
from continuum._steps.turn_state import Halt
from continuum.errors import ContinuumError, TaskCancelledError

#: The most threads one batch runs at once when ``max_concurrency`` does not say.
DEFAULT_BATCH_THREADS = 32


def run_batch(
    runner: ContextRunner,
    branches: Sequence[Branch],
    *,
    label: str,
    max_concurrency: int | None,
    completion: Completion | None,
) -> BatchResult:
    """``ctx.parallel`` and ``ctx.map``: run the branches as a batch (module docstring)."""
    limit = check_concurrency(max_concurrency, task_id=runner.task_id)
    adapters = [adapter_of(b.fn) for b in branches]
    with runner.state.lock:
        key, entry, done = enter(runner.state, label, EntryKind.BATCH)
        if done:
            return _rebuilt(entry.result, adapters)
    assert entry.children is not None
    batch = _Batch(runner, entry, key, branches, adapters, limit, completion)
    return batch.run()


class _Batch:
    """One batch's run: its items on threads, and what their endings make of it."""

    def __init__(
        self,
        runner: ContextRunner,
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
        self.halt = Halt()
        self.state_before = state_of(runner)
        assert entry.children is not None
        self.children = {int(c.key): c for c in entry.children}
        self.items: dict[int, Item] = {
            i: _item(c, branches[i].name) for i, c in self.children.items() if not c.partial
        }

    def run(self) -> BatchResult:
        state, n = self.runner.state, len(self.branches)
        threads = min(self.limit or DEFAULT_BATCH_THREADS, max(1, n))
        pending: dict[Future[Ended], int] = {}
        signals: list[BaseException] = []
        waiters: list[Waiter] = []
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
                    index = pending.pop(future)
                    ended = future.result()
                    state.progress = state.progress or ended.progress
                    if ended.signal is not None:
                        signals.append(ended.signal)
                        if not isinstance(ended.signal, Wait):
                            self.halt.stop(str(ended.signal))
                        waiters.extend(ended.waiters)
                        continue
                    self._finish(index, ended)
                reason = self._verdict()
        return self._outcome(signals, waiters, reason)

    def _item_thread(self, index: int) -> Ended:
        runner, branch = self.runner, self.branches[index]
        state = runner.state
        with state.lock:
            entry = self.children.get(index)
            if entry is None:
                entry = JournalEntry(str(index), branch.name or "item", kind=EntryKind.CONTEXT)
                entry.partial, entry.children, entry.since = True, [], now_s()
                assert self.entry.children is not None
                self.entry.children.append(entry)
                self.children[index] = entry
                if state.observers is not None:
                    path = f"{state.path}{self.key}/{index}/"
                    task_id, turn = state.record.task_id, state.turn
                    from continuum._define.events import ContextStarted

                    event = ContextStarted(
                        task_id, "item", entry.name, path, turn, entry.since, index
                    )
                    state.emit("context_started", event)
        assert entry.children is not None
        child = runner.child(entry.children, f"{state.path}{self.key}/{index}/", self.halt)
        try:
            value = child.run(branch.fn, branch.args)
        except Wait as signal:
            return Ended(signal=signal, waiters=list(signal.waiters), progress=child.state.progress)
        except TaskCancelledError as exc:
            self.halt.stop("the task was cancelled", cancelled=True)
            return Ended(signal=exc, progress=True)
        except ControlFlow as signal:
            return Ended(signal=signal, progress=child.state.progress)
        except Exception as exc:
            message = exc.message if isinstance(exc, ContinuumError) else str(exc)
            error = ErrorInfo(type=type_of(exc), message=message[:2000], turn=state.record.turn)
            return Ended(error=error, progress=True)
        return Ended(value=value, progress=True)

    def _finish(self, index: int, ended: Ended) -> None:
        entry, (adapter, typed) = self.children[index], self.adapters[index]
        with self.runner.state.lock:
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

    def _verdict(self) -> CompletionReason | None:
        if self.completion is None:
            return None
        succeeded = sum(item.status == "succeeded" for item in self.items.values())
        failed = len(self.items) - succeeded
        return self.completion.verdict(succeeded=succeeded, failed=failed, total=len(self.branches))

    def _outcome(
        self, signals: list[BaseException], waiters: list[Waiter], reason: CompletionReason | None
    ) -> BatchResult:
        state = self.runner.state
        for kind in (Fenced, Abort):
            for signal in signals:
                if isinstance(signal, kind):
                    raise state.unwind(signal)
        check_state(self.runner, self.state_before, "a branch or item of batch", self.key)
        if any(isinstance(s, TaskCancelledError) for s in signals):
            raise state.cancelled_error()
        if reason is not None:
            # The policy decided: an item still waiting or cut short is not needed.
            signals, waiters = [], []
        suspends = [s for s in signals if isinstance(s, Suspend) and "another branch" not in str(s)]
        if suspends or any(isinstance(s, Suspend) for s in signals):
            first = suspends[0] if suspends else signals[0]
            assert isinstance(first, Suspend)
            raise state.unwind(Suspend(first.reason, delay_s=first.delay_s))
        if waiters:
            raise state.unwind(Wait(waiters, f"{len(waiters)} waits in batch {self.key!r}"))
        result = BatchResult(
            items=[self.items[i] for i in sorted(self.items)],
            completion_reason=reason or "all_completed",
            given=len(self.branches),
        )
        with state.lock:
            self.entry.result = result.model_dump(mode="json")
            self.entry.partial, self.entry.children = False, None
            context_ended(state, "batch", self.entry, f"{state.path}{self.key}/")
        return _rebuilt(self.entry.result, self.adapters)


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
