"""The budget rule: learned durations and the decision to suspend before a step."""

from __future__ import annotations

import math
import random

import pytest

from tests.support import DEFAULT_STEP_S, Budget, StepStats, observe, predict


def stats_of(samples: list[float]) -> StepStats:
    stats = StepStats()
    for s in samples:
        observe(stats, s)
    return stats


def test_unseen_step_uses_the_default():
    assert predict(None, confidence=0.99, default_s=3.0) == 3.0
    assert predict(StepStats(), confidence=0.99, default_s=3.0) == 3.0


def test_one_sample_predicts_twice_that_sample():
    assert predict(stats_of([1.5]), confidence=0.99, default_s=9) == pytest.approx(3.0)


def test_quantile_of_a_lognormal_workload_is_learned():
    rng = random.Random(7)
    median, sigma = 8.0, 0.5
    samples = [rng.lognormvariate(math.log(median), sigma) for _ in range(2000)]
    stats = stats_of(samples)
    true_q99 = median * math.exp(2.3263 * sigma)
    assert predict(stats, confidence=0.99, default_s=1) == pytest.approx(true_q99, rel=0.08)
    assert stats.count == 2000
    assert stats.max_s == max(samples)
    assert stats.total_s == pytest.approx(sum(samples))


def test_few_samples_predict_more_than_many_of_the_same_spread():
    few = stats_of([1.0, 2.0, 1.5])
    many = stats_of([1.0, 2.0, 1.5] * 100)
    assert predict(few, confidence=0.99, default_s=1) > predict(many, confidence=0.99, default_s=1)


def test_higher_confidence_predicts_longer():
    stats = stats_of([1.0, 1.2, 0.8, 1.1, 0.9])
    assert predict(stats, confidence=0.999, default_s=1) > predict(
        stats, confidence=0.9, default_s=1
    )


def test_budget_refuses_a_step_that_does_not_fit_and_says_why():
    left = {"s": 10.0}
    budget = Budget(remaining=lambda: left["s"], margin_s=0.5)
    save = StepStats()
    step = stats_of([2.0, 2.0, 2.0])  # predicted ~2 s
    assert budget.refuse("llm", step, save) is None
    left["s"] = 2.5  # 2 s step + 0.2 s save + 0.5 s margin does not fit
    reason = budget.refuse("llm", step, save)
    assert reason is not None
    assert "'llm'" in reason
    assert "2.50s left" in reason


def test_unseen_step_is_judged_by_the_default_duration():
    budget = Budget(remaining=lambda: DEFAULT_STEP_S + 0.1, margin_s=0.25)
    assert budget.refuse("new", None, StepStats()) is not None
    assert Budget(remaining=lambda: 60).refuse("new", None, StepStats()) is None


def test_a_bimodal_step_is_not_predicted_absurdly_long():
    stats = stats_of([0.000001, 0.4, 0.4, 0.4, 0.4, 0.4])
    assert predict(stats, confidence=0.99, default_s=1) <= 3 * 0.4


def test_save_cost_is_one_measured_write_plus_one_measured_send():
    writes, sends = stats_of([0.05] * 10), stats_of([0.02] * 10)
    budget = Budget(remaining=lambda: 10, send_stats=sends)
    assert budget.save_cost(writes) == pytest.approx(0.07)
    observe(sends, 0.02)  # a new sample is seen at once (the cost is cached per sample count)
    assert budget.save_cost(writes) == pytest.approx(0.07)
    assert Budget(remaining=lambda: 10).save_cost(StepStats()) == pytest.approx(0.2)  # defaults


def test_the_budget_says_when_no_time_is_left_for_another_turn_and_how_long_tasks_may_settle():
    left = {"s": 1.0}
    budget = Budget(remaining=lambda: left["s"], margin_s=0.5)  # the save costs 0.2 s unmeasured
    assert not budget.exhausted(StepStats())
    assert budget.grace_s(StepStats()) == pytest.approx(0.3)
    left["s"] = 0.6
    assert budget.exhausted(StepStats())
    assert budget.grace_s(StepStats()) == 0.0  # never negative: a timeout


def test_the_budget_says_whether_a_step_fits_after_a_wait_and_in_a_fresh_invocation():
    budget = Budget(remaining=lambda: 5.0, margin_s=0.5)
    step = stats_of([1.0, 1.0, 1.0])  # needs ~1 s + 0.2 s save + 0.5 s margin
    assert budget.fits_after(3.0, step, StepStats())
    assert not budget.fits_after(4.0, step, StepStats())
    assert budget.fits_fresh(2.0, step, StepStats())
    assert not budget.fits_fresh(1.5, step, StepStats())
