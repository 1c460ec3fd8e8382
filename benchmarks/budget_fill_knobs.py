"""Budget fill, the knobs: what the rules' settings and the workload's longest step cost.

On the workloads of ``budget_fill`` (seeds 1-12, the same virtual-time driver around the real
``TurnLoop`` and ``Budget``), mean fill, total overruns and mean discarded work for:

- rule (b) at a higher ``confidence`` than its default 0.99: fewer overruns, less fill;
- rule (c) at several ``preemptible_confidence`` values (default 0.5): a lower one lets a
  preemptible step start with less time left, trading discarded work for fill, up to the fill
  of the clairvoyant rule (d), which no rule can pass while steps run in order and whole;
- the same work with each 60 s ``summarize`` written as parts of about 10 s (what a
  cooperative step achieves with ``ctx.pause``): how much of the gap to full invocations that
  one long, indivisible step causes at the boundaries.
"""

from __future__ import annotations

import math
import sys

from benchmarks import check
from benchmarks.budget_fill import (
    Plan,
    Simulation,
    clairvoyant,
    predictive,
    summary,
    virtual_time,
    workload,
)

PART_S = 10.0


def split_summaries(plan: Plan, part_s: float = PART_S) -> Plan:
    """The same work, each summarize cut into equal parts of at most ``part_s``."""
    out = []
    for turn in plan:
        steps: list[tuple[str, float]] = []
        for name, d in turn:
            parts = math.ceil(d / part_s) if name == "summarize" else 1
            steps += [(name, d / parts)] * parts
        out.append(steps)
    return out


def main(quick: bool = False) -> None:
    turns, seeds = (200, 2) if quick else (2000, 12)
    plans = [workload(turns, seed) for seed in range(1, seeds + 1)]
    split = [split_summaries(p) for p in plans]
    for whole, parts in zip(plans, split, strict=True):
        before, after = (sum(d for turn in plan for _, d in turn) for plan in (whole, parts))
        check(abs(after - before) < 1e-6, f"split summaries hold {after} s of work, not {before}")
    variants = [
        (f"b_sweep.confidence_{c:g}", plans, predictive(confidence=c), False)
        for c in (0.99, 0.995, 0.999)
    ]
    variants += [
        (f"c_sweep.preemptible_confidence_{c:g}", plans, predictive(preemptible_confidence=c), True)
        for c in (0.05, 0.2, 0.35, 0.5, 0.65, 0.8)
    ]
    variants += [
        ("split_summaries.b_predictive", split, predictive(), False),
        ("split_summaries.c_preemptible", split, predictive(), True),
        ("split_summaries.d_clairvoyant", split, clairvoyant, False),
    ]
    with virtual_time():
        for tag, work, rule, preemptible in variants:
            runs = [Simulation(p, rule, preemptible=preemptible).run() for p in work]
            summary(f"budget_fill_knobs.seeds_1_to_{seeds}.{tag}", runs)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
