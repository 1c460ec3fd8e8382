"""Fan-out inside one invocation: child contexts, and batches of branches or items in threads.

A **child context** is a named block: its steps and waits are journaled in its own journal,
under its entry in the turn's journal (keys stay deterministic: ``name#0/fetch#1``), and its
result is journaled as one unit. On replay a finished block returns its result without
running; an unfinished one runs again and replays what it recorded.

A **virtual** child context (``virtual=True``) keys its steps under its name alike, but has no
entry of its own: its steps journal in its parent's journal, in order, and its result is not
journaled, so on replay its code runs again and its steps replay.

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

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from continuum._base.clock import now_s
from continuum._base.json_values import from_json, to_json
from continuum._define.observers import Observers
from continuum._define.steps import return_adapter, stable_name
from continuum._record.model import EntryKind, ErrorInfo, JournalEntry
from continuum._record.waiting_for import Waiter
from continuum._steps.failures import traceback_of
from continuum._steps.turn_state import TurnState
from continuum.errors import ContinuumError

if TYPE_CHECKING:
    from continuum._fanout.parent_runner import ParentRunner


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
    unwinding: BaseException | None = None
    waiters: list[Waiter] = field(default_factory=list)
    progress: bool = False


def adapter_of(fn: Callable[..., Any]) -> tuple[TypeAdapter[Any], bool]:
    return return_adapter(fn, what=f"child context {stable_name(fn)!r}")


def enter(
    state: TurnState, label: str, kind: EntryKind, *, boundary: bool = True
) -> tuple[str, JournalEntry, bool]:
    """The entry of a block or batch at this point of the journal: (key, entry, done).
    ``boundary``: a cancel may be delivered here (an asyncio task's sees it at its own first
    step or wait, where its siblings are told of it)."""
    state.halt_check()
    state.replay_cancel()
    key = state.journal.key_for(label, None)
    entry = state.journal.replay(label, key)
    if entry is not None:
        if entry.kind != kind:
            raise ContinuumError(
                f"turn {state.scope.record.turn} reached a {kind.value} where the journal recorded "
                f"a {entry.kind}",
                task_id=state.scope.record.task_id,
                step=key,
                hint="code between steps must be deterministic",
            )
        return key, entry, not entry.partial
    now = state.boundary() if boundary else now_s()
    entry = JournalEntry(key, label, kind=kind, partial=True, children=[], since=now)
    state.append(entry)
    if state.scope.observers is not None:
        from continuum._define.events import ContextStarted

        event = ContextStarted(
            state.scope.record.task_id, kind.value, label, f"{state.path}{key}/", state.turn, now
        )
        state.emit("context_started", event)
    return key, entry, False


def context_ended(
    state: TurnState,
    kind: str,
    entry: JournalEntry,
    path: str,
    error: ErrorInfo | None = None,
    index: int | None = None,
    *,
    virtual: bool = False,
    replay: bool | None = None,
    outcome: str | None = None,
) -> None:
    """Tell the observers a child context, a batch or an item finished (``state``: the one it
    ran under; ``path``: where its own steps journal; ``outcome``: other than ``ok`` or
    ``failed``, an item its batch no longer needs: ``abandoned``)."""
    if state.scope.observers is None:
        return
    now = now_s()
    started = entry.since or now
    from continuum._define.events import ContextEnded

    event = ContextEnded(
        state.scope.record.task_id,
        kind,
        entry.name,
        path,
        state.turn,
        started,
        now,
        outcome or ("ok" if error is None else "failed"),
        error.message if error is not None else None,
        index,
        virtual,
        state.began_earlier(started) if replay is None else replay,
    )
    state.emit("context_ended", event)


def entered(
    state: TurnState,
    kind: str,
    name: str,
    path: str,
    *,
    replaying: bool,
    index: int | None = None,
) -> None:
    """Tell the observers a context's function begins a run (``state``: the one it runs
    under; ``replaying``: children it recorded before replay in this run)."""
    if state.scope.observers is None or not state.scope.observers.wants("context_entered"):
        return
    from continuum._define.events import ContextEntered

    event = ContextEntered(
        state.scope.record.task_id, kind, name, path, state.turn, now_s(), index, replaying
    )
    state.emit("context_entered", event)


def reached_here(state: TurnState, entry: JournalEntry) -> bool:
    """Whether ``entry`` was first reached in this invocation (not replayed from an earlier)."""
    run = state.scope.invocation
    return run is None or (entry.since or 0.0) >= run.started_at.timestamp()


def state_of(runner: ParentRunner) -> str:
    """The task's state as JSON, to tell whether a block or batch changed it."""
    state = runner.context.state
    dump = getattr(state, "model_dump_json", None)
    return str(dump()) if dump is not None else repr(state)


def check_state(runner: ParentRunner, before: str, what: str, key: str) -> None:
    """Refuse a change of ``ctx.state`` inside a block, branch or item: a finished one does
    not run on replay, so the change would be lost after a later suspension in the turn."""
    if state_of(runner) != before:
        raise ContinuumError(
            f"ctx.state changed inside {what} {key!r}: a finished one does not run again on "
            "replay, so the change would be lost",
            task_id=runner.task_id,
            step=key,
            hint="return what it computed, and change the state after it",
        )


def child_context(
    runner: ParentRunner, fn: Callable[..., Any], args: tuple[Any, ...], name: str | None
) -> Any:
    """``ctx.child_context``: run ``fn(child_ctx, *args)`` as a named, journaled block."""
    block = Block(runner, fn, name)
    if block.child is None:
        return block.recorded()
    try:
        value = block.child.run(fn, args)
    except Exception as exc:
        block.failed(exc)
        raise
    finally:
        block.progress()
    return block.finished(value)


async def child_context_async(
    runner: ParentRunner, fn: Callable[..., Any], args: tuple[Any, ...], name: str | None
) -> Any:
    """``ctx.child_context_async``: await ``fn(child_ctx, *args)`` as a named, journaled
    block, in the calling asyncio task."""
    block = Block(runner, fn, name)
    if block.child is None:
        return block.recorded()
    try:
        value = await block.child.run_awaited(called(fn, block.child.context, args))
    except Exception as exc:
        block.failed(exc)
        raise
    finally:
        block.progress()
    return block.finished(value)


def virtual_context(
    runner: ParentRunner, fn: Callable[..., Any], args: tuple[Any, ...], name: str | None
) -> Any:
    """``ctx.child_context(..., virtual=True)``: run ``fn(child_ctx, *args)`` with its steps
    keyed under its name and no entry of its own: on replay it runs again, its steps replay."""
    group = Group(runner, fn, name)
    try:
        value = group.child.run(fn, args)
    except Exception as exc:
        group.ended(exc)
        raise
    finally:
        group.progress()
    group.ended(None)
    return value


async def virtual_context_async(
    runner: ParentRunner, fn: Callable[..., Any], args: tuple[Any, ...], name: str | None
) -> Any:
    """``ctx.child_context_async(..., virtual=True)``: ``virtual_context`` awaited in the
    calling asyncio task."""
    group = Group(runner, fn, name)
    try:
        value = await group.child.run_awaited(called(fn, group.child.context, args))
    except Exception as exc:
        group.ended(exc)
        raise
    finally:
        group.progress()
    group.ended(None)
    return value


class Group:
    """A virtual child context at this point of the journal: a path for its steps' keys
    (``name#3/``, the ordinal its parent's next step would have) and its runner.

    It is told to the observers where the journal runs live, once: it starts when reached
    past the journal's end, told just before the first event inside it (a suspension before
    anything in it ran tells nothing, and the next invocation starts it again), and ends when
    it returns there; a replayed one that ended before is not told again."""

    def __init__(self, runner: ParentRunner, fn: Callable[..., Any], name: str | None) -> None:
        state = runner.state
        self.state = state
        label = name or stable_name(fn)
        with state.scope.lock:
            state.halt_check()
            state.replay_cancel()
            key = state.journal.key_for(label, None)
            #: reached over recorded steps: it began in an earlier invocation
            self.replayed = not state.journal.live
            # it keeps no entry: it began when the first of what it recorded did
            first = state.journal.peek()
            since = first.since if self.replayed and first is not None else None
            self.entry = JournalEntry(key, label, kind=EntryKind.CONTEXT, since=since or now_s())
            self.child = runner.virtual_child(f"{state.path}{key}/")
            entered(state, "context", label, self.child.state.path, replaying=self.replayed)
            self.start: StartFirst | None = None
            if state.scope.observers is not None:
                from continuum._define.events import ContextStarted

                event = None
                if not self.replayed:
                    event = ContextStarted(
                        state.scope.record.task_id,
                        EntryKind.CONTEXT.value,
                        label,
                        self.child.state.path,
                        state.turn,
                        self.entry.since or 0.0,
                        virtual=True,
                    )
                self.start = StartFirst(state.scope.observers, event)
                self.child.state.scope.observers = self.start

    def progress(self) -> None:
        self.state.progress = self.state.progress or self.child.state.progress

    def ended(self, exc: Exception | None) -> None:
        state, start = self.state, self.start
        if state.scope.observers is None or start is None:
            return
        # A journal live at its end says nothing: an asyncio task's own journal ends with it.
        if self.replayed and not start.told:
            return  # nothing inside ran live here: it ended, and was told, before
        start.flush()
        failure = None if exc is None else ErrorInfo(type=type_of(exc), message=str(exc)[:2000])
        path = self.child.state.path
        context_ended(
            state, "context", self.entry, path, failure, virtual=True, replay=self.replayed
        )


class StartFirst(Observers):
    """The observers of a virtual context's code: its start (None: told before) is told
    before the first event inside it, or before its end; ``told``: an event inside it was."""

    def __init__(self, then: Observers, started: Any) -> None:
        super().__init__(then=then)
        self.started: Any = started
        self.told = False

    def flush(self) -> None:
        started, self.started = self.started, None
        if started is not None:
            super().emit("context_started", started)

    def emit(self, event_name: str, event: Any) -> None:
        self.told = True
        self.flush()
        super().emit(event_name, event)


async def called(fn: Callable[..., Any], ctx: Any, args: tuple[Any, ...]) -> Any:
    """``fn(ctx, *args)``, awaited if it returns an awaitable. Called only when awaited, so a
    plain ``def`` runs where the child's runner is active and its steps journal in the child."""
    value = fn(ctx, *args)
    if inspect.isawaitable(value):
        return await value
    return value


class Block:
    """A child context's entry at this point of the journal, and its child runner (None when
    the journal recorded it finished)."""

    def __init__(self, runner: ParentRunner, fn: Callable[..., Any], name: str | None) -> None:
        state = runner.state
        self.runner, self.state = runner, state
        self.adapter, self.typed = adapter_of(fn)
        with state.scope.lock:
            self.key, self.entry, done = enter(state, name or stable_name(fn), EntryKind.CONTEXT)
        self.child: ParentRunner | None = None
        if not done:
            assert self.entry.children is not None
            path = f"{state.path}{self.key}/"
            replaying = bool(self.entry.children)
            self.child = runner.child(self.entry.children, path)
            with state.scope.lock:
                entered(state, "context", self.entry.name, path, replaying=replaying)
            self.before = state_of(runner)

    def recorded(self) -> Any:
        """The finished block's journaled result (raised, if it failed)."""
        if not self.entry.ok:
            raise _error(self.entry.error, self.state.scope.record.task_id, self.key)
        return from_json(self.adapter, self.entry.result)

    def failed(self, exc: Exception) -> None:
        assert self.child is not None
        check_state(self.runner, self.before, "child context", self.key)
        failure = ErrorInfo(
            type=type_of(exc),
            message=str(exc)[:2000],
            step=exc.step if isinstance(exc, ContinuumError) else None,
            traceback=traceback_of(exc),
        )
        context_ended(self.state, "context", self.entry, self.child.state.path, failure)

    def progress(self) -> None:
        assert self.child is not None
        self.state.progress = self.state.progress or self.child.state.progress

    def finished(self, value: Any) -> Any:
        """Journal the block's value as its result; return it as a replay rebuilds it."""
        assert self.child is not None
        check_state(self.runner, self.before, "child context", self.key)
        state, entry = self.state, self.entry
        with state.scope.lock:
            result = to_json(
                self.adapter,
                value,
                what=f"the result of child context {self.key!r}",
                task_id=state.scope.record.task_id,
                typed=self.typed,
            )
            entry.result, entry.partial, entry.children = result, False, None
            context_ended(state, "context", entry, self.child.state.path)
        return from_json(self.adapter, result)


def type_of(exc: BaseException) -> str:
    from continuum.errors import StepError

    return exc.error_type if isinstance(exc, StepError) else type(exc).__name__


def _error(error: ErrorInfo | None, task_id: str, key: str) -> ContinuumError:
    from continuum.errors import StepError

    error = error or ErrorInfo(type="ContinuumError", message="the child context failed")
    return StepError(
        f"child context raised {error.type}: {error.message}",
        error_type=error.type,
        step_traceback=error.traceback,
        task_id=task_id,
        step=error.step or key,
    )
