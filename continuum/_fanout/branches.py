"""Fan-out inside one invocation: child contexts, and batches of branches or items in threads.

A **child context** is a named block: its steps and waits are journaled in its own journal,
under its entry in the turn's journal (keys stay deterministic: ``name#0/fetch#1``), and its
result is journaled as one unit. On replay a finished block returns its result without
running; an unfinished one runs again and replays what it recorded.

A **batch** (``ctx.parallel``, ``ctx.map``) runs each branch or item in its own child context,
at most ``max_concurrency`` at once, on threads of this invocation. Its entry holds one child
per started item, keyed by index, so keys do not depend on which thread finishes first. The
record is shared under the turn loop's lock; each item's user code runs outside it. When an
item cannot go on in this invocation (the budget, a wait), the others stop at their next
boundary and the task suspends or waits; on replay finished items return their results and
only the unfinished continue. A cancel request stops the batch and raises TaskCancelledError
where the batch was called.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from continuum._base.json_values import from_json, to_json
from continuum._define.steps import active_runner, return_adapter, running, stable_name
from continuum._record.model import EntryKind, ErrorInfo, JournalEntry
from continuum._record.waiting_for import Waiter
from continuum._steps.journal import Journal
from continuum.errors import ContinuumError


@dataclass(frozen=True)
class Branch:
    """One branch or item of a batch: ``fn(ctx, *args)``, named for ``ctx.parallel`` dicts."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    name: str | None = None


@dataclass
class Ended:
    """How an item's run in a thread ended."""

    value: Any = None
    error: ErrorInfo | None = None
    signal: BaseException | None = None
    waiters: list[Waiter] = field(default_factory=list)
    progress: bool = False


def child_runner(runner: Any, entries: list[JournalEntry], path: str, state: Any) -> Any:
    """A runner that shares ``runner``'s record, budget, saves and lock, and journals in
    ``entries`` (a child context's own journal), in the calling thread."""
    child = copy.copy(runner)
    child.journal = Journal(entries, task_id=runner.record.task_id, turn=runner.record.turn)
    child.path = path
    child.thread_id = threading.get_ident()
    child.active_key = child.active_cursor = None
    child.unwinding = child.refused = None
    child.ctx = type(runner.ctx)(child, state)  # a TaskContext (not imported: no cycle)
    return child


def adapter_of(fn: Callable[..., Any]) -> tuple[TypeAdapter[Any], bool]:
    return return_adapter(fn, what=f"child context {stable_name(fn)!r}")


def enter(runner: Any, label: str, kind: EntryKind) -> tuple[str, JournalEntry, bool]:
    """The entry of a block or batch at this point of the journal: (key, entry, done)."""
    runner.halt_check()
    runner.replay_cancel()
    key = runner.journal.key_for(label, None)
    entry = runner.journal.replay(label, key)
    if entry is not None:
        if entry.kind != kind:
            raise ContinuumError(
                f"turn {runner.record.turn} reached a {kind.value} where the journal recorded "
                f"a {entry.kind}",
                task_id=runner.record.task_id,
                step=key,
                hint="code between steps must be deterministic",
            )
        return key, entry, not entry.partial
    runner.boundary()
    entry = JournalEntry(key, label, kind=kind, partial=True, children=[])
    runner.journal.append(entry)
    runner.progress = True
    return key, entry, False


def run_in(child: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Run ``fn(child.ctx, *args)`` as ``child``'s code in this thread; check what it left."""
    token = active_runner.set(child)
    ident = threading.get_ident()
    outer = running.get(ident)
    running[ident] = child
    try:
        try:
            value = fn(child.ctx, *args)
        except Exception:
            child._check_unwinding()
            raise
        child._check_unwinding()
        with child.lock:
            child.journal.check_complete()
        return value
    finally:
        active_runner.reset(token)
        if outer is None:
            running.pop(ident, None)
        else:
            running[ident] = outer


def state_of(runner: Any) -> str:
    """The task's state as JSON, to tell whether a block or batch changed it."""
    state = runner.ctx.state
    dump = getattr(state, "model_dump_json", None)
    return str(dump()) if dump is not None else repr(state)


def check_state(runner: Any, before: str, what: str, key: str) -> None:
    """Refuse a change of ``ctx.state`` inside a block, branch or item: a finished one does
    not run on replay, so the change would be lost after a later suspension in the turn."""
    if state_of(runner) != before:
        raise ContinuumError(
            f"ctx.state changed inside {what} {key!r}: a finished one does not run again on "
            "replay, so the change would be lost",
            task_id=runner.record.task_id,
            step=key,
            hint="return what it computed, and change the state after it",
        )


def child_context(
    runner: Any, fn: Callable[..., Any], args: tuple[Any, ...], name: str | None
) -> Any:
    """``ctx.child_context``: run ``fn(child_ctx, *args)`` as a named, journaled block."""
    label = name or stable_name(fn)
    adapter, typed = adapter_of(fn)
    with runner.lock:
        key, entry, done = enter(runner, label, EntryKind.CONTEXT)
        if done:
            if not entry.ok:
                raise _error(entry.error, runner.record.task_id, key)
            return from_json(adapter, entry.result)
    assert entry.children is not None
    child = child_runner(runner, entry.children, f"{runner.path}{key}/", runner.ctx.state)
    before = state_of(runner)
    try:
        value = run_in(child, fn, args)
    except Exception:
        check_state(runner, before, "child context", key)
        raise
    finally:
        runner.progress = runner.progress or child.progress
    check_state(runner, before, "child context", key)
    with runner.lock:
        result = to_json(
            adapter,
            value,
            what=f"the result of child context {key!r}",
            task_id=runner.record.task_id,
            typed=typed,
        )
        entry.result, entry.partial, entry.children = result, False, None
    return from_json(adapter, result)


def type_of(exc: BaseException) -> str:
    from continuum.errors import StepError

    return exc.error_type if isinstance(exc, StepError) else type(exc).__name__


def _error(error: ErrorInfo | None, task_id: str, key: str) -> ContinuumError:
    from continuum.errors import StepError

    error = error or ErrorInfo(type="ContinuumError", message="the child context failed")
    return StepError(
        f"child context raised {error.type}: {error.message}",
        error_type=error.type,
        task_id=task_id,
        step=key,
    )
