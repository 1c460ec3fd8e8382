"""The tracing benchmark compares Tracing with the SDK's own cost of the same spans, or gives
no figure: a ratio between different spans would measure nothing."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import Mismeasured, tracing_overhead
from continuum.integrations import opentelemetry


def test_the_benchmark_refuses_a_ratio_when_tracings_spans_are_not_the_sdk_loops(monkeypatch):
    attempt = opentelemetry._Vocabulary.attempt

    def one_more(self: Any, *args: Any) -> dict[str, Any]:
        return {**attempt(self, *args), "continuum.extra": 1}

    monkeypatch.setattr(opentelemetry._Vocabulary, "attempt", one_more)
    with pytest.raises(Mismeasured, match="spans are not Tracing's"):
        tracing_overhead.main(quick=True)


def test_the_benchmark_refuses_a_ratio_when_tracing_left_a_step_unended(monkeypatch):
    ended = opentelemetry.Tracing.step_ended

    def lose_one(self: Any, event: Any) -> None:
        if event.key != "noop#7":
            ended(self, event)

    monkeypatch.setattr(opentelemetry.Tracing, "step_ended", lose_one)
    with pytest.raises(Mismeasured, match="Tracing's step spans differ"):
        tracing_overhead.main(quick=True)
