"""Child tasks as a wait (``ctx.invoke``, ``ctx.map_tasks``): a parent waits for a batch.

The batch (``Waiter.id``: its id prefix; ``count``; ``completion``) is answered by the
children's reports in the parent's inbox (``children/{child_id}/{status}.json``) once they let
it decide: all reported, or its completion policy says stop. Starting the children, entering
and replaying the wait are the fan-out's (``continuum._fanout.invoke``); no one outside sends
to it. While it waits, the parent's inbox is looked at every ``CHILD_RECHECK_S`` at least, so a
child that died between its result and its wake is still counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from continuum._waits.kinds.template import WaitOperation

if TYPE_CHECKING:
    from continuum._define.completion import Completion
    from continuum._record.inbox import Listing
    from continuum._record.model import TaskRecord
    from continuum._record.waiting_for import Waiter

#: A task waiting for child tasks has its inbox looked at this often, whatever its deadlines.
CHILD_RECHECK_S = 900.0
#: A retried child may leave more than one report: a failed child is the only one ``retry``
#: takes, and a succeeded one never runs again, so the highest of these is its latest.
_LATEST = {"failed": 0, "cancelled": 1, "succeeded": 2}


def batch_counts(listing_keys: frozenset[str], prefix: str) -> dict[str, str]:
    """child id -> status of the reports in a parent's inbox listing for batch ``prefix``:
    of a retried child's reports, its latest outcome (whatever order the listing is in)."""
    found: dict[str, str] = {}
    for key in listing_keys:
        if not key.startswith("children/"):
            continue
        _, child, leaf = key.split("/", 2)
        if child == prefix or child.startswith(f"{prefix}."):
            status = leaf.removesuffix(".json")
            known = found.get(child)
            if known is None or _LATEST.get(status, -1) > _LATEST.get(known, -1):
                found[child] = status
    return found


def decisive(
    reports: dict[str, str], *, count: int, completion: Completion | dict[str, Any] | None
) -> bool:
    """Whether a batch with these reports can decide: all reported, or its policy says stop."""
    if len(reports) >= count:
        return True
    if completion is None:
        return False
    if isinstance(completion, dict):
        from continuum._define.completion import Completion  # loaded with the fan-out's first use

        completion = Completion.model_validate(completion)
    succeeded = sum(status == "succeeded" for status in reports.values())
    failed = len(reports) - succeeded
    return completion.verdict(succeeded=succeeded, failed=failed, total=count) is not None


class ChildWait(WaitOperation):
    kind: ClassVar[str] = "child"
    event: ClassVar[str] = "children"
    entries: ClassVar[tuple[str, ...]] = ("children",)
    recheck_s: ClassVar[float | None] = CHILD_RECHECK_S
    in_turn: ClassVar[bool] = False
    aws_type: ClassVar[tuple[str, str]] = ("CHAINED_INVOKE", "ChainedInvoke")

    def answered(self, waiter: Waiter, record: TaskRecord, listing: Listing) -> bool:
        if waiter.id is None:
            return False
        reports = batch_counts(listing.keys, waiter.id)
        return decisive(reports, count=waiter.count or 1, completion=waiter.completion)


CHILD = ChildWait()
