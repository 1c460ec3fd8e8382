"""The checks of the tasks that wait and fan out (``chaos.flows``), after a run.

What each such task must end as is worked out from its input and the harness's log of what
the outside world did (``chaos.outside``: ``outside.jsonl``), never from its record:

- callback: the answer the first answering call landed, if it landed well before the
  callback's deadline or after it (the task's timeout and the answer race on one inbox key:
  an answer accepted is taken); the timeout if the answer was refused because the task had
  closed the callback; a second answer is refused, and so is one over the task's limit.
- signals: the first ``wants`` signals in the order sent, each the first copy (a resend with
  the same ``signal_id`` carries another payload: a task that took one took a duplicate).
- cancellable: ``cancelled``, with the reason of the first cancel call that reached it.

Child tasks (``leaf``) are no planned task; each record whose ``parent`` names a planned
task is checked here: it ended; each child was started once (one record per child id); a
child of a parent that failed (``fantasks``) failed as planned and the others succeeded with
the right result; a held child of a cancelled parent ended ``cancelled``. A child that the
designed, bounded failures ended (``ALLOWED_FAILURES``: killed at the same step again and
again, dead-lettered) changes its parent's result: that parent's result is then not checked.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from chaos import flows, steering
from chaos.checks import ALLOWED_FAILURES, FINISHED, PlannedTask, Report

#: Outcomes of an outside call after which what it sent is in the inbox (or was refused).
LANDED = ("ok", "answered")
CHILD_STRANDED = "child tasks stranded"
CHILD_TWICE = "child tasks started more than once"
CHILD_WRONG = "child tasks with a wrong ending"
CHILD_MISSING = "child tasks never started"
SECOND_ANSWER = "second callback answers accepted"
OUTSIDE_GAVE_UP = "outside calls given up"
OVERSIZED_ACCEPTED = "answers over the task's limit accepted"


def _calls(log: list[dict[str, Any]], task_id: str) -> dict[int, list[dict[str, Any]]]:
    """The attempts of each call the harness made to ``task_id``, by call number."""
    calls: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for entry in log:
        if entry["task_id"] == task_id and "n" in entry:
            calls[int(entry["n"])].append(entry)
    return calls


def _outcome(attempts: list[dict[str, Any]]) -> str | None:
    final = [a["outcome"] for a in attempts if a["outcome"] != "retry"]
    return final[0] if final else None


#: Failures of a call after which its answer is in the inbox: a sender death after the write.
#: The call's retry may then find the callback closed because the task took that very answer
#: (and finished), not by its timeout.
FAILED_AFTER_ANSWER = ("sender_died_after_put",)

#: Failures at the wake. A wake follows an accepted answer, and also a refused one (the task's
#: timeout won the inbox key: the refusal still wakes the task, in case a retry's wake is the
#: one that was lost). Before the deadline nothing can have refused it, so the answer landed;
#: at or after the deadline it may be in the inbox or not.
FAILED_AT_WAKE = (
    "sender_died_before_wake",
    "sender_died_after_wake",
    "when calling the SendMessage operation",
)


def _failed_with(attempt: dict[str, Any], kinds: tuple[str, ...]) -> bool:
    error = str(attempt.get("error") or "")
    return attempt["outcome"] == "retry" and any(kind in error for kind in kinds)


def callback_expected(task: PlannedTask, log: list[dict[str, Any]]) -> Any:
    """The callback task's result, or None when both the answer and the timeout are right."""
    salt = int(task.input["salt"])
    seen = [e for e in log if e["task_id"] == task.task_id and e["outcome"] == "callback id seen"]
    first = _calls(log, task.task_id).get(0, [])
    if not seen or not first:
        return None  # the task ended before the harness acted (or the script timed out)
    outcome = _outcome(first)
    deadline = float(seen[0]["deadline"])
    at_wake = [a for a in first if _failed_with(a, FAILED_AT_WAKE)]
    early = next((a for a in first if _failed_with(a, FAILED_AFTER_ANSWER)), None)
    early = early or next((a for a in at_wake if a["t"] < deadline), None)
    if outcome == "closed" and early is not None:
        outcome = "ok"  # an earlier attempt's answer landed; its retry came after the task took it
    elif outcome == "closed" and at_wake:
        return None  # at the deadline: the answer landed and was taken, or the timeout won
    if outcome not in LANDED and outcome != "closed":
        return None  # given up: maybe landed, maybe not
    action = first[0]
    got: dict[str, Any]
    if action["op"] == "complete":
        got = {"got": "value", "value": action["args"]["result"]}
    else:
        got = {"got": "failed", "type": action["args"]["error_type"]}
    timeout = {"got": "timeout"}
    if outcome == "closed":  # refused: the task had closed the callback (its timeout)
        got = timeout
    # Else accepted, even after the deadline: the task's timeout and the answer race on one
    # inbox key, so an answer accepted is the one the task took.
    before = flows.prepare_value(salt)
    return {
        "before": before,
        "outcome": got,
        "after": flows.conclude_value(salt, flows.outcome_of(got)),
    }


def signals_expected(task: PlannedTask, log: list[dict[str, Any]]) -> Any:
    wants = int(task.input["wants"])
    sends = (task.outside or {}).get("sends", [])
    calls = _calls(log, task.task_id)
    firsts: dict[int, int] = {}  # signal k -> the call number of its first copy
    for n, send in enumerate(sends):
        firsts.setdefault(int(send["k"]), n)
    for k in range(wants):
        if _outcome(calls.get(firsts.get(k, -1), [])) != "ok":
            return None  # not sent (given up): the task may wait for ever; stranded is counted
    taken = [{"k": k, "copy": 0} for k in range(wants)]
    return {"quiet": True, "taken": taken}


def cancel_reason(task: PlannedTask, log: list[dict[str, Any]]) -> str | None:
    """The reason that must win: the first cancel call's (calls are made in order)."""
    calls = _calls(log, task.task_id)
    for n in sorted(calls):
        if _outcome(calls[n]) in ("ok", "finished"):
            return str(calls[n][0]["args"]["reason"])
    return None


def expect(plan: list[PlannedTask], log: list[dict[str, Any]]) -> list[PlannedTask]:
    """The plan with the expected results of the tasks the outside world answered."""
    out = []
    for task in plan:
        if task.name == "callback":
            task = dataclasses.replace(task, expected=callback_expected(task, log))
        elif task.name == "signals":
            task = dataclasses.replace(task, expected=signals_expected(task, log))
        out.append(task)
    return out


def _child_input(parent: PlannedTask, link: dict[str, Any], child_id: str) -> dict[str, Any]:
    salt, index = int(parent.input["salt"]), int(link.get("index", 0))
    if parent.name == "fantasks":
        return flows.leaf_input(salt, index, fail=index in parent.input.get("fail", []))
    if parent.name == "forkfan":
        return flows.leaf_input(salt, index)
    if parent.name == "invoker":
        second = ".second" in child_id.removeprefix(parent.task_id)
        fail = second and bool(parent.input.get("fail_second"))
        return flows.leaf_input(salt, 1 if second else 0, fail=fail)
    return flows.leaf_input(salt, index, hold=True)  # cancellable's held children


def check_children(
    report: Report,
    plan: list[PlannedTask],
    versions: dict[str, list[dict[str, Any]]],
    log: list[dict[str, Any]],
) -> set[str]:
    """Check every child task; return the parents whose result a bounded child failure changed."""
    planned = {task.task_id: task for task in plan}
    children: dict[str, list[str]] = defaultdict(list)
    changed: set[str] = set()
    counts: dict[str, int] = defaultdict(int)
    for child_id, history in sorted(versions.items()):
        if child_id in planned or not history:
            continue
        link = history[0].get("parent") or history[-1].get("parent") or {}
        parent = planned.get(str(link.get("task_id")))
        if parent is None:
            continue
        children[parent.task_id].append(child_id)
        final = history[-1]
        status, error = final.get("status"), final.get("error") or {}
        counts[f"child tasks {status}"] += 1
        if status not in FINISHED:
            report.violate(CHILD_STRANDED, f"{child_id}: {status}, v{len(history)}")
            continue
        if status == "failed" and error.get("type") in ALLOWED_FAILURES:
            changed.add(parent.task_id)
            counts["child tasks failed by the bounded failures"] += 1
            continue
        if parent.name == "mending":
            problem = steering.child_problem(parent.input, link, final)
            if problem is not None:
                report.violate(CHILD_WRONG, f"{child_id}: {problem}")
            continue
        state = _child_input(parent, link, child_id)
        if parent.name == "cancellable":
            if status != "cancelled":
                report.violate(CHILD_WRONG, f"{child_id} of a cancelled parent: {status}")
            continue
        if state["fail"]:
            if status != "failed" or error.get("type") != "LeafFailed":
                report.violate(
                    CHILD_WRONG, f"{child_id}: {status} {error.get('type')}, not LeafFailed"
                )
        elif status != "succeeded" or final.get("result") != flows.leaf_result(
            state["salt"], state["i"]
        ):
            report.violate(CHILD_WRONG, f"{child_id}: {status} {final.get('result')!r}")
    for task in plan:
        got = children.get(task.task_id, [])
        if len(got) != len(set(got)):
            report.violate(CHILD_TWICE, task.task_id)
        want = {
            "fantasks": task.input.get("children"),
            "invoker": 2,
            "mending": task.input.get("children"),
        }.get(task.name)
        final = (versions.get(task.task_id) or [{}])[-1]
        if want is not None and final.get("status") == "succeeded" and len(got) != want:
            report.violate(CHILD_MISSING, f"{task.task_id}: {len(got)} of {want} children")
    report.add_all("tasks", dict(sorted(counts.items())))
    return changed


def check_cancels(
    report: Report, plan: list[PlannedTask], final_of: Any, log: list[dict[str, Any]]
) -> None:
    """A cancelled task's error names the reason of the first cancel that reached it."""
    for task in plan:
        if task.ending != "cancelled":
            continue
        final = final_of(task.task_id) or {}
        reason = cancel_reason(task, log)
        message = str((final.get("error") or {}).get("message"))
        if final.get("status") == "cancelled" and reason and reason not in message:
            report.violate("cancels whose first reason did not win", f"{task.task_id}: {message}")


def check_outside(report: Report, log: list[dict[str, Any]]) -> None:
    """No second callback answer accepted; count what the outside world did."""
    counts: dict[str, int] = defaultdict(int)
    for entry in log:
        if "op" not in entry:
            continue
        counts[f"outside {entry['op']} {entry['outcome']}"] += 1
        if entry["op"] in ("complete", "fail") and entry.get("n") == 1 and entry["outcome"] == "ok":
            report.violate(SECOND_ANSWER, f"{entry['task_id']}: {entry['args']}")
        if entry["outcome"] == "gave up":
            report.violate(OUTSIDE_GAVE_UP, f"{entry['task_id']}: {entry['op']}")
        if entry.get("n") == -1 and entry["outcome"] in LANDED:
            report.violate(OVERSIZED_ACCEPTED, f"{entry['task_id']}: {entry['op']}")
    report.add_all("calls", dict(sorted(counts.items())))
