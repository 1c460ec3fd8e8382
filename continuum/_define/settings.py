"""Settings: the budget policy, limits and margins of an app, in one frozen object.

Each setting is written once, as a field of :class:`Settings`: its name, its type, its
default and what it means. ``Continuum(...)`` takes the same fields as keywords (its
signature is made from them, ``_app/options.py``), and ``app.update_settings`` changes them.
The worker, the client, the dead-letter handler and the local runtime each read what they
need from it; a task may override the budget rule (``confidence``, ``safety_margin_s``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from continuum._base.callback_links import CallbackLinks
from continuum._record.codec import DEFAULT_INLINE_LIMIT_BYTES
from continuum.errors import ConfigurationError

# The defaults the layers below the app also read (the budget rule, the turn, the tasks).
# Each is documented where it is a setting, in ``Settings``; a comment here says why the value.
SAFETY_MARGIN_S = 0.25
DEFAULT_STEP_S = 1.0
#: What one record write, or one SQS send, is assumed to take until measured.
DEFAULT_WRITE_S = 0.1
# On the simulated agent workload of benchmarks/budget_fill.py, 0.99 overran twice in 12
# seeds (steps 2.6 and 4.1 sd out); 0.995 overran in none of 24 and still fills invocations
# fuller than the best fixed margin.
DEFAULT_CONFIDENCE = 0.995
# An overrun of a preemptible step costs only its discarded part, not a killed invocation:
# 0.35 is the lowest value that kept discarded work under 1% of useful work in all 40 seeds
# of benchmarks/budget_fill.py.
DEFAULT_PREEMPTIBLE_CONFIDENCE = 0.35
#: A task that continues more often than this fails: it is probably not making progress.
DEFAULT_MAX_CONTINUATIONS = 10_000
DEFAULT_PERSIST_EVERY_S = 60.0
DEFAULT_MAX_STATE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_IDLE_SUSPENSIONS = 5
DEFAULT_MAX_STEP_CRASHES = 3
DEFAULT_INBOX_POLL_S = 60.0
DEFAULT_VISIBILITY_MARGIN_S = 5

#: What each field's annotation accepts at run time (a bool is refused where a number is).
_RUNTIME_TYPES: dict[str, tuple[type, ...]] = {
    "float": (int, float),
    "int": (int,),
    "int | None": (int, type(None)),
    "tuple[str, ...]": (tuple,),
    "str | None": (str, type(None)),
}


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How an app's tasks run: each field is a keyword of :class:`continuum.Continuum`."""

    #: The share of a step's durations the budget rule covers: a step starts only if its
    #: predicted duration at this confidence, and the save after it, fit in the time left.
    confidence: float = DEFAULT_CONFIDENCE
    #: Seconds kept free beyond the predicted step and save, for everything not predicted
    #: (logging, the SQS send's tail, clock skew between the context and our clock).
    safety_margin_s: float = SAFETY_MARGIN_S
    #: The assumed duration of a step never seen before.
    default_step_s: float = DEFAULT_STEP_S
    #: The confidence of the budget rule for preemptible steps.
    preemptible_confidence: float = DEFAULT_PREEMPTIBLE_CONFIDENCE
    #: Save the journal at least this often (seconds of work) so that a crash loses little.
    persist_every_s: float = DEFAULT_PERSIST_EVERY_S
    #: States and results larger than this (JSON bytes) go to compressed blobs.
    inline_limit_bytes: int = DEFAULT_INLINE_LIMIT_BYTES
    #: The largest state, task result or step result accepted (JSON bytes).
    max_state_bytes: int = DEFAULT_MAX_STATE_BYTES
    #: Seconds after an invocation's deadline at which its message reappears if the worker
    #: dies (the claim sets its visibility with one ChangeMessageVisibility call). None keeps
    #: the queue's visibility timeout: a call less per continuation, slower recovery.
    visibility_margin_s: int | None = DEFAULT_VISIBILITY_MARGIN_S
    #: Consecutive worker deaths at one step after which the task fails instead of trying
    #: again.
    max_step_crashes: int = DEFAULT_MAX_STEP_CRASHES
    #: Suspensions in a row that complete no step before a task fails: it cannot progress.
    max_idle_suspensions: int = DEFAULT_MAX_IDLE_SUSPENSIONS
    #: While a task runs its inbox is listed this often (one S3 LIST): a cancel request takes
    #: effect within this long (a waiting task's inbox is listed when a wake or timer comes).
    inbox_poll_s: float = DEFAULT_INBOX_POLL_S
    #: HMAC keys of continuation messages: the first signs, any verifies (empty: unsigned).
    signing_keys: tuple[str, ...] = ()
    #: The base URL of the callback link endpoint (the stack's link function URL, or
    #: ``continuum dev``'s pages): each callback then has a signed link, ``cb.url``, which a
    #: person opens to answer it. Default: ``CONTINUUM_CALLBACK_URL``; None: no links.
    callback_url: str | None = None

    def links(self) -> CallbackLinks | None:
        """The callback link endpoint with the keys that sign its links (None: no links)."""
        if self.callback_url is None:
            return None
        return CallbackLinks(self.callback_url, self.signing_keys)

    def __post_init__(self) -> None:
        # Also what pydantic calls when it validates a Settings (it does not call __init__).
        for field in fields(self):
            value, accepted = getattr(self, field.name), _RUNTIME_TYPES.get(str(field.type))
            if accepted and (isinstance(value, bool) or not isinstance(value, accepted)):
                raise ConfigurationError(f"{field.name} must be {field.type}, got {value!r}")
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
        if self.callback_url is not None and not self.callback_url.startswith(
            ("https://", "http://")
        ):
            raise ConfigurationError(
                f"callback_url must be an http(s) URL, got {self.callback_url!r}"
            )
