"""The budget: remaining time, learned step durations, and the rule that says "not now".

Before each live step continuum asks: will the step, at the chosen confidence, plus the cost of
saving, plus a safety margin, fit in the time this invocation has left? If not, the task
suspends *before* the step. Durations are learned per step name and kept in the record, so the
estimate improves over the life of a task and survives continuations.
"""

from __future__ import annotations

import functools
import math
import signal
import threading
from collections.abc import Callable
from statistics import NormalDist
from typing import Any

from continuum._define.settings import (
    DEFAULT_CONFIDENCE,
    DEFAULT_PREEMPTIBLE_CONFIDENCE,
    DEFAULT_STEP_S,
    DEFAULT_WRITE_S,
    SAFETY_MARGIN_S,
    Settings,
)
from continuum._record.model import StepStats
from continuum._steps.control_flow import Preempted

#: Runs a step (a thunk) and interrupts it with Preempted after the given seconds.
Preemptor = Callable[[Callable[[], Any], float], Any]

#: Durations below this are clamped before taking the logarithm: a step that sometimes takes
#: microseconds (a cache hit) would otherwise inflate the spread in log space without limit.
MIN_DURATION_S = 1e-3
#: A prediction never exceeds this multiple of the longest duration seen. It only binds when
#: the log-normal fit is poor (a bimodal step) or the sample is tiny.
MAX_OVER_LONGEST = 3.0


def observe(stats: StepStats, seconds: float) -> None:
    """Fold one measured duration into ``stats`` (Welford's update on log-seconds)."""
    x = math.log(max(seconds, MIN_DURATION_S))
    stats.count += 1
    delta = x - stats.log_mean
    stats.log_mean += delta / stats.count
    stats.log_m2 += delta * (x - stats.log_mean)
    stats.max_s = max(stats.max_s, seconds)
    stats.total_s += seconds


@functools.lru_cache(maxsize=64)
def _z(confidence: float) -> float:
    """The standard normal quantile (cached: the rule runs before every step)."""
    return NormalDist().inv_cdf(confidence)


def predict(stats: StepStats | None, *, confidence: float, default_s: float) -> float:
    """The duration a new run of the step stays under with probability ``confidence``.

    With two or more samples this is the upper prediction bound of a log-normal fit:
    ``exp(mean + t * sd * sqrt(1 + 1/n))``, where ``t`` widens the normal quantile for small
    samples (Cornish-Fisher approximation of Student's t), capped at ``MAX_OVER_LONGEST``
    times the longest duration seen. One sample gives twice that sample; none gives
    ``default_s``.
    """
    if stats is None or stats.count == 0:
        return default_s
    if stats.count == 1:
        return 2.0 * stats.max_s
    n = stats.count
    sd = math.sqrt(stats.log_m2 / (n - 1))
    z = _z(confidence)
    t = z + (z**3 + z) / (4 * (n - 1))
    fitted = math.exp(stats.log_mean + t * sd * math.sqrt(1 + 1 / n))
    return min(fitted, MAX_OVER_LONGEST * stats.max_s)


class Budget:
    """The time rule of one invocation.

    Args:
        remaining: seconds left in this invocation (from the Lambda context).
        confidence: the share of step durations a prediction covers.
        margin_s: seconds kept free beyond the predicted step and save.
        default_step_s: the assumed duration of a step never seen before.
        preemptible_confidence: the confidence used for preemptible steps.
        send_stats: measured durations of continuation sends (the record keeps them).
    """

    __slots__ = (
        "_save_cost",
        "confidence",
        "default_step_s",
        "margin_s",
        "preemptible_confidence",
        "remaining",
        "send_stats",
    )

    def __init__(
        self,
        remaining: Callable[[], float],
        confidence: float = DEFAULT_CONFIDENCE,
        margin_s: float = SAFETY_MARGIN_S,
        default_step_s: float = DEFAULT_STEP_S,
        preemptible_confidence: float = DEFAULT_PREEMPTIBLE_CONFIDENCE,
        send_stats: StepStats | None = None,
    ) -> None:
        self.remaining = remaining
        self.confidence = confidence
        self.margin_s = margin_s
        self.default_step_s = default_step_s
        self.preemptible_confidence = preemptible_confidence
        self.send_stats = send_stats
        self._save_cost: tuple[StepStats, int, int, float] | None = None

    @classmethod
    def of(
        cls, remaining: Callable[[], float], settings: Settings, *, send_stats: StepStats | None
    ) -> Budget:
        """The budget of one invocation under ``settings`` (a task's, its overrides applied)."""
        return cls(
            remaining=remaining,
            confidence=settings.confidence,
            margin_s=settings.safety_margin_s,
            default_step_s=settings.default_step_s,
            preemptible_confidence=settings.preemptible_confidence,
            send_stats=send_stats,
        )

    def save_cost(self, save_stats: StepStats) -> float:
        """Seconds a suspension needs: one record write and one send, each as measured."""
        # Asked before every step, changed only by a write: remembered per sample count.
        sends = self.send_stats.count if self.send_stats is not None else 0
        cached = self._save_cost
        if (
            cached is not None
            and cached[0] is save_stats
            and cached[1] == save_stats.count
            and cached[2] == sends
        ):
            return cached[3]
        write = predict(save_stats, confidence=self.confidence, default_s=DEFAULT_WRITE_S)
        send = predict(self.send_stats, confidence=self.confidence, default_s=DEFAULT_WRITE_S)
        cost = write + send
        self._save_cost = (save_stats, save_stats.count, sends, cost)
        return cost

    def expect(self, stats: StepStats | None, *, preemptible: bool = False) -> float:
        """The step's predicted duration at the confidence that applies to it."""
        confidence = self.preemptible_confidence if preemptible else self.confidence
        return predict(stats, confidence=confidence, default_s=self.default_step_s)

    def need(
        self, stats: StepStats | None, save_stats: StepStats, *, preemptible: bool = False
    ) -> float:
        """Seconds a step needs before it may start: predicted step, save and margin."""
        return (
            self.expect(stats, preemptible=preemptible) + self.save_cost(save_stats) + self.margin_s
        )

    def refuse(
        self,
        name: str,
        stats: StepStats | None,
        save_stats: StepStats,
        *,
        preemptible: bool = False,
    ) -> str | None:
        """Return why step ``name`` must not start now, or None if it fits."""
        left = self.remaining()
        save = self.save_cost(save_stats)
        # The prediction never exceeds MAX_OVER_LONGEST x the longest duration seen: when even
        # that fits, skip the quantile arithmetic (the same decision, faster).
        if (
            stats is not None
            and stats.count > 1
            and MAX_OVER_LONGEST * stats.max_s + save + self.margin_s <= left
        ):
            return None
        expected = self.expect(stats, preemptible=preemptible)
        if expected + save + self.margin_s <= left:
            return None
        return (
            f"step {name!r} expects up to {expected:.2f}s + save {save:.2f}s"
            f" + margin {self.margin_s:.2f}s; {left:.2f}s left"
        )

    def spare(self, save_stats: StepStats) -> float:
        """Seconds left beyond what a suspension needs (its save, then the margin): what a
        turn may still spend, negative when it is already too late for more."""
        return self.remaining() - self.save_cost(save_stats) - self.margin_s

    def exhausted(self, save_stats: StepStats) -> bool:
        """Whether no time is left for another turn: the suspension alone takes what remains."""
        return self.spare(save_stats) < 0

    def grace_s(self, save_stats: StepStats) -> float:
        """Seconds what a turn left running may still take before the suspension must start
        (never negative: a timeout)."""
        return max(self.spare(save_stats), 0.0)

    def fits_after(self, wait_s: float, stats: StepStats | None, save_stats: StepStats) -> bool:
        """Whether the step still fits in this invocation after waiting ``wait_s`` here."""
        return self.remaining() >= self.need(stats, save_stats) + wait_s

    def fits_fresh(
        self,
        budget_s: float,
        stats: StepStats | None,
        save_stats: StepStats,
        *,
        preemptible: bool = False,
    ) -> bool:
        """Whether the step would fit in a fresh invocation of ``budget_s`` seconds."""
        return self.need(stats, save_stats, preemptible=preemptible) <= budget_s

    def preempt_after(self, save_stats: StepStats) -> float:
        """Seconds from now at which a preemptible step must stop so the save still fits."""
        return self.spare(save_stats)


def alarm_preemptor(thunk: Callable[[], Any], after_s: float) -> Any:
    """Run ``thunk``; raise Preempted inside it after ``after_s`` seconds (SIGALRM).

    Signals reach only the main thread; elsewhere the step runs unguarded, like a step that
    is not preemptible.
    """
    if threading.current_thread() is not threading.main_thread():
        return thunk()

    def on_alarm(signum: int, frame: Any) -> None:
        raise Preempted

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(after_s, 0.001))
    try:
        return thunk()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
