"""What ``retry`` runs again of a failed turn: the step, block or batch items where it failed.

The turn failed at the end of its journal: descending through the blocks and batches still
in progress there, the innermost last entry is where. A failed step is dropped (it runs
again); a finished batch of branches or items is reopened with only its succeeded items, so
the failed ones (and those never started) run again while the others return their recorded
results; a failed block runs again from its start; a finished call of child tasks is
reopened, and its failed children are named, for the retry to retry them first: the parent
then takes each child's latest outcome. An asyncio task's context that holds what runs again
loses its place in the order the turn's asyncio tasks ended in: it ends again, after them all.

An async turn's failure need not be at the end: its asyncio tasks each journal in a context of
their own, in the order they were made. Where the end holds no failure (or is an asyncio task
that ended), what failed is in the context of an asyncio task that ended failing the step
the task's error names (the one whose failure is the task's error, else the first to end):
only it is reopened; those still running resume, and those whose failure the task caught
(another error, or ended later) replay it.
"""

from __future__ import annotations

import copy
from typing import Any

from continuum._record.model import EntryKind, ErrorInfo, JournalEntry, walk
from continuum._waits.kinds.registry import TURN_WAITS

#: What a failed turn's last entry may be for it to reopen there: a step, or a wait.
_WAITS = TURN_WAITS | {EntryKind.STEP}


def reopen_failed(
    journal: list[JournalEntry],
    failed_step: str | None,
    singles: set[str],
    error: ErrorInfo | None = None,
) -> list[str]:
    """Change ``journal`` so that what failed runs again; return the ids of the failed
    children to retry (``singles``: the ids of ``ctx.invoke`` children, whose entries hold
    the child's result, where a batch's hold a batch result; ``error``: the task's). Nothing
    changes if no failure of the turn is found."""
    return _reopened(journal, failed_step, singles, error) or []


def _reopened(
    journal: list[JournalEntry],
    failed_step: str | None,
    singles: set[str],
    error: ErrorInfo | None = None,
) -> list[str] | None:
    """``reopen_failed``, or None if nothing changed."""
    if not journal:
        return None
    last = journal[-1]
    if (
        _in_progress(last)
        and not _holds_error(last, error)
        and _failing_tasks(journal, failed_step, singles, error)
    ):
        # An asyncio task still running (it resumes as it is) whose failure, if any, the
        # task caught: what failed the turn is in one of the tasks that ended.
        return _reopened_asyncio_task(journal, failed_step, singles, error)
    retried = _reopened_end(journal, failed_step, singles, error)
    if retried is None:
        retried = _reopened_asyncio_task(journal, failed_step, singles, error)
    return retried


def _in_progress(entry: JournalEntry) -> bool:
    """Whether ``entry`` is a child context still in progress: a block, or an asyncio task's."""
    return entry.kind == EntryKind.CONTEXT and entry.partial and entry.ended is None


def _failing_tasks(
    journal: list[JournalEntry],
    failed_step: str | None,
    singles: set[str],
    error: ErrorInfo | None,
) -> list[JournalEntry]:
    """The contexts of the asyncio tasks that ended holding a failure a retry would reopen."""
    return [
        entry
        for entry in journal
        if _ended_task(entry)
        and _reopened(copy.deepcopy(entry.children or []), failed_step, singles, error) is not None
    ]


def _reopened_asyncio_task(
    journal: list[JournalEntry],
    failed_step: str | None,
    singles: set[str],
    error: ErrorInfo | None,
) -> list[str] | None:
    """Reopen the context of the asyncio task (one that ended) whose failure failed the turn:
    the one whose failure is the task's error, else the first to end failing ``failed_step``."""
    failing = _failing_tasks(journal, failed_step, singles, error)
    if not failing:
        return None
    matching = [entry for entry in failing if _holds_error(entry, error)]
    chosen = min(matching or failing, key=lambda entry: entry.ended or 0)
    assert chosen.children is not None
    retried = _reopened(chosen.children, failed_step, singles, error)
    # It ends again, after every ending recorded: the retried run numbers it afresh.
    chosen.ended = None
    return retried


def _ended_task(entry: JournalEntry) -> bool:
    """Whether ``entry`` is the context of an asyncio task that ended (with a value or not)."""
    return entry.kind == EntryKind.CONTEXT and entry.partial and entry.ended is not None


def _holds_error(entry: JournalEntry, error: ErrorInfo | None) -> bool:
    """Whether a failure in ``entry``'s context is ``error`` (the task's, which says it too)."""
    if error is None:
        return False
    return any(
        held.error is not None and held.error.type == error.type and _says(error, held.error)
        for held in walk(entry.children or [])
        if not held.ok
    )


def _says(error: ErrorInfo, held: ErrorInfo) -> bool:
    """Whether the task's ``error`` is ``held`` raised through the task (its message cut)."""
    raised = f"{held.type}: {held.message}"
    forms = (held.message, f"step raised {raised}", f"child context raised {raised}")
    return any(form.startswith(error.message) for form in forms)


def _reopened_end(
    journal: list[JournalEntry],
    failed_step: str | None,
    singles: set[str],
    error: ErrorInfo | None,
) -> list[str] | None:
    """Reopen what failed at the journal's end (not an asyncio task that ended), or None."""
    last = journal[-1]
    if last.partial and last.children is not None:
        if _ended_task(last):
            return None  # which of the asyncio tasks that ended failed the turn is chosen apart
        return _reopened(last.children, failed_step, singles, error)
    if last.partial:
        return None
    if last.kind in _WAITS:
        # The step that failed the turn runs again; a callback's timeout or failure is the
        # outside world's answer, not a step: it stays, for the fixed code to catch.
        answered = last.kind == EntryKind.CALLBACK_RESULT
        if not last.ok and last.key == failed_step and not answered:
            journal.pop()
            return []
        return None
    if last.kind == EntryKind.CONTEXT and not last.ok:
        last.ok, last.error, last.partial, last.children = True, None, True, []
        last.ended = None
        return []
    if last.kind == EntryKind.BATCH:
        items = _failed_batch(last)
        if items is None:
            return None
        last.children = [_replayed(item) for item in items if item["status"] == "succeeded"]
        last.partial, last.result = True, None
        return []
    if last.kind == EntryKind.CHILDREN:
        return _reopen_children(last, single=last.ref in singles)
    return None


def _failed_batch(entry: JournalEntry) -> list[dict[str, Any]] | None:
    """A finished batch's items, if any failed."""
    stored = entry.result if isinstance(entry.result, dict) else {}
    items = stored.get("items")
    if not isinstance(items, list) or all(i.get("status") == "succeeded" for i in items):
        return None
    return items


def _replayed(item: dict[str, Any]) -> JournalEntry:
    """A succeeded item as the finished child entry a batch in progress holds."""
    name = item.get("name") or "item"
    return JournalEntry(str(item["index"]), name, result=item["result"], kind=EntryKind.CONTEXT)


def _reopen_children(entry: JournalEntry, *, single: bool) -> list[str] | None:
    if entry.ref is None:
        return None
    if single:
        if entry.ok:
            return None
        entry.ok, entry.error, entry.result = True, None, None
        entry.partial, entry.cursor = True, {"started": True}
        return [entry.ref]
    items = _failed_batch(entry)
    if items is None:
        return None
    given = int(entry.result.get("given", len(items)))
    entry.partial, entry.result = True, None
    entry.cursor = {"created": given, "started": given}
    return [str(item["name"]) for item in items if item["status"] == "failed" and item.get("name")]
