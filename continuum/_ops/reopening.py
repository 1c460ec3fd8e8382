"""What ``retry`` runs again of a failed turn: the step, block or batch items where it failed.

The turn failed at the end of its journal: descending through the blocks and batches still
in progress there, the innermost last entry is where. A failed step is dropped (it runs
again); a finished batch of branches or items is reopened with only its succeeded items, so
the failed ones (and those never started) run again while the others return their recorded
results; a failed block runs again from its start; a finished call of child tasks is
reopened, and its failed children are named, for the retry to retry them first: the parent
then takes each child's latest outcome. An asyncio task's context that holds what runs again
loses its place in the order the turn's asyncio tasks ended in: it ends again, after them all.
"""

from __future__ import annotations

from typing import Any

from continuum._record.model import EntryKind, JournalEntry

_WAITS = (EntryKind.STEP, EntryKind.SLEEP, EntryKind.CALLBACK_RESULT, EntryKind.SIGNAL)


def reopen_failed(
    journal: list[JournalEntry], failed_step: str | None, singles: set[str]
) -> list[str]:
    """Change ``journal`` so that what failed runs again; return the ids of the failed
    children to retry (``singles``: the ids of ``ctx.invoke`` children, whose entries hold
    the child's result, where a batch's hold a batch result). Nothing changes if the
    journal's end is not a failure."""
    return _reopened(journal, failed_step, singles) or []


def _reopened(
    journal: list[JournalEntry], failed_step: str | None, singles: set[str]
) -> list[str] | None:
    """``reopen_failed``, or None if nothing changed."""
    if not journal:
        return None
    last = journal[-1]
    if last.partial and last.children is not None:
        retried = _reopened(last.children, failed_step, singles)
        if retried is not None:
            # What it holds runs again, so it ends after every ending recorded: the retried
            # run numbers it afresh, as it ends there.
            last.ended = None
        return retried
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
