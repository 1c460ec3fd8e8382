"""The outside world of a chaos run: the signals, callback answers and cancels the harness sends.

Each task that waits for the outside world has a script, planned from the seed
(:func:`plan_for`) and run from the harness's loop, one call at a time:

- signals: ``client.signal`` in a fixed order, some right after the start (before the task
  waits for them), some seconds later (while it waits), some sent twice with the same
  ``signal_id`` (the copy has another payload: if a task ever took it, the checks see it);
- callbacks: once ``client.status(task_id).waiting_for`` shows the callback's id, complete
  it, fail it, complete it twice (or complete then fail: the second must be refused), or
  complete it late, after its timeout;
- cancels: ``client.cancel`` while the task is pending (right after its start), running, or
  waiting; some twice, with another reason (the first must win);
- links (``chaos.links``): a share of the callback tasks get their answers as racing POSTs to
  the callback's link instead;
- retries (``chaos.steering``): once the task, or one of its children, is seen ``failed``,
  ``client.retry`` it, as an operator does after deploying a fix, until the task succeeds.

Every call goes through a client of its own whose S3 and SQS calls fail, or whose process
"dies" in the middle of a call, at rates drawn from the seed (``chaos.faults.SenderFaults``).
A call that raised is made again after ``RETRY_S``, as an at-least-once sender does (a
webhook retried, a queue consumer redelivered), at most ``MAX_ATTEMPTS`` times. Every attempt
is logged (``outside.jsonl`` in the run dir) for the checks: they compare what each task took
with what was sent.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from chaos import links
from chaos.base import MAX_STATE_BYTES
from chaos.faults import SenderDied, SenderFaults
from chaos.flows import ANSWER
from chaos.steering import FORK_SUFFIX
from continuum import CallbackError, ContinuumError, PayloadTooLargeError, TaskFinishedError
from continuum._ops.client import Client

#: Seconds before a call that raised is made again, and the most attempts of one call.
RETRY_S = 0.3
MAX_ATTEMPTS = 10
#: How often a script looks at its task's status while it waits for something to act on.
POLL_S = 0.4
#: A script gives up waiting for its task after this long.
SCRIPT_TIMEOUT_S = 180.0
#: The callback task's timeout when it is answered in time (its answer comes within seconds;
#: a lost wake leaves the task to find it at this timeout), and when it is answered late.
CALLBACK_TIMEOUT_S = 12.0
LATE_TIMEOUT_S = 2.0
#: The ways the harness answers a callback, and how often each is drawn.
CALLBACK_MODES = {"complete": 0.35, "twice": 0.25, "fail": 0.15, "late": 0.25}
#: Where the harness cancels a cancellable task.
CANCEL_POINTS = ("pending", "running", "waiting")
#: The kinds that only a cancel ends: the harness cancels them at one of ``CANCEL_POINTS``.
CANCELLED_KINDS = ("cancellable", "gathering")
#: What a callback failure says.
REFUSED = "ChaosRefused"
#: The most rounds of retries a steered task gets (each flaky step needs one).
MAX_RETRY_ROUNDS = 6
#: Share of callback tasks first sent an answer over their limit (call number -1), and its
#: size: over the tasks' max_state_bytes, under the inbox's own limit.
OVERSIZED_SHARE = 0.4
OVERSIZED = "oversized"
OVERSIZED_BYTES = MAX_STATE_BYTES + 16 * 1024


def signal_id(k: int) -> str:
    """The id of the ``k``-th signal the harness sends a task (sortable: ``s00``, ``s01``)."""
    return f"s{k:02d}"


def plan_signals(rng: random.Random, wants: int) -> dict[str, Any]:
    """``wants`` signals and maybe one more, in order; some early, some late; some twice."""
    sends: list[dict[str, Any]] = []
    at = 0.0
    for k in range(wants + rng.randint(0, 1)):
        early = at < 0.5 and rng.random() < 0.4  # before the task waits for it
        at += rng.uniform(0.0, 0.2) if early else rng.uniform(1.0, 3.0)
        sends.append({"k": k, "id": signal_id(k), "payload": {"k": k, "copy": 0}, "at": at})
        if rng.random() < 0.3:
            again = at + rng.uniform(0.0, 2.0)
            sends.append({"k": k, "id": signal_id(k), "payload": {"k": k, "copy": 1}, "at": again})
    sends.sort(key=lambda send: (send["at"], send["payload"]["copy"]))
    return {"sends": sends}


def plan_callback(rng: random.Random) -> dict[str, Any]:
    """How the harness answers the task's callback (its timeout is in the task's input)."""
    mode = rng.choices(list(CALLBACK_MODES), weights=list(CALLBACK_MODES.values()))[0]
    first = rng.uniform(0.0, 1.0) if mode != "late" else rng.uniform(0.5, 2.0)
    actions = [_answer(rng, 0, "fail" if mode == "fail" else "complete", first)]
    if mode == "twice":
        second = rng.choice(("complete", "fail"))
        actions.append(_answer(rng, 1, second, first + rng.uniform(0.2, 1.5)))
    return {"mode": mode, "actions": actions, "oversized": rng.random() < OVERSIZED_SHARE}


def _answer(rng: random.Random, n: int, op: str, at: float) -> dict[str, Any]:
    if op == "complete":
        return {"n": n, "op": op, "at": at, "value": {"answer": n, "word": rng.randrange(1000)}}
    return {"n": n, "op": op, "at": at, "error_type": REFUSED, "message": f"refused ({n})"}


def plan_cancel(rng: random.Random) -> dict[str, Any]:
    """Where the harness cancels the task, and whether it asks twice."""
    point = rng.choice(CANCEL_POINTS)
    at = {"pending": 0.0, "running": rng.uniform(0.2, 1.2), "waiting": 0.0}[point]
    reasons = ["chaos cancel 1"] + (["chaos cancel 2"] if rng.random() < 0.3 else [])
    return {"point": point, "at": at, "reasons": reasons, "again": rng.uniform(0.1, 1.0)}


def plan_for(rng: random.Random, kind: str, state: dict[str, Any]) -> dict[str, Any] | None:
    """The outside world's script for a task of ``kind`` started with ``state`` (or None)."""
    if kind == "signals":
        return plan_signals(rng, int(state["wants"]))
    if kind == "callback":
        return plan_callback(rng)
    if kind in CANCELLED_KINDS:
        return plan_cancel(rng)
    return None


def _retry_targets(client: Client, task_id: str, status: Any, mode: str) -> list[str]:
    """What a retry script retries now: the failed task, or its failed children first (a
    child's failed report stays in the parent's inbox after its retry: ask the child)."""
    if mode == "children" and status.children is not None:
        failed = [
            child
            for child in status.children.failed_ids
            if client.status(child).status.value == "failed"
        ]
        if failed:
            return failed
    return [task_id] if status.status.value == "failed" else []


@dataclass
class Call:
    """One call of a script: made at ``due`` (epoch s) and again after each failure."""

    n: int
    op: str
    args: dict[str, Any]
    due: float
    attempts: int = 0
    outcome: str | None = None  # ok, answered, closed, finished, gave up (None: not yet)


@dataclass
class Script:
    """What the outside world does to one task (see the module docstring)."""

    task_id: str
    kind: str
    plan: dict[str, Any]
    started: float
    calls: list[Call] = field(default_factory=list)
    #: waiting for the task to reach something (a callback's id, a waiting status) first.
    waiting_for: str | None = None
    next_poll: float = 0.0
    callback_id: str | None = None
    done: bool = False
    #: rounds of retries made (a steered task's script).
    retries: int = 0
    #: answered through the callback's link (``chaos.links``).
    link: bool = False

    @classmethod
    def of(cls, task_id: str, kind: str, plan: dict[str, Any], started: float) -> Script:
        script = cls(task_id, kind, plan, started)
        if kind == "signals":
            for n, send in enumerate(plan["sends"]):
                args = {"name": "go", "payload": send["payload"], "signal_id": send["id"]}
                script.calls.append(Call(n, "signal", args, started + send["at"]))
        elif kind == "callback":
            script.waiting_for = "callback"
        elif "retry" in plan:
            script.waiting_for = "failed"
        elif "fork" in plan:
            script.waiting_for = "fork"
        elif kind in CANCELLED_KINDS:
            if plan["point"] == "waiting":
                script.waiting_for = "waiting"
            else:
                script.arm_cancels(started + plan["at"])
        return script

    def arm_cancels(self, at: float) -> None:
        for n, reason in enumerate(self.plan["reasons"]):
            self.calls.append(Call(n, "cancel", {"reason": reason}, at + n * self.plan["again"]))

    def arm_answers(self, callback_id: str, deadline: float | None, now: float) -> None:
        self.callback_id = callback_id
        late = self.plan["mode"] == "late" and deadline is not None
        base = deadline if late and deadline is not None else now
        if self.plan.get("oversized"):  # refused, before the answer the task takes
            args = {"callback_id": callback_id, OVERSIZED: OVERSIZED_BYTES}
            self.calls.append(Call(-1, "complete", args, base + self.plan["actions"][0]["at"]))
        for action in self.plan["actions"]:
            args = {"callback_id": callback_id}
            if action["op"] == "complete":
                args["result"] = action["value"]
            else:
                args["error_type"], args["message"] = action["error_type"], action["message"]
            self.calls.append(Call(action["n"], action["op"], args, base + action["at"]))


class Outside:
    """Runs the scripts of a run through a client whose calls fail and die.

    Args:
        client: the harness's sender client (its boto3 clients carry ``faults``).
        status_client: a client without faults, to read tasks' status.
        faults: the sender's faults (told which task each call is about).
        log_path: where every attempt is logged (JSON lines).
    """

    def __init__(
        self, client: Client, status_client: Client, faults: SenderFaults, log_path: str
    ) -> None:
        self.client = client
        self.status_client = status_client
        self.faults = faults
        self.log_path = log_path
        self.scripts: list[Script] = []
        self.log: list[dict[str, Any]] = []

    @property
    def busy(self) -> bool:
        """Some script has a call to make or something to wait for."""
        return any(not s.done for s in self.scripts)

    def add(self, task_id: str, kind: str, plan: dict[str, Any] | None) -> None:
        if plan is not None:
            script = Script.of(task_id, kind, plan, time.time())
            script.link = kind == "callback" and links.linked(task_id)
            self.scripts.append(script)

    def run(self) -> None:
        """Make every call that is due now (each script's calls in order)."""
        now = time.time()
        for script in self.scripts:
            if not script.done:
                self._advance(script, now)

    def _advance(self, script: Script, now: float) -> None:
        steered = "retry" in script.plan or "fork" in script.plan
        timeout = SCRIPT_TIMEOUT_S * (5 if steered else 1)  # they follow the task to its end
        if now - script.started > timeout and script.waiting_for is not None:
            script.waiting_for = None
            if script.kind in CANCELLED_KINDS:  # only a cancel ends it: cancel it now
                self._note(script, None, "not seen waiting in time: cancels now")
                script.arm_cancels(now)
            else:  # its callback times out by itself
                self._note(script, None, "script timed out")
                script.done = True
                return
        if script.waiting_for is not None:
            if now >= script.next_poll:
                script.next_poll = now + POLL_S
                self._look(script, now)
            return
        pending = [call for call in script.calls if call.outcome is None]
        if not pending:
            if "retry" in script.plan and script.retries < MAX_RETRY_ROUNDS + 1:
                script.waiting_for = "failed"  # look again: it may fail again
                return
            if "fork" in script.plan and script.calls[-1].outcome == "ok":
                script.waiting_for = "fork ended"  # busy until the fork ends
                return
            script.done = True
            return
        call = pending[0]  # in order: a signal is sent only once the one before it was
        if now >= call.due:
            self._make(script, call, now)

    def _look(self, script: Script, now: float) -> None:
        """Poll the task for what the script waits for before it acts."""
        status = self.status_client.status(script.task_id)
        if script.waiting_for == "failed":
            self._look_for_failures(script, status, now)
            return
        if script.waiting_for == "fork":
            if status.status.value == "waiting" or status.status.finished:
                fork_id = f"{script.task_id}{FORK_SUFFIX}"
                script.calls.append(Call(0, "fork", {"new_id": fork_id}, now))
                script.waiting_for = None
                self._note(script, None, f"forks it {status.status.value}", fork_id=fork_id)
            return
        if script.waiting_for == "fork ended":
            fork = self.status_client.status(f"{script.task_id}{FORK_SUFFIX}")
            if fork.status.finished:
                self._note(script, None, f"fork {fork.status.value}")
                script.waiting_for, script.done = None, True
            return
        if status.status.finished:
            self._note(script, None, f"task {status.status.value} before the harness acted")
            script.waiting_for, script.done = None, True
            return
        if script.waiting_for == "callback":
            for waiter in status.waiting_for:
                if waiter.kind == "callback" and waiter.name == ANSWER and waiter.id:
                    deadline = waiter.deadline.timestamp() if waiter.deadline else None
                    script.arm_answers(waiter.id, deadline, now)
                    script.waiting_for = None
                    self._note(
                        script, None, "callback id seen", callback_id=waiter.id, deadline=deadline
                    )
                    return
        elif script.waiting_for == "waiting" and status.status.value == "waiting":
            script.waiting_for = None
            script.arm_cancels(now)

    def _look_for_failures(self, script: Script, status: Any, now: float) -> None:
        """A steered task: retry what failed; done once the task succeeded (or gave up)."""
        if status.status.value in ("succeeded", "cancelled"):
            self._note(script, None, f"task {status.status.value}", retries=script.retries)
            script.waiting_for, script.done = None, True
            return
        targets = _retry_targets(self.status_client, script.task_id, status, script.plan["retry"])
        if not targets:
            return
        if script.retries >= MAX_RETRY_ROUNDS:
            self._note(script, None, "gave up retrying", retries=script.retries)
            script.waiting_for, script.done = None, True
            return
        script.retries += 1
        for target in targets:
            n = len(script.calls)
            script.calls.append(Call(n, "retry", {"target": target}, now))
        script.waiting_for = None  # make the calls, then look again

    def _retry(self, task_id: str) -> None:
        """Retry a failed task; one that is no longer failed was retried by an attempt that
        died after its write: send its continuation again, as ``continuum resume`` does."""
        try:
            self.client.retry(task_id)
        except ContinuumError as exc:
            if "retry takes a failed task" not in exc.message:
                raise
            if not self.status_client.status(task_id).status.finished:
                self.client.resume(task_id)

    def _fork(self, task_id: str, new_id: str) -> None:
        """Fork the task from its latest record; a fork whose id is taken was made by an
        attempt that died after creating it: send its first continuation again."""
        try:
            self.client.fork(task_id, version="latest", new_id=new_id)
        except ContinuumError as exc:
            if "is taken" not in exc.message:
                raise
            self.client.resume(new_id)

    def _make(self, script: Script, call: Call, now: float) -> None:
        call.attempts += 1
        self.faults.task_id = script.task_id
        error: str | None = None
        raced: dict[str, Any] | None = None
        try:
            if call.op == "complete" and script.link and OVERSIZED not in call.args:
                callback_id, result = call.args["callback_id"], call.args["result"]
                raced = links.answer(self.client, callback_id, result)
                call.outcome = raced["outcome"]
            elif call.op == "signal":
                self.client.signal(script.task_id, **call.args)
            elif call.op == "complete" and OVERSIZED in call.args:
                blob = {"blob": "x" * int(call.args[OVERSIZED])}
                self.client.complete_callback(call.args["callback_id"], blob)
            elif call.op == "complete":
                self.client.complete_callback(call.args["callback_id"], call.args["result"])
            elif call.op == "fail":
                self.client.fail_callback(
                    call.args["callback_id"], call.args["error_type"], call.args["message"]
                )
            elif call.op == "retry":
                self._retry(call.args["target"])
            elif call.op == "fork":
                self._fork(script.task_id, call.args["new_id"])
            else:
                self.client.cancel(script.task_id, call.args["reason"])
            call.outcome = call.outcome or "ok"
        except TaskFinishedError:
            call.outcome = "finished"
        except PayloadTooLargeError as exc:
            call.outcome, error = "too large", exc.message
        except CallbackError as exc:
            call.outcome = "answered" if "already answered" in exc.message else "closed"
            error = exc.message
        except (Exception, SenderDied) as exc:
            error = f"{type(exc).__name__}: {exc}"[:300]
            # A fork waits out its original's running invocations (a refusal, each time).
            if call.attempts >= MAX_ATTEMPTS * (6 if call.op == "fork" else 1):
                call.outcome = "gave up"
            else:
                call.due = now + RETRY_S
        finally:
            self.faults.task_id = None
        self._note(script, call, call.outcome or "retry", error=error, link=raced)

    def _note(self, script: Script, call: Call | None, outcome: str, **extra: Any) -> None:
        entry: dict[str, Any] = {"t": time.time(), "task_id": script.task_id, "kind": script.kind}
        if call is not None:
            entry.update(n=call.n, op=call.op, attempt=call.attempts, args=call.args)
        entry.update(outcome=outcome, **{k: v for k, v in extra.items() if v is not None})
        self.log.append(entry)
        with open(self.log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")
