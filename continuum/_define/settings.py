"""Settings: the budget policy, limits and margins of an app, in one frozen object.

The worker, the client, the dead-letter handler and the local runtime each read what they
need from it; a task may override the budget rule (``confidence``, ``safety_margin_s``).
"""

from __future__ import annotations

from dataclasses import dataclass

from continuum._base.plain import Frozen
from continuum._record.codec import DEFAULT_INLINE_LIMIT_BYTES
from continuum.errors import ConfigurationError

#: Seconds kept free after the predicted step and save, for everything not predicted
#: (logging, the SQS send's tail, clock skew between the context and our clock).
SAFETY_MARGIN_S = 0.25
#: What a step never seen before is assumed to take.
DEFAULT_STEP_S = 1.0
#: What one record write, or one SQS send, is assumed to take until measured.
DEFAULT_WRITE_S = 0.1
#: The share of step durations the prediction should cover. On the simulated agent workload
#: of benchmarks/budget_fill.py, 0.99 overran twice in 12 seeds (steps 2.6 and 4.1 sd out);
#: 0.995 overran in none of 24 and still fills invocations fuller than the best fixed margin.
DEFAULT_CONFIDENCE = 0.995
#: For a preemptible step an overrun costs only the discarded part of the step, not a killed
#: invocation, so it may start on a far lower confidence. 0.35 is the lowest value that kept
#: discarded work under 1% of useful work in all 40 seeds of benchmarks/budget_fill.py.
DEFAULT_PREEMPTIBLE_CONFIDENCE = 0.35
#: A task that continues more often than this fails: it is probably not making progress.
DEFAULT_MAX_CONTINUATIONS = 10_000
#: Save the journal at least this often (seconds of work) so a crash loses little.
DEFAULT_PERSIST_EVERY_S = 60.0
#: The largest state or result accepted, as JSON (blobs are compressed beyond the inline limit).
DEFAULT_MAX_STATE_BYTES = 64 * 1024 * 1024
#: Suspensions in a row that complete no step before a task fails: it cannot make progress.
DEFAULT_MAX_IDLE_SUSPENSIONS = 5
#: Consecutive worker deaths at one step after which the task fails instead of trying again.
DEFAULT_MAX_STEP_CRASHES = 3
#: While a task runs, its inbox is listed this often (one LIST), so a cancel request takes
#: effect within this long; a waiting task's inbox is listed when a wake or timer arrives.
DEFAULT_INBOX_POLL_S = 60.0
#: Seconds after an invocation's deadline at which its message reappears if the worker dies.
DEFAULT_VISIBILITY_MARGIN_S = 5


# A frozen dataclass with its methods written by hand (``plain.py``) but for the frozen
# ``__setattr__`` and ``__delattr__``: generating them all cost about 1 ms of the worker's cold
# import. It behaves as the frozen dataclass it was (``replace``, ``fields``, subclassing,
# the repr, equality, hash and FrozenInstanceError).
@dataclass(init=False, repr=False, eq=False, frozen=True)
class Settings(Frozen):
    """How an app's tasks run. See :class:`continuum.Continuum` for each field."""

    #: the share of a step's durations the budget rule covers.
    confidence: float = DEFAULT_CONFIDENCE
    #: seconds kept free beyond the predicted step and save.
    safety_margin_s: float = SAFETY_MARGIN_S
    #: the assumed duration of a step never seen before.
    default_step_s: float = DEFAULT_STEP_S
    #: the confidence of the budget rule for preemptible steps.
    preemptible_confidence: float = DEFAULT_PREEMPTIBLE_CONFIDENCE
    #: save the journal at least this often while steps complete.
    persist_every_s: float = DEFAULT_PERSIST_EVERY_S
    #: states and results larger than this (JSON bytes) go to compressed blobs.
    inline_limit_bytes: int = DEFAULT_INLINE_LIMIT_BYTES
    #: the largest state, task result or step result accepted (JSON bytes).
    max_state_bytes: int = DEFAULT_MAX_STATE_BYTES
    #: seconds after an invocation's deadline at which its message reappears if the worker
    #: dies (the claim sets its visibility with one ChangeMessageVisibility call). None keeps
    #: the queue's visibility timeout: a call less per continuation, slower recovery.
    visibility_margin_s: int | None = DEFAULT_VISIBILITY_MARGIN_S
    #: consecutive worker deaths at one step after which the task fails.
    max_step_crashes: int = DEFAULT_MAX_STEP_CRASHES
    #: consecutive suspensions without progress after which the task fails.
    max_idle_suspensions: int = DEFAULT_MAX_IDLE_SUSPENSIONS
    #: while a task runs its inbox is listed this often (one S3 LIST): a cancel request takes
    #: effect within this long.
    inbox_poll_s: float = DEFAULT_INBOX_POLL_S
    #: HMAC keys of continuation messages: the first signs, any verifies (empty: unsigned).
    signing_keys: tuple[str, ...] = ()

    def __init__(
        self,
        confidence: float = DEFAULT_CONFIDENCE,
        safety_margin_s: float = SAFETY_MARGIN_S,
        default_step_s: float = DEFAULT_STEP_S,
        preemptible_confidence: float = DEFAULT_PREEMPTIBLE_CONFIDENCE,
        persist_every_s: float = DEFAULT_PERSIST_EVERY_S,
        inline_limit_bytes: int = DEFAULT_INLINE_LIMIT_BYTES,
        max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
        visibility_margin_s: int | None = DEFAULT_VISIBILITY_MARGIN_S,
        max_step_crashes: int = DEFAULT_MAX_STEP_CRASHES,
        max_idle_suspensions: int = DEFAULT_MAX_IDLE_SUSPENSIONS,
        inbox_poll_s: float = DEFAULT_INBOX_POLL_S,
        signing_keys: tuple[str, ...] = (),
    ) -> None:
        set_field = object.__setattr__
        set_field(self, "confidence", confidence)
        set_field(self, "safety_margin_s", safety_margin_s)
        set_field(self, "default_step_s", default_step_s)
        set_field(self, "preemptible_confidence", preemptible_confidence)
        set_field(self, "persist_every_s", persist_every_s)
        set_field(self, "inline_limit_bytes", inline_limit_bytes)
        set_field(self, "max_state_bytes", max_state_bytes)
        set_field(self, "visibility_margin_s", visibility_margin_s)
        set_field(self, "max_step_crashes", max_step_crashes)
        set_field(self, "max_idle_suspensions", max_idle_suspensions)
        set_field(self, "inbox_poll_s", inbox_poll_s)
        set_field(self, "signing_keys", signing_keys)
        self.__post_init__()

    def __post_init__(self) -> None:
        # Also what pydantic calls when it validates a Settings (it does not call __init__).
        for name in ("confidence", "preemptible_confidence"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ConfigurationError(f"{name} must be between 0 and 1 (exclusive), got {value}")
        for name in ("safety_margin_s", "default_step_s", "persist_every_s", "inbox_poll_s"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} must not be negative, got {getattr(self, name)}")
        for name in ("inline_limit_bytes", "max_state_bytes", "max_step_crashes"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be positive, got {getattr(self, name)}")
        if self.visibility_margin_s is not None and self.visibility_margin_s < 0:
            raise ConfigurationError("visibility_margin_s must not be negative")
