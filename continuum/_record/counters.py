"""What a task record counts: each step's durations, and what happened over the task's life.

Both are plain dataclasses (pydantic validates and serialises them inside the record) because
they are updated after every step, where a model's validating attribute writes would cost more
than the rest of the step's bookkeeping. Their methods are written by hand (``plain.py``):
``@dataclass`` then only collects the fields that pydantic reads, where generating the
methods cost about 1 ms of the worker's cold import for the two.
"""

# The models' annotations are objects, not strings (no ``from __future__ import annotations``):
# pydantic would compile and evaluate each string when it builds a model, about 15 us a field
# (about 3 ms of the worker's cold import over the record's and the message's).
from dataclasses import dataclass

from continuum._base.plain import Plain


@dataclass(init=False, repr=False, eq=False)
class StepStats(Plain):
    """Online statistics of one step's durations, kept in the record.

    Durations of steps are roughly log-normal, so the mean and variance are kept of
    ``log(seconds)`` (Welford's method); ``max_s`` guards the tail for small samples.
    """

    count: int = 0
    log_mean: float = 0.0
    log_m2: float = 0.0
    max_s: float = 0.0
    total_s: float = 0.0

    def __init__(
        self,
        count: int = 0,
        log_mean: float = 0.0,
        log_m2: float = 0.0,
        max_s: float = 0.0,
        total_s: float = 0.0,
    ) -> None:
        self.count = count
        self.log_mean = log_mean
        self.log_m2 = log_m2
        self.max_s = max_s
        self.total_s = total_s


@dataclass(init=False, repr=False, eq=False)
class Counters(Plain):
    """What happened to the task, summed over its whole life."""

    invocations: int = 0
    continuations: int = 0
    turns: int = 0
    steps_executed: int = 0
    steps_replayed: int = 0
    step_failures: int = 0
    saves: int = 0
    bytes_saved: int = 0
    recoveries: int = 0
    preemptions: int = 0
    preempted_s: float = 0.0
    #: times the task went ``waiting``, and timer hops of its long waits (no user code ran).
    waits: int = 0
    hops: int = 0

    def __init__(
        self,
        invocations: int = 0,
        continuations: int = 0,
        turns: int = 0,
        steps_executed: int = 0,
        steps_replayed: int = 0,
        step_failures: int = 0,
        saves: int = 0,
        bytes_saved: int = 0,
        recoveries: int = 0,
        preemptions: int = 0,
        preempted_s: float = 0.0,
        waits: int = 0,
        hops: int = 0,
    ) -> None:
        self.invocations = invocations
        self.continuations = continuations
        self.turns = turns
        self.steps_executed = steps_executed
        self.steps_replayed = steps_replayed
        self.step_failures = step_failures
        self.saves = saves
        self.bytes_saved = bytes_saved
        self.recoveries = recoveries
        self.preemptions = preemptions
        self.preempted_s = preempted_s
        self.waits = waits
        self.hops = hops
