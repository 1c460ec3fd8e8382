"""What ``continuum run`` prints: a line per invocation (in this process) or per generation
(on a server), the task's result, and what the run took.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from continuum._local.reports import InvocationReport, RunSummary
    from continuum._ops.status import TaskStatus


def show_summary(summary: RunSummary, *, json_line: bool) -> None:
    """What the run took, each figure after its name: invocations, timer hops, turns, steps,
    AWS calls and wall time (and the JSON line)."""
    calls = ", ".join(f"{k} {v}" for k, v in summary.aws_calls.items())
    others = summary.all_invocations - summary.invocations - summary.hops
    # The lines count every invocation; the task's own figures come first.
    besides = f"  other invocations {others} (other tasks, schedule fires)" if others > 0 else ""
    print(
        f"\ninvocations {summary.invocations}{besides}  timer hops {summary.hops}  "
        f"continuations {summary.continuations}  turns {summary.turns}  "
        f"steps executed {summary.steps}  steps replayed {summary.steps_replayed}  "
        f"overruns {summary.overruns}\n"
        f"S3 calls {summary.s3_calls}  SQS calls {summary.sqs_calls}  "
        f"scheduler calls {summary.scheduler_calls}  ({calls})  wall time {summary.seconds:.1f} s"
    )
    if json_line:
        print(summary.to_json(), flush=True)


class InvocationPrinter:
    """One line per invocation; a run of timer hops (a long wait) as one line."""

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.overruns = 0
        self.hops = 0

    def show(self, inv: InvocationReport) -> None:
        self.overruns += inv.overran
        if inv.hop:
            self.hops += 1
            return
        self.flush()
        flag = "  OVERRAN" if inv.overran else ""
        if inv.fire:
            took = {"schedule-started": "started its run", "schedule-skipped": "skipped"}
            what = took.get(inv.status, inv.status)
            print(f"invocation {inv.number:>3}  a schedule's fire: {what}{flag}", flush=True)
            return
        why = status_words(inv.status, inv.reason)
        child = ""
        if inv.schedule is not None:  # a schedule's run ran in this invocation
            child = f"  schedule {inv.schedule}'s run {inv.task_id}"
        elif inv.task_id is not None:  # a child task ran in this invocation
            index = f"[{inv.index}]" if inv.index is not None else ""
            child = f"  child {inv.task_name}{index}"
        print(
            f"invocation {inv.number:>3}  turn {inv.turn:>3}  steps {inv.steps_executed:>3} run, "
            f"{inv.steps_replayed:>2} replayed  {inv.seconds:5.2f}s  {why}{flag}{child}",
            flush=True,
        )

    def flush(self) -> None:
        if self.hops:
            print(f"      ...  {self.hops} timer hops while it waited (no user code ran)")
            self.hops = 0


def followed_json(task_id: str, status: TaskStatus, error: str | None, seconds: float) -> str:
    """The JSON summary line of a followed task (the fields a local run's summary shares)."""
    from continuum._local.reports import turns_entered

    counters = status.counters
    summary = {
        "task_id": task_id,
        "status": status.status.value,
        "result": status.result,
        "error": error,
        "invocations": counters.invocations,
        "continuations": counters.continuations,
        "steps": counters.steps_executed,
        "steps_replayed": counters.steps_replayed,
        "turns": turns_entered(status.turn),
        "hops": counters.hops,
        "seconds": round(seconds, 3),
    }
    return json.dumps(summary, sort_keys=True, default=str)


def generation_line(status: TaskStatus) -> str:
    """One line for what a server's workers did to the task so far."""
    counters = status.counters
    why = status_words(status.status.value, status.suspend_reason)
    return (
        f"generation {status.generation:>3}  turn {status.turn:>3}  invocations "
        f"{counters.invocations:>3}  steps {counters.steps_executed:>3} run, "
        f"{counters.steps_replayed:>2} replayed  {why}"
    )


def status_words(status: str, suspend_reason: str | None) -> str:
    """The status, and why a parked task is parked."""
    return f"{status}: {suspend_reason}" if status in ("suspended", "waiting") else status


def print_result(
    status: str, task_id: str, result: Any, error: str | None, traceback: str | None = None
) -> None:
    """How the task ended: its status, then its result, or its error and where it raised."""
    from continuum.cli.common import terminal_safe

    print(f"\n{status} task {task_id}")
    if result is not None:
        print(terminal_safe(result) if isinstance(result, str) else json.dumps(result))
    if error:
        print(f"error: {terminal_safe(error)}")
    if traceback:
        print(terminal_safe(traceback))
    sys.stdout.flush()
