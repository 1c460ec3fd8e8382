"""Comparing a run of the replay check with the reference run: how it ended, and each step
key's calls and arguments; and giving a run's steps the reference's outcomes.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from continuum._record.model import Status
from continuum._record.waiting_for import Signal
from continuum.testing.observe import StandIn, StandInAnswer, StepRun
from continuum.testing.replay_run import RunEnding

#: The longest argument or result a message quotes.
MAX_QUOTE_CHARS = 200


def pinned(reference: list[StepRun], task_id: str) -> StandIn:
    """A stand-in that answers each step with the reference's outcome for the same key and
    attempt, when it is called as the reference called it."""
    outcomes = {(r.turn, r.key, r.attempt): r for r in reference if r.done}

    def stand_in(run: StepRun) -> StandInAnswer | None:
        ref = outcomes.get((run.turn, run.key, run.attempt))
        if ref is None or ref.name != run.name or _call(ref, task_id) != _call(run, task_id):
            return None  # it runs for real; the comparison reports the difference
        after = 0 if ref.ended is None else ref.ended - ref.started_after
        return StandInAnswer(value=ref.value, error=ref.error, after=after)

    return stand_in


def divergence(reference: RunEnding, run: RunEnding, task_id: str) -> str | None:
    """What differed between a run and the reference, in words; None if nothing did.

    A failure the reference did not have comes first (a NonDeterminismError says best what
    went wrong); then the first step call that differs; then the result.
    """
    ending = None
    if _ending(run) != _ending(reference):
        ending = f"it {_describe(run)} where the uninterrupted run {_describe(reference)}"
        if run.status == Status.FAILED:
            return ending
    return _step_difference(reference, run, task_id) or ending


def _step_difference(reference: RunEnding, run: RunEnding, task_id: str) -> str | None:
    expected: dict[tuple[int, str], list[StepRun]] = defaultdict(list)
    for ref in reference.steps:
        expected[ref.turn, ref.key].append(ref)
    seen: dict[tuple[int, str], int] = defaultdict(int)
    for step in run.steps:
        refs = expected.get((step.turn, step.key), [])
        seen[step.turn, step.key] += 1
        if not refs:
            return f"step {step.where} ran, which the uninterrupted run never called"
        if step.attempt > len(refs):
            return (
                f"step {step.where} ran {_times(step.attempt)} where the uninterrupted run "
                f"ran it {_times(len(refs))}: it was not replayed from the journal"
            )
        ref = refs[step.attempt - 1]
        if _call(step, task_id) != _call(ref, task_id):
            return (
                f"step {step.where} was called with {_quote(_call(step, task_id))} where the "
                f"uninterrupted run called it with {_quote(_call(ref, task_id))}"
            )
    for (turn, key), refs in expected.items():
        if seen[turn, key] < len(refs):
            return f"step {refs[0].where} was never called, though the uninterrupted run called it"
    return None


def _ending(outcome: RunEnding) -> tuple[Any, ...]:
    error = outcome.error
    return (outcome.status, outcome.result, error and (error.type, error.message))


def _describe(outcome: RunEnding) -> str:
    if outcome.status == Status.SUCCEEDED:
        return f"returned {_quote(outcome.result)}"
    error = outcome.error
    what = f"{error.type}: {error.message}" if error else "no error"
    return f"ended {outcome.status.value} ({_quote(what, quoted=False)})"


def _call(run: StepRun, task_id: str) -> Any:
    """A step's arguments in a form two runs can compare: JSON values as they are, models as
    their fields, callback ids (random per run) as a placeholder, and what has no JSON form
    (a function, a bound method, an object that is equal only to itself) by its type."""
    return _canonical([list(run.args), run.kwargs], _callback_ids(task_id))


@functools.cache
def _callback_ids(task_id: str) -> re.Pattern[str]:
    """The callback ids of a task: its id, a dot, 32 hex digits (``mail.py``)."""
    return re.compile(rf"{re.escape(task_id)}\.[0-9a-f]{{32}}")


def _canonical(value: Any, callback_id: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        return "<callback id>" if callback_id.fullmatch(value) else value
    if isinstance(value, Signal):  # when it was sent is the world's business, not the task's
        return ("<signal>", value.name, value.id, _canonical(value.payload, callback_id))
    if isinstance(value, BaseModel):
        return (type(value).__qualname__, _canonical(dict(value), callback_id))
    if isinstance(value, Mapping):
        return {key: _canonical(item, callback_id) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item, callback_id) for item in value]
    if value is None or isinstance(value, bool | int | float | bytes):
        return value
    if callable(value):  # a bound method compares its object, which each run builds anew
        return f"<{type(value).__qualname__} {getattr(value, '__qualname__', '?')}>"
    try:
        found = to_jsonable_python(value)
    except PydanticSerializationError:
        return f"<{type(value).__qualname__}>"
    return _canonical(found, callback_id) if found is not value else value


def _quote(value: Any, *, quoted: bool = True) -> str:
    text = repr(value) if quoted else str(value)
    return text if len(text) <= MAX_QUOTE_CHARS else text[: MAX_QUOTE_CHARS - 3] + "..."


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"
