"""Admission: the ordered rules a continuation passes before its task's turns run.

Each rule's ``check`` looks at the message and its record (an :class:`Admission`) and either
lets it on (``GO``) or stops it with an :class:`Outcome`, after doing what that outcome
takes (a resend, a hop, a write). A rule that let the message on is released (``release``)
exactly once when the message's handling ends, whatever ends it: a later rule's stop, the
invocation's ending (suspended, waiting, finished, fenced) or an exception; the rules are
released in reverse order. A rule that stopped the message, and the rules after it, are not.
A rule that holds something for a task (a concurrency slot) takes it in ``check`` and reads
the ending in ``release`` to keep it while the task is parked or give it back.

The worker's rules, in order:

1. :class:`Fence`: stale, duplicate, finished and forged messages stop here (``fence.py``).
2. :class:`Wake`: the task's inbox is listed where the message needs it (kept for the
   turns), and a waiting task that is neither answered nor due stays waiting: the message
   is ignored, or its early timer hops (``wake.py``).
3. :class:`EarlyBackoff`: a suspended task's schedule fire (a retry's long backoff) that came
   before its time hops.
4. :class:`LeaveIfNewer`: a record a newer version of the task wrote, or one waiting on a kind
   of wait this version does not know (the wake rule cannot judge it), is left untouched for
   the newer code, and its message sent again.
5. :class:`ClaimRecord`: compare-and-swap the record to ``running`` with a lease until this
   invocation's deadline (``claim.py``). Losing the swap means another worker has it.

A record the worker remembers (``warm_cache.py``) may be stale: a rule that would act on it
other than by a conditional write raises :class:`StaleMemory`, and the worker reads the record
and runs the rules again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from continuum._base.clock import utcnow
from continuum._define.settings import Settings
from continuum._record.continuation import Continuation
from continuum._record.history import RunClock, Usage
from continuum._record.inbox import Listing
from continuum._record.model import Status, TaskRecord
from continuum._record.persistence import Records
from continuum._turn.tasks import Registry
from continuum._waits.kinds.registry import unknown_kinds
from continuum._worker.claim import Claim
from continuum._worker.endings import Endings, Outcome, too_new_for
from continuum._worker.fence import Verdict, fence
from continuum._worker.long_waits import SCHEDULED, LongWaits
from continuum._worker.sqs_batch import Delivery, LambdaContext, memory_mb, remaining_s
from continuum._worker.wake import EARLY_S, Decision, decide, listing_for
from continuum._worker.warm_cache import RecentRecords
from continuum.errors import RecordConflictError

__all__ = [
    "GO",
    "Admission",
    "AdmissionRule",
    "AdmissionRules",
    "ClaimRecord",
    "EarlyBackoff",
    "Fence",
    "Go",
    "LeaveIfNewer",
    "StaleMemory",
    "Wake",
    "early_backoff",
]


class Go:
    """A rule's answer that lets the message on to the next rule: its one instance, ``GO``
    (a plain class, not an Enum: building an Enum costs the cold start about half a million
    instructions, benchmarks.versus)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "GO"


#: Let the message on.
GO: Final = Go()


class StaleMemory(Exception):
    """The record this worker remembered has been changed by someone else."""


class Admission:
    """One message on its way through the rules, and what they found out about it.

    ``from_memory``: the record is the one this worker remembers, so only a conditional write
    may act on it. The rules fill in ``verdict`` (the fence's), ``listing`` (the inbox, for the
    turns), and ``claim`` with the time left when it was taken (``left_s``).
    """

    # A plain class, not a dataclass: generating a dataclass's methods costs the cold import.
    __slots__ = (
        "claim", "clock", "context", "delivery", "from_memory", "left_s", "listing", "message",
        "now", "record", "revision", "usage", "verdict",
    )  # fmt: skip

    def __init__(
        self,
        message: Continuation,
        delivery: Delivery,
        context: LambdaContext,
        from_memory: bool,
        record: TaskRecord,
        revision: str,
        usage: Usage,
        clock: RunClock,
        now: float,
    ) -> None:
        self.message = message
        self.delivery = delivery
        self.context = context
        self.from_memory = from_memory
        self.record = record
        self.revision = revision
        #: the store and queue calls of this message so far, and its clock.
        self.usage = usage
        self.clock = clock
        #: the time the rules judge by (epoch s).
        self.now = now
        self.verdict: Verdict | None = None
        self.listing: Listing | None = None
        self.claim: Claim | None = None
        self.left_s = 0.0

    @property
    def message_id(self) -> str:
        return self.delivery.message_id


class AdmissionRule:
    """One check of the admission: let the message on, or stop it with an outcome. A rule
    subclasses it (a plain base class, not a Protocol: building a Protocol class costs the
    cold start about half a million instructions, benchmarks.versus)."""

    def check(self, admission: Admission) -> Outcome | Go:
        """``GO``, or the outcome the message stops with (having done what it takes)."""
        raise NotImplementedError

    def release(self, admission: Admission, ending: Outcome | BaseException) -> None:
        """The handling of a message this rule let on ended with ``ending`` (an outcome, or
        the exception it raised). A rule that holds nothing leaves this as it is."""
        return


class AdmissionRules:
    """The rules in order, each message run through them.

    Example:
        >>> rules = AdmissionRules([Fence(...), ClaimRecord(...)])  # doctest: +SKIP
        >>> rules.add(slot, before=ClaimRecord)  # doctest: +SKIP
    """

    def __init__(self, rules: Iterable[AdmissionRule]) -> None:
        self.rules = list(rules)

    def add(self, rule: AdmissionRule, *, before: type[AdmissionRule]) -> None:
        """Check ``rule`` just before the first rule of type ``before``."""
        for at, there in enumerate(self.rules):
            if isinstance(there, before):
                self.rules.insert(at, rule)
                return
        added, missing = type(rule).__name__, before.__name__
        raise ValueError(f"the admission has no {missing} rule to add {added} before")

    def admit(self, admission: Admission, then: Callable[[Admission], Outcome]) -> Outcome:
        """Run the rules; if all let the message on, ``then`` (the turns). Release the
        rules that let it on, the last first, with how it ended."""
        admitted: list[AdmissionRule] = []
        try:
            for rule in self.rules:
                said = rule.check(admission)
                if not isinstance(said, Go):
                    ending = said
                    break
                admitted.append(rule)
            else:
                ending = then(admission)
        except BaseException as exc:
            release(admitted, admission, exc)
            raise
        release(admitted, admission, ending)
        return ending


def release(
    admitted: list[AdmissionRule], admission: Admission, ending: Outcome | BaseException
) -> None:
    """Release each rule, the last admitted first; every one is released even if one raises
    (the first error is raised after: the message is then retried)."""
    failed: Exception | None = None
    for rule in reversed(admitted):
        try:
            rule.release(admission, ending)
        except Exception as exc:
            failed = failed or exc
    if failed is not None:
        raise failed


class Fence(AdmissionRule):
    """1. The fence: the verdict on the message; one that runs nothing stops it."""

    def __init__(self, endings: Endings, *, named: Callable[[str], None]) -> None:
        self.endings = endings
        #: told the task's name once the record is known to be the one to act on.
        self.named = named

    def check(self, admission: Admission) -> Outcome | Go:
        record = admission.record
        verdict = fence(record, admission.message, message_id=admission.message_id, now=utcnow())
        if admission.from_memory and verdict is not Verdict.RUN:
            raise StaleMemory  # only a claim or a hop (conditional writes) trusts memory
        self.named(record.task_name)
        if verdict not in (Verdict.RUN, Verdict.CHECK_INBOX):
            return self.endings.fenced(verdict, record)
        admission.verdict = verdict
        return GO


class _Hops:
    """What a rule that stops with a hop needs: write generation + 1, send the next timer."""

    def __init__(self, endings: Endings, leave: LeaveIfNewer) -> None:
        self.endings, self.leave = endings, leave

    def hop(self, admission: Admission) -> Outcome:
        left = self.leave.check(admission)
        if not isinstance(left, Go):
            return left  # a newer version's wait: its hops are the newer code's
        try:
            return self.endings.hop(
                admission.record,
                admission.revision,
                message_id=admission.message_id,
                spent=admission.usage,
                elapsed_s=admission.clock.elapsed_s(),
                memory_mb=memory_mb(admission.context),
                fired=admission.message.reason.startswith(SCHEDULED),
            )
        except RecordConflictError as exc:  # from memory: read the record
            raise (StaleMemory() if admission.from_memory else exc) from None


class Wake(AdmissionRule):
    """2. The inbox, listed where the message needs it; a waiting task that is neither
    answered nor due stays waiting (the message ignored, or its early timer hopped)."""

    def __init__(self, records: Records, settings: Settings, hops: _Hops) -> None:
        self.records, self.settings, self.hops = records, settings, hops

    def check(self, admission: Admission) -> Outcome | Go:
        record, message, now = admission.record, admission.message, admission.now
        poll_s = self.settings.inbox_poll_s
        listing = listing_for(self.records.inbox, record, message, poll_s, now=now)
        admission.listing = listing
        if record.status != Status.WAITING or unknown_kinds(w.kind for w in record.waiting_for):
            return GO  # a kind this version does not know: LeaveIfNewer leaves it
        assert listing is not None
        timer = admission.verdict is Verdict.RUN and message.kind == "timer"
        match decide(record, listing, timer=timer, now=now):
            case Decision.RUN:
                return GO
            case Decision.IGNORE:
                if admission.from_memory:
                    raise StaleMemory
                return Outcome.IGNORED
        return self.hops.hop(admission)


class EarlyBackoff(AdmissionRule):
    """3. A suspended task's schedule fire that came before its time hops."""

    def __init__(self, hops: _Hops) -> None:
        self.hops = hops

    def check(self, admission: Admission) -> Outcome | Go:
        if early_backoff(admission.record, admission.message, admission.verdict, now=admission.now):
            return self.hops.hop(admission)
        return GO


def early_backoff(
    record: TaskRecord, message: Continuation, verdict: Verdict | None, *, now: float
) -> bool:
    """Whether ``message`` is a schedule's fire for a suspended record (a retry's long
    backoff, as an earlier release parked it: it now waits) that came before its time: then
    it hops, and claims nothing."""
    wake = record.wake_at
    return (
        record.status == Status.SUSPENDED
        and verdict is Verdict.RUN
        and message.kind == "timer"
        and wake is not None
        and now < wake.timestamp() - EARLY_S
    )


class LeaveIfNewer(AdmissionRule):
    """4. A record of a newer version of its task, or waiting on a kind of wait this version
    does not know, is left untouched (no claim, no hop) for the newer code, and its message
    sent again."""

    def __init__(self, registry: Registry, endings: Endings) -> None:
        self.registry, self.endings = registry, endings

    def check(self, admission: Admission) -> Outcome | Go:
        record = admission.record
        too_new = too_new_for(self.registry.tasks.get(record.task_name), record)
        if too_new is None:
            return GO
        if admission.from_memory:
            raise StaleMemory  # leaving it writes nothing: only the store may decide that
        return self.endings.leave_for_newer(admission.message, too_new)


class ClaimRecord(AdmissionRule):
    """5. The claim: compare-and-swap the record to ``running`` with a lease until the
    deadline (its hold ends with the invocation's ending, not here)."""

    def __init__(
        self,
        records: Records,
        settings: Settings,
        recent: RecentRecords,
        long_waits: LongWaits,
    ) -> None:
        self.records, self.settings = records, settings
        self.recent, self.long_waits = recent, long_waits

    def check(self, admission: Admission) -> Outcome | Go:
        message, context, record = admission.message, admission.context, admission.record
        left_s = remaining_s(context)
        record.max_value_bytes = self.settings.max_state_bytes  # for clients to check sends
        try:
            claim = Claim.take(
                self.records,
                record,
                admission.revision,
                owner=str(getattr(context, "aws_request_id", None) or "local"),
                message_id=admission.message_id,
                remaining_s=left_s,
                send_s=self.recent.last_send_s(record.task_id),
                message_kind=message.kind if message.reason != "start" else "start",
            )
        except RecordConflictError:
            if admission.from_memory:
                raise StaleMemory from None
            raise
        claim.usage, claim.clock = admission.usage, admission.clock
        claim.memory_mb = memory_mb(context)
        if not message.reason.startswith(SCHEDULED):  # a fired schedule deleted itself
            self.long_waits.forget(claim.dropped_schedule, task_id=record.task_id)
        admission.claim, admission.left_s = claim, left_s
        return GO


def builtin_rules(
    registry: Registry,
    records: Records,
    settings: Settings,
    endings: Endings,
    recent: RecentRecords,
    long_waits: LongWaits,
    *,
    named: Callable[[str], None],
) -> list[AdmissionRule]:
    """The worker's rules, in order (the module docstring's list)."""
    leave = LeaveIfNewer(registry, endings)
    hops = _Hops(endings, leave)
    return [
        Fence(endings, named=named),
        Wake(records, settings, hops),
        EarlyBackoff(hops),
        leave,
        ClaimRecord(records, settings, recent, long_waits),
    ]
