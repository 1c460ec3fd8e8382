"""Child tasks: ``ctx.invoke`` and ``ctx.map_tasks``, and how a child reports to its parent.

The parent's side (in a turn): the call's journal entry (kind ``children``) names the child
ids' prefix; the children are created once (their ids derive from the entry, so a replay
finds them: If-None-Match makes a second create a no-op) and started; then the parent takes
the children's reports from its inbox, or waits for them, as it waits for a callback. For
``map_tasks`` every child record is created at once, pending, and the first
``max_concurrency`` are started; each finished child starts the next (``child_tasks.py``).

The child's side (at its end, and again for any message that finds it finished): write its
report to the parent's inbox, wake the parent, start its successor. Each is idempotent, so a
worker that dies anywhere in between leaves the next delivery to finish the job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from continuum._base.clock import now_s
from continuum._base.threads import in_parallel
from continuum._base.trace_ids import task_trace_id, traceparent, wait_span_id
from continuum._define.completion import BatchResult, Completion, Item, check_concurrency
from continuum._fanout.adoption import mark_taken, pass_over_taken, running_again
from continuum._fanout.child_tasks import (
    CHILD_THREADS,
    ChildTasks,
    child_id,
    paused_when_refused,
)
from continuum._record.inbox_items import ChildReport
from continuum._record.model import EntryKind, ErrorInfo, JournalEntry, check_task_id
from continuum._record.waiting_for import (
    ChildBatch,
    Duration,
    ParentLink,
    Waiter,
    check_name,
    epoch_to_datetime,
    seconds_of,
)
from continuum._steps.control_flow import Wait
from continuum._steps.turn_state import TurnState
from continuum._waits.kinds.child_wait import CHILD, batch_counts, decisive
from continuum.errors import (
    ChildTaskError,
    ConfigurationError,
    ContinuumError,
    TaskCancelledError,
)

if TYPE_CHECKING:
    from continuum._fanout.parent_runner import ParentRunner

#: Child records created at once by ``map_tasks`` before the budget is checked again.
CREATE_CHUNK = 50


def _starter(runner: ParentRunner) -> ChildTasks:
    starter = runner.children
    if starter is None:
        raise ConfigurationError(
            "child tasks need a worker (ctx.invoke and ctx.map_tasks run in app.handler)",
            task_id=runner.task_id,
        )
    return starter


def _enter(state: TurnState, label: str) -> tuple[str, JournalEntry | None]:
    state.halt_check()
    state.replay_cancel()
    key = state.journal.key_for(label, None)
    entry = state.journal.replay(label, key)
    if entry is not None and entry.kind != EntryKind.CHILDREN:
        raise ContinuumError(
            f"turn {state.scope.record.turn} reached child tasks where the journal recorded a "
            f"{entry.kind}",
            task_id=state.scope.record.task_id,
            step=key,
        )
    if entry is None or entry.partial:
        # Re-entering the unfinished batch: a cancel delivered here takes its place in the
        # journal, so a replay after a suspension delivers it again (the ids stay in
        # record.children, for the cancel of the children).
        try:
            now = state.boundary(reopen=entry is not None)
        except TaskCancelledError:
            if entry is not None:  # the cancel takes the unanswered wait's place: it ends here
                _ended(state, entry, outcome="cancelled")
            raise
        if entry is None and state.scope.observers is not None:
            from continuum._define.events import WaitStarted

            event = WaitStarted(
                state.scope.record.task_id, "children", label, state.path + key, state.turn, now
            )
            state.emit("wait_started", event)
    return key, entry


def _ended(state: TurnState, entry: JournalEntry, *, outcome: str | None = None) -> None:
    """Tell the observers the children's wait at ``entry`` was answered (or ended by
    ``outcome``)."""
    if state.scope.observers is None:
        return
    now = now_s()
    error = entry.error
    if outcome is None:
        outcome = "ok" if entry.ok else "timeout" if error and "Timeout" in error.type else "failed"
    from continuum._define.events import WaitEnded

    started = entry.since or now
    event = WaitEnded(
        state.scope.record.task_id,
        "children",
        entry.name,
        state.path + entry.key,
        state.turn,
        started,
        now,
        outcome,
        error.message if error is not None else None,
        state.began_earlier(started),
    )
    state.emit("wait_ended", event)


def _traceparent(state: TurnState, key: str, since: float | None) -> str:
    """The trace context a child task started at ``key`` hangs under: the span of this wait,
    in the parent's trace."""
    record, stack = state.scope.record, state.scope.inbox.stack
    trace = task_trace_id(stack, record.task_id, record.traceparent if record.parent else None)
    span = wait_span_id(
        stack, record.task_id, record.turn, state.path + key, since, record.counters.retries
    )
    return traceparent(trace, span)


def _name_before_creating(state: TurnState, entry: JournalEntry, batch: ChildBatch) -> None:
    """Journal the children's call and name them in the record, and save it, before any child
    is created: a worker that dies after creating one leaves a record that knows of it, so a
    cancel of the parent reaches it (else a replay that met the cancel before this call, at a
    step its dead worker had not saved, ended the parent with its children waiting for ever).
    """
    state.journal.append(entry)
    state.scope.record.children.append(batch)
    state.progress = True
    state.scope.save_strict()


def _reports(state: TurnState, prefix: str) -> dict[str, str]:
    """child id -> status of the batch's reports in the parent's inbox (listed afresh)."""
    if now_s() - state.scope.inbox.listed_at > 1.0:
        state.note_inbox()
    return batch_counts(state.scope.inbox.listing.keys, prefix)


def _read_reports(state: TurnState, found: dict[str, str]) -> list[ChildReport]:
    inbox = state.scope.inbox

    def read(item: tuple[str, str]) -> ChildReport | None:
        child, status = item
        report: ChildReport | None = inbox.read(f"children/{child}/{status}.json", ChildReport)
        return report

    found_items = sorted(found.items())
    reports = [r for r in in_parallel(read, found_items, threads=CHILD_THREADS) if r is not None]
    return sorted(reports, key=lambda r: r.index)


def invoke(
    runner: ParentRunner, task_name: str, input: Any, name: str | None, timeout: Duration | None
) -> Any:
    """``ctx.invoke``: run ``task_name`` as a child task and return its result."""
    state = runner.state
    task_id = state.scope.record.task_id
    label = check_name(name or f"invoke.{task_name}", what="invoke name", task_id=task_id)
    timeout_s = seconds_of(timeout, what="timeout", task_id=task_id)
    with state.scope.lock:
        key, entry = _enter(state, label)
        if entry is None:
            cid = child_id(
                task_id, turn=state.scope.record.turn, path=state.path, key=key, index=None
            )
            deadline = now_s() + timeout_s if timeout_s is not None else None
            entry = JournalEntry(
                key,
                label,
                kind=EntryKind.CHILDREN,
                ref=cid,
                partial=True,
                deadline=deadline,
                since=now_s(),
            )
            _name_before_creating(state, entry, ChildBatch(prefix=cid, task_name=task_name))
        if not entry.partial:
            return _outcome(entry, task_id)
        cid = str(entry.ref)
        if not (entry.cursor or {}).get("started"):
            # Until it is saved as started, a replay (after an error, a Suspend or a death)
            # creates and starts it again: a no-op, a fenced duplicate.
            starter = _starter(runner)
            link = ParentLink(task_id=task_id, batch=cid)
            with paused_when_refused(state, entry):
                if not starter.create(
                    task_name, input, cid, link, _traceparent(state, key, entry.since)
                ):
                    mark_taken(state, cid, [cid])
                    error = starter.report_taken(link, cid)  # refused: the call stays open
                    entry.ok, entry.partial, entry.cursor = False, False, None
                    entry.error = error
                    state.progress = True
                    _ended(state, entry)
                    return _outcome(entry, task_id)
                starter.start(cid)
            entry.cursor = {"started": True}
        found = running_again(state, _starter(runner), _reports(state, cid), task_id)
        if cid in found:
            [report] = _read_reports(state, {cid: found[cid]})
            entry.ok = report.status == "succeeded"
            entry.result, entry.error = report.result, report.error
            if report.status == "cancelled" and entry.error is None:
                entry.error = ErrorInfo(
                    type="TaskCancelledError", message="the child was cancelled"
                )
            entry.partial, entry.cursor = False, None
            state.progress = True
            _ended(state, entry)
            return _outcome(entry, task_id)
        if entry.deadline is not None and now_s() >= entry.deadline:
            _starter(runner).cancel([cid], f"its parent {task_id} stopped waiting for it")
            entry.ok, entry.partial, entry.cursor = False, False, None
            entry.error = ErrorInfo(
                type="ChildTaskTimeout", message=f"child task {cid} did not finish in time"
            )
            _ended(state, entry)
            return _outcome(entry, task_id)
        waiter = Waiter(
            kind=CHILD.kind, name=label, id=cid, deadline=epoch_to_datetime(entry.deadline)
        )
        raise state.unwind(Wait([waiter], f"waiting for child task {cid}"))


def _outcome(entry: JournalEntry, task_id: str) -> Any:
    if entry.ok:
        return entry.result
    error = entry.error or ErrorInfo(type="ChildTaskError", message="the child task failed")
    raise ChildTaskError(
        f"child task {entry.ref} failed: {error.type}: {error.message}",
        child_id=str(entry.ref),
        error_type=error.type,
        child_traceback=error.traceback,
        task_id=task_id,
        step=entry.key,
    )


def map_tasks(
    runner: ParentRunner,
    task_name: str,
    inputs: list[Any],
    name: str | None,
    max_concurrency: int | None,
    completion: Completion | None,
) -> BatchResult:
    """``ctx.map_tasks``: one child task per input, at most ``max_concurrency`` at once."""
    state = runner.state
    task_id = state.scope.record.task_id
    limit = check_concurrency(max_concurrency, task_id=task_id)
    label = check_name(name or f"map_tasks.{task_name}", what="map_tasks name", task_id=task_id)
    n = len(inputs)
    with state.scope.lock:
        key, entry = _enter(state, label)
        if entry is not None and not entry.partial:
            return BatchResult.model_validate(entry.result)
        if entry is None:
            prefix = child_id(
                task_id, turn=state.scope.record.turn, path=state.path, key=key, index=None
            )
            if n:  # every id must be valid before anything is created
                check_task_id(f"{prefix}.{n - 1}")
            entry = JournalEntry(
                key,
                label,
                kind=EntryKind.CHILDREN,
                ref=prefix,
                partial=True,
                cursor={"created": 0, "started": 0},
                since=now_s(),
            )
            batch = ChildBatch(prefix=prefix, task_name=task_name, count=n, single=False)
            _name_before_creating(state, entry, batch)
        prefix = str(entry.ref)
        with paused_when_refused(state, entry):
            _create_children(runner, entry, task_name, inputs, limit, completion)
        found = _reports(state, prefix)
        policy = completion.model_dump() if completion else None
        if decisive(found, count=n, completion=policy):
            found = running_again(state, _starter(runner), found, task_id)
        if not decisive(found, count=n, completion=policy):
            waiter = Waiter(kind=CHILD.kind, name=label, id=prefix, count=n, completion=policy)
            raise state.unwind(Wait([waiter], f"waiting for {n - len(found)} of {n} child tasks"))
        reports = _read_reports(state, found)
        result = _batch_result(reports, n, completion)
        unfinished = [f"{prefix}.{i}" for i in range(n) if f"{prefix}.{i}" not in found]
        if unfinished:  # the policy stopped the batch: the rest are not needed
            _starter(runner).cancel(unfinished, f"batch {label} of {task_id} decided")
        entry.result, entry.partial, entry.cursor = result.model_dump(mode="json"), False, None
        state.progress = True
        _ended(state, entry)
        return result


def _create_children(
    runner: ParentRunner,
    entry: JournalEntry,
    task_name: str,
    inputs: list[Any],
    limit: int | None,
    completion: Completion | None,
) -> None:
    """Create every child's record (in chunks, under the budget), then start the first ones."""
    state, starter = runner.state, _starter(runner)
    task_id, prefix, n = runner.task_id, str(entry.ref), len(inputs)
    progress = entry.cursor or {}
    policy = completion.model_dump() if completion else None
    created = int(progress.get("created", 0))
    taken: set[int] = set(progress.get("taken", []))

    trace = _traceparent(state, entry.key, entry.since)

    def link_of(i: int) -> ParentLink:
        successor = f"{prefix}.{i + limit}" if limit is not None and i + limit < n else None
        return ParentLink(
            task_id=task_id,
            batch=prefix,
            index=i,
            successor=successor,
            count=n,
            completion=policy,
            max_concurrency=limit,
        )

    while created < n:
        chunk = range(created, min(n, created + CREATE_CHUNK))
        stats_name = f"{entry.name}.create"
        runner.steps.check_work(stats_name)

        def create(i: int) -> bool:
            return starter.create(task_name, inputs[i], f"{prefix}.{i}", link_of(i), trace)

        started = state.scope.clock()
        with state.unlocked():
            ours = in_parallel(create, chunk, threads=CHILD_THREADS)
        runner.steps.observe_work(stats_name, state.scope.clock() - started)
        taken |= {i for i, mine in zip(chunk, ours, strict=True) if not mine}
        created = chunk.stop
        entry.cursor = {**progress, "created": created, "taken": sorted(taken)}
        progress = entry.cursor
    first = n if limit is None else min(n, limit)
    begun = int(progress.get("started", 0))
    if taken and begun < first:
        pass_over_taken(state, starter, prefix, taken, limit, n, link_of)
    for slot in range(begun, first):
        # A taken slot of the first wave hands its place to the next of its own in its chain.
        i = slot
        while i in taken and limit is not None:
            i += limit
        if i < n and i not in taken:
            starter.start(f"{prefix}.{i}")
        # Saved start by start: a failed send suspends the parent, whose next invocation
        # goes on from there; what it started counts as progress, not an idle suspension.
        entry.cursor = {**progress, "started": slot + 1}
        state.progress = True


def _batch_result(reports: list[ChildReport], n: int, completion: Completion | None) -> BatchResult:
    items = [
        Item(
            index=r.index,
            status="succeeded" if r.status == "succeeded" else "failed",
            result=r.result,
            error=r.error
            or (
                ErrorInfo(type="TaskCancelledError", message="cancelled")
                if r.status != "succeeded"
                else None
            ),
            name=r.child_id,
        )
        for r in reports
    ]
    succeeded = sum(item.status == "succeeded" for item in items)
    reason = None
    if completion is not None:
        reason = completion.verdict(succeeded=succeeded, failed=len(items) - succeeded, total=n)
    return BatchResult(
        items=items,
        completion_reason=reason or "all_completed",
        given=n,
    )
