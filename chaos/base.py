"""The chaos app, and the ledger its steps write every real execution to.

Each step sleeps a few milliseconds (its "work"), then appends one JSON line to the ledger
named by ``CHAOS_LEDGER`` — task id, turn, idempotency key, step, invocation — and fsyncs it
before returning. The ledger lives outside S3 and survives SIGKILL, so the harness can count
the executions that really happened and compare them with what the records' journals say.

The tasks are registered on :data:`app` by ``chaos.tasks`` (batch, agent and the hardening
cases) and ``chaos.flows`` (waits and fan-out); importing ``chaos.tasks`` registers both.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from typing import Any

import continuum
from continuum import Continuum
from continuum._define.steps import active_runner

#: The environment variable naming the ledger file (no ledger when unset).
LEDGER_ENV = "CHAOS_LEDGER"
#: Values over this go to blobs: the blob task's state and pages pass it, no other value does.
INLINE_LIMIT_BYTES = 4096
#: continuum removes the blobs a write superseded only while the writer's lease has 5 s left
#: (else the finish sweep does). Invocations of 1 s never have that, so the blob task's
#: invocations are this much longer, and its safety margin as much larger: it does as much
#: work per invocation as the others, and superseded blobs are removed mid-run, as in a
#: real 15-minute invocation.
LONG_LEASE_S = 6.0
#: Tasks whose invocations are LONG_LEASE_S longer (by the name their task ids start with).
LONG_LEASE_TASKS = ("blobs",)
#: The app's safety margin (continuum's default); the blob task's is LONG_LEASE_S larger.
SAFETY_MARGIN_S = 0.25
#: A running task's inbox is listed this often (continuum's default is 60 s, for 15-minute
#: invocations): a cancel request reaches a task that runs through 1 s invocations within a
#: few of them, at a step boundary, not only when it next waits.
INBOX_POLL_S = 2.0
#: The longest delay the workers give a message (SQS allows 900 s): a sleep of a few seconds
#: is then a chain of timer hops, as a sleep of hours is on AWS.
TIMER_MAX_DELAY_S = 2

#: The tasks' limit on a value (under the inbox's own 256 KiB), so that an answer between the
#: two meets the task's limit: the sender must be refused, the task must not see it.
MAX_STATE_BYTES = 128 * 1024

app = Continuum(
    max_state_bytes=MAX_STATE_BYTES,
    default_step_s=0.1,
    persist_every_s=0.25,
    visibility_margin_s=1,
    inline_limit_bytes=INLINE_LIMIT_BYTES,
    safety_margin_s=SAFETY_MARGIN_S,
    inbox_poll_s=INBOX_POLL_S,
)

#: The invocation the steps of this process run in (set by ``chaos.worker``).
_invocation: dict[str, Any] = {"id": "local", "deadline": None}


def set_invocation(invocation_id: str, deadline: float | None) -> None:
    """Name the emulated Lambda invocation (and its wall-clock deadline) steps run in."""
    _invocation["id"] = invocation_id
    _invocation["deadline"] = deadline


def digest_int(*parts: object) -> int:
    """A stable hash of ``parts`` (Python's ``hash`` is salted per process)."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def duration_s(low: int, high: int, *parts: object) -> float:
    """A deterministic duration between ``low`` and ``high`` milliseconds, in seconds."""
    return (low + digest_int("ms", *parts) % (high - low + 1)) / 1000.0


def idempotency_key() -> str:
    """The running step's idempotency key (``task_id/turn/path/name#ordinal``)."""
    current = getattr(continuum, "current_context", None)
    if current is not None:
        return str(current().idempotency_key)
    runner = active_runner.get()  # before the library had current_context()
    return str(getattr(runner, "active_key", None))


def invocation_budget(task_id: str | None, budget_s: float) -> float:
    """The budget of an invocation for a message of ``task_id`` (ids start with the name)."""
    long = task_id is not None and task_id.split("-", 1)[0] in LONG_LEASE_TASKS
    return budget_s + LONG_LEASE_S if long else budget_s


def work(step: str, seconds: float) -> None:
    """Do a step's work: sleep, then record the execution in the ledger, durably."""
    time.sleep(seconds)
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return
    key = idempotency_key()
    task_id, turn, _ = key.split("/", 2)
    line = {
        "task_id": task_id,
        "turn": int(turn),
        "key": key,
        "step": step,
        "inv": _invocation["id"],
        "deadline": _invocation["deadline"],
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
        "t": time.time(),
    }
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
