"""Trace and span ids derived from a task's id, in W3C trace context form.

A task's invocations run in different processes that never talk to each other; each derives
the same ids from the same names (a SHA-256 of them), so the spans they emit join one trace
without coordination. The names start with the task's *stack* (where its records live: the
bucket and prefix), so that two deployments running one task id (staging's and production's
nightly run) send two traces to a shared collector, not one. A child task hangs under the
span of the wait that started it: the parent's worker writes that span's ``traceparent`` into
the child's record. No OpenTelemetry here: these are numbers and strings, readable by any tracer.
"""

from __future__ import annotations

import hashlib
import re

_TRACEPARENT_RE = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


def _digest(*names: object) -> bytes:
    return hashlib.sha256("\x1f".join(map(str, names)).encode()).digest()


def derived_trace_id(stack: str, task_id: str) -> int:
    """The 128-bit trace id of a task of ``stack`` that starts its own trace (never zero)."""
    return int.from_bytes(_digest("continuum.trace", stack, task_id)[:16], "big") or 1


def derived_span_id(stack: str, task_id: str, *names: object) -> int:
    """The 64-bit id of the span ``names`` name in a task's trace (never zero)."""
    return int.from_bytes(_digest("continuum.span", stack, task_id, *names)[:8], "big") or 1


def run_span_id(stack: str, task_id: str, retries: int, *names: object) -> int:
    """The id of the span ``names`` name in a task's run after ``retries`` retries: a retry
    runs the failed turn again, and each span of the new run is a span of its own (the first
    run's ids name no run, as they did before retries had runs)."""
    if retries == 0:
        return derived_span_id(stack, task_id, *names)
    return derived_span_id(stack, task_id, *names, retries)


def root_span_id(stack: str, task_id: str, retries: int = 0) -> int:
    """The id of a task's root span in its run after ``retries`` retries (one root a run)."""
    return run_span_id(stack, task_id, retries, "task")


def wait_span_id(
    stack: str, task_id: str, turn: int, key: str, since: float | None, retries: int = 0
) -> int:
    """The id of the span of the wait at ``key`` (its path and key) in turn ``turn``, first
    reached at ``since`` (a wait reached again after a crash is another span), in the run
    after ``retries`` retries."""
    return run_span_id(stack, task_id, retries, "wait", turn, key, since)


def traceparent(trace_id: int, span_id: int) -> str:
    """A W3C ``traceparent`` header value (version 00, sampled)."""
    return f"00-{trace_id:032x}-{span_id:016x}-01"


def parse_traceparent(value: str | None) -> tuple[int, int] | None:
    """(trace id, span id) of a W3C ``traceparent``; None if it is missing or malformed."""
    if not value:
        return None
    match = _TRACEPARENT_RE.fullmatch(value.strip().lower())
    if match is None:
        return None
    trace_id, span_id = int(match.group(1), 16), int(match.group(2), 16)
    if trace_id == 0 or span_id == 0:
        return None
    return trace_id, span_id


def task_trace_id(stack: str, task_id: str, parent_traceparent: str | None) -> int:
    """The trace a task's spans belong to: its parent's (a child task whose record holds the
    span that started it), else its own, derived from its stack and id."""
    parsed = parse_traceparent(parent_traceparent)
    return parsed[0] if parsed is not None else derived_trace_id(stack, task_id)


def stack_of(store: object, prefix: str) -> str:
    """The stack of the records under ``prefix`` of ``store``: its bucket and the prefix (an
    in-memory store has no bucket: ``memory``)."""
    return f"{getattr(store, 'bucket', None) or 'memory'}/{prefix}"
