"""What a task record counts: each step's durations, and what happened over the task's life.

Both are dataclasses (pydantic validates and serialises them inside the record), not models,
because they are updated after every step, where a model's validating attribute writes would
cost more than the rest of the step's bookkeeping.
"""

# The models' annotations are objects, not strings (no ``from __future__ import annotations``):
# pydantic would compile and evaluate each string when it builds a model, on the worker's cold
# import.
from dataclasses import dataclass


@dataclass
class StepStats:
    """Online statistics of one step's durations, kept in the record.

    Durations of steps are roughly log-normal, so the mean and variance are kept of
    ``log(seconds)`` (Welford's method); ``max_s`` guards the tail for small samples.
    """

    count: int = 0
    log_mean: float = 0.0
    log_m2: float = 0.0
    max_s: float = 0.0
    total_s: float = 0.0


# No slots: a user may read ``vars(status.counters)``, as before.
@dataclass
class Counters:
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
    #: times ``client.retry`` ran the failed task again (each run has its own trace root).
    retries: int = 0
