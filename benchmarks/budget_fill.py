"""Budget fill: how full continuum keeps the invocations that suspend, in virtual time.

The workload: 2,000 turns of one ``llm`` step (log-normal, median 8 s, sigma 0.5),
0-4 ``tool`` steps (median 1.5 s, sigma 0.6) and, every 20th turn, a ``summarize`` step (median
60 s, sigma 0.3), drawn from the seed per (turn, step index) so every rule sees the same work;
900 s per invocation, 0.2 s to load (GET + claim) and 0.2 s to suspend (write + send).

The real ``TurnLoop`` and ``Budget`` decide; only time is virtual: continuum's own virtual clock
(``VirtualTime``, as ``LocalRuntime`` and ``TaskRunner`` run it, here standing
still between moves), which every clock continuum reads follows: ``time.monotonic``, by which a
step is timed, as well as continuum's clock. A step moves it on by its drawn duration, and so
does each load, write and save. Around the loop the driver does what
``continuum/_worker/worker.py`` does: load the stored record, claim it (crash count, counters,
``invocation_budget_s``, a 0.1 s write observed in ``save_stats`` after storing), run the loop,
and on suspension store the record (generation + 1) and send. The record is kept as JSON
between invocations, so snapshot, journal and step statistics carry over as through S3. A
step or a save that would end past the deadline is an overrun: the platform kills the
invocation, its work since the last save is lost and the next one restarts from the stored
record, as after a crash (and, in recovery, saves after every step). Rules: (a) the best
fixed margin (an oracle: the smallest constant reserved before every step that gives zero
overruns on this very workload, by bisection; a ``Budget`` whose
``expect`` is that constant, whose save costs the true 0.2 s, with no extra margin), (b)
continuum's predictive rule with its defaults, (c) the same with ``preemptible=True`` steps and
a virtual preemptor that stops the clock at the limit and raises ``Preempted``, (d) a
clairvoyant rule that knows each duration: the best fill any rule can reach when steps run in
order and whole. ``benchmarks.budget_fill_knobs`` turns the rules' knobs on the same
workloads. Fill = step time of the invocations that ended in a suspension / (their
number x 900 s); the final, partial invocation says nothing about the rule.

Every run checks that it measured what it names, or ends the benchmark (``Mismeasured``):
the rule learned the virtual durations (each step's statistics in the final record count
every drawn run of it once, and add up to their drawn durations); every overrun is reported
(the invocations that a noted stretch of virtual time took past their deadline, counted apart
from the kills); and the invocations and the step time add up.
"""

from __future__ import annotations

import math
import random
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from benchmarks import check, emit
from continuum import Continuum, TaskContext
from continuum._base.clock import now_s
from continuum._define.settings import Settings
from continuum._local.virtual_time import VirtualTime
from continuum._record.model import (
    Lease,
    Status,
    StepStats,
    TaskRecord,
    utcnow,
)
from continuum._record.recovery import end_recovery, note_death
from continuum._steps.budget import Budget, observe
from continuum._steps.control_flow import Preempted
from continuum._turn.loop import Returned, Suspended, TurnLoop

BUDGET_S = 900.0
LOAD_S = 0.2
WRITE_S = 0.1  # one record write; a save is a write plus an SQS send of about the same cost
SAVE_S = 2 * WRITE_S
SEED = 2026
Plan = list[list[tuple[str, float]]]
#: Where each simulation's clock starts.
START = datetime(2026, 1, 1, tzinfo=UTC)
#: The clock of every simulation. Started once for a whole benchmark (``virtual_time``): each
#: start of freezegun scans every loaded module.
CLOCK = VirtualTime(START, tick=False)
#: The virtual clock keeps microseconds: readings this close are the same time.
RESOLUTION_S = 1e-6


def workload(turns: int, seed: int) -> Plan:
    """Each turn's steps and their durations, drawn per turn from ``(seed, turn)``."""
    plan = []
    for turn in range(turns):
        rng = random.Random(f"{seed}:{turn}")
        steps = [("llm", rng.lognormvariate(math.log(8.0), 0.5))]
        for _ in range(rng.randint(0, 4)):
            steps.append(("tool", rng.lognormvariate(math.log(1.5), 0.6)))
        if turn % 20 == 19:
            steps.append(("summarize", rng.lognormvariate(math.log(60.0), 0.3)))
        plan.append(steps)
    return plan


class KnownBudget(Budget):
    """Rules (a) and (d): every step is expected to take ``step_s()``; the save costs its true
    0.2 s. With ``margin_s=0`` a step starts only if ``step_s() + 0.2`` seconds remain."""

    def __init__(
        self, remaining: Callable[[], float], margin_s: float, step_s: Callable[[], float]
    ) -> None:
        super().__init__(remaining=remaining, margin_s=margin_s)
        self.step_s = step_s

    def expect(self, stats: StepStats | None, *, preemptible: bool = False) -> float:
        return self.step_s()

    def save_cost(self, save_stats: StepStats) -> float:
        return SAVE_S

    def refuse(
        self, name: str, stats: StepStats | None, save_stats: StepStats, **_: bool
    ) -> str | None:
        # Spelled out, so that no shortcut in Budget.refuse can bypass this rule.
        need, left = self.step_s() + SAVE_S + self.margin_s, self.remaining()
        return None if need <= left else f"step {name!r} needs {need:.2f}s; {left:.2f}s left"


class Killed(BaseException):
    """The platform ended the invocation at its deadline."""


class Empty(BaseModel):
    """The agent's state: the turn number in the record is all the simulation needs."""


@dataclass
class Result:
    invocations: int = 0
    suspended: int = 0
    suspended_step_s: float = 0.0
    overruns: int = 0
    lost_s: float = 0.0
    discarded_s: float = 0.0
    preemptions: int = 0
    total_step_s: float = 0.0
    kept_s: float = 0.0  # step time that invocations which overran had saved before

    @property
    def fill(self) -> float:
        return self.suspended_step_s / (self.suspended * BUDGET_S) if self.suspended else 0.0


def virtual_time() -> AbstractContextManager[None]:
    """Run the block on the benchmark's virtual clock (re-entrant: started once if nested)."""
    return CLOCK.running()


class Simulation:
    """One rule on one workload: emulated invocations around the real TurnLoop."""

    def __init__(
        self,
        plan: Plan,
        make_budget: Callable[[Simulation], Budget],
        *,
        preemptible: bool = False,
        stop_at_overrun: bool = False,
    ) -> None:
        self.plan = plan
        self.make_budget = make_budget
        self.stop_at_overrun = stop_at_overrun
        self.deadline = math.inf
        self.limit: float | None = None  # set by the preemptor while a step runs
        self.step_s = 0.0  # completed step time in this invocation
        self.saved_s = 0.0  # the part of it the record has saved (a save in recovery)
        self.next_s = 0.0  # the drawn duration of the step about to be called (for rule d)
        #: each invocation's deadline, and every stretch of virtual time it took or would have
        #: taken (invocation, what, end): the overruns are counted from them, apart.
        self.deadlines: list[float] = []
        self.ledger: list[tuple[int, str, float]] = []
        self.final_record: TaskRecord | None = None
        self.result = Result(total_step_s=sum(d for turn in plan for _, d in turn))
        app = Continuum(bucket="unused", queue_url="unused")
        steps = {
            name: app.step(name=name, preemptible=preemptible)(self._make_step(name))
            for name in ("llm", "tool", "summarize")
        }

        @app.task(state=Empty)
        def agent(ctx: TaskContext[Empty]) -> int | None:
            turn = ctx.turn
            for index, (name, duration) in enumerate(plan[turn]):
                self.next_s = duration
                steps[name](turn, index)
            return turn + 1 if turn + 1 >= len(plan) else None

        self.task = app.tasks["agent"]

    def _take(self, what: str, seconds: float, *, until: float | None = None) -> bool:
        """Let ``seconds`` of virtual time pass for ``what`` (stopped early at ``until``),
        noted in the ledger first. False if they would end past the deadline: the platform
        kills the invocation there, and the clock stops at it."""
        start = now_s()
        end = start + seconds if until is None else min(start + seconds, until)
        self.ledger.append((len(self.deadlines) - 1, what, end))
        if end > self.deadline + RESOLUTION_S:
            CLOCK.advance(self.deadline - start)
            return False
        CLOCK.advance(end - start)
        return True

    def _make_step(self, name: str) -> Callable[[int, int], None]:
        def step(turn: int, index: int) -> None:
            duration = self.plan[turn][index][1]
            start, limit = now_s(), self.limit
            if not self._take(name, duration, until=limit):
                self.result.lost_s += self.deadline - start
                raise Killed
            if limit is not None and start + duration > limit:
                self.result.discarded_s += limit - start
                self.result.preemptions += 1
                raise Preempted
            self.step_s += duration

        return step

    def _preemptor(self, thunk: Callable[[], Any], after_s: float) -> Any:
        self.limit = now_s() + after_s
        try:
            return thunk()
        finally:
            self.limit = None

    def run(self) -> Result:
        with virtual_time():
            CLOCK.move_to(START)
            stored = TaskRecord(task_id="sim", task_name="agent", state={}).model_dump_json()
            while stored is not None:
                stored = self._invocation(stored)
                if self.stop_at_overrun and self.result.overruns:
                    break
        self.verify()
        return self.result

    def remaining(self) -> float:
        return self.deadline - now_s()

    def _invocation(self, stored: str) -> str | None:
        """One emulated invocation; return the stored record, or None when the task finished."""
        res = self.result
        res.invocations += 1
        record = TaskRecord.model_validate_json(stored)
        self.deadline = now_s() + BUDGET_S
        self.deadlines.append(self.deadline)
        self._take("load", LOAD_S)
        self.step_s = self.saved_s = 0.0

        # Claim.take, then Claim._write: store first, observe the write after.
        if record.status == Status.RUNNING:
            note_death(record)
        record.status = Status.RUNNING
        record.lease = Lease(owner="sim", expires_at=utcnow())
        record.counters.invocations += 1
        record.invocation_budget_s = max(record.invocation_budget_s, round(self.remaining(), 3))
        stored = record.model_dump_json()
        observe(record.save_stats, WRITE_S)

        def persist() -> None:
            nonlocal stored
            if not self._take("write", WRITE_S):
                raise Killed
            stored = record.model_dump_json()
            observe(record.save_stats, WRITE_S)
            self.saved_s = self.step_s

        loop = TurnLoop(
            self.task,
            record,
            self.make_budget(self),
            persist,
            # no periodic saves: each invocation pays only its load and its save
            Settings(persist_every_s=math.inf),
            preemptor=self._preemptor,
        )
        try:
            outcome = loop.run()
        except Killed:
            return self._killed(stored)
        record.idle_suspensions = 0 if loop.progress else record.idle_suspensions + 1
        if isinstance(outcome, Returned):
            self.final_record = record
            return None
        if not isinstance(outcome, Suspended):
            raise RuntimeError(f"simulated task ended {outcome!r}")
        if not self._take("save", SAVE_S):  # killed while saving
            return self._killed(stored)
        # Claim.suspend: the record (generation + 1) first, then the send.
        record.status = Status.SUSPENDED
        record.generation += 1
        record.lease = None
        record.suspend_reason = outcome.reason
        record.counters.continuations += 1
        end_recovery(record)
        stored = record.model_dump_json()
        res.suspended += 1
        res.suspended_step_s += self.step_s
        CLOCK.advance(self.deadline - now_s())  # the next invocation starts on a fresh clock
        return stored

    def _killed(self, stored: str) -> str:
        """The platform killed the invocation: its work since the last save is lost."""
        self.result.overruns += 1
        self.result.lost_s += self.step_s - self.saved_s
        self.result.kept_s += self.saved_s
        return stored

    def verify(self) -> None:
        """Check that the run measured what the benchmark names (see the module's doc)."""
        res = self.result
        overran = {at for at, _, end in self.ledger if end > self.deadlines[at] + RESOLUTION_S}
        check(
            len(overran) == res.overruns,
            f"{len(overran)} invocation(s) ran past their deadline on the virtual clock, "
            f"{res.overruns} overrun(s) reported",
        )
        if self.final_record is None:
            return  # stopped at its first overrun
        check(
            res.invocations == res.suspended + res.overruns + 1,
            f"{res.invocations} invocations: {res.suspended} suspended, {res.overruns} "
            "overran, and the last one finished",
        )
        done = res.suspended_step_s + res.kept_s + self.step_s
        check(
            abs(done - res.total_step_s) <= RESOLUTION_S * len(self.ledger),
            f"{done:.6f} s of step time done and kept, {res.total_step_s:.6f} s drawn",
        )
        drawn: Counter[str] = Counter()
        drawn_s: dict[str, float] = {}
        for turn in self.plan:
            for name, duration in turn:
                drawn[name] += 1
                drawn_s[name] = drawn_s.get(name, 0.0) + duration
        learned = self.final_record.step_stats
        for name, runs in drawn.items():
            stats = learned.get(name)
            count, total = (stats.count, stats.total_s) if stats else (0, 0.0)
            check(
                count == runs and abs(total - drawn_s[name]) <= 2 * RESOLUTION_S * runs,
                f"the rule learned step {name!r} from {count} run(s) of {total:.6g} s in all; "
                f"the simulation ran it {runs} time(s), {drawn_s[name]:.6g} s of virtual time "
                "(does its clock reach the code that times a step?)",
            )


Rule = Callable[[Simulation], Budget]


def fixed(margin: float) -> Rule:
    return lambda sim: KnownBudget(remaining=sim.remaining, margin_s=0.0, step_s=lambda: margin)


def clairvoyant(sim: Simulation) -> Budget:
    """Rule (d), a reference no rule can beat: it knows each step's duration in advance."""
    return KnownBudget(remaining=sim.remaining, margin_s=0.0, step_s=lambda: sim.next_s)


def predictive(**options: float) -> Rule:
    return lambda sim: Budget(remaining=sim.remaining, **options)


def oracle_margin(plan: Plan, *, precision: float = 0.01) -> float:
    """The smallest fixed margin with zero overruns on ``plan`` (bisection)."""

    def overruns(margin: float) -> int:
        return Simulation(plan, fixed(margin), stop_at_overrun=True).run().overruns

    low, high = 0.0, max(d for turn in plan for _, d in turn)  # any step fits in ``high``
    assert overruns(high) == 0
    while high - low > precision:
        middle = (low + high) / 2
        if overruns(middle):
            low = middle
        else:
            high = middle
    return high


def all_rules(plan: Plan, margin: float | None = None) -> dict[str, Result]:
    margin = oracle_margin(plan) if margin is None else margin
    return {
        "a_fixed": Simulation(plan, fixed(margin)).run(),
        "b_predictive": Simulation(plan, predictive()).run(),
        "c_preemptible": Simulation(plan, predictive(), preemptible=True).run(),
        "d_clairvoyant": Simulation(plan, clairvoyant).run(),
    }


METRICS = [("invocations", ""), ("fill", "%"), ("overruns", ""), ("lost_s", "step-s lost")]
METRICS += [("preemptions", ""), ("discarded_s", "step-s discarded")]
METRICS += [("discarded_share", "% of useful work")]


def discard_share(res: Result) -> float:
    return 100 * res.discarded_s / res.total_step_s


def summary(tag: str, runs: list[Result], *, lowest: bool = False) -> None:
    n = len(runs)
    emit(f"{tag}.mean_fill", 100 * sum(r.fill for r in runs) / n, "%")
    if lowest:
        emit(f"{tag}.min_fill", 100 * min(r.fill for r in runs), "%")
    emit(f"{tag}.overruns_total", sum(r.overruns for r in runs))
    emit(f"{tag}.mean_discarded_share", sum(map(discard_share, runs)) / n, "% of useful work")


def main(quick: bool = False) -> None:
    with virtual_time():
        report(*((200, 2) if quick else (2000, 12)))


def report(turns: int, seeds: int) -> None:
    plan = workload(turns, SEED)
    total = sum(d for turn in plan for _, d in turn)
    emit("budget_fill.turns", turns)
    emit("budget_fill.seed", SEED)
    emit("budget_fill.total_step_time", total, "s")
    emit("budget_fill.lower_bound_invocations", math.ceil(total / (BUDGET_S - LOAD_S - SAVE_S)))
    margin = oracle_margin(plan)
    emit("budget_fill.a_fixed.oracle_margin", margin, "s")
    results = all_rules(plan, margin)
    for metric, unit in METRICS:
        for label, res in results.items():
            value = discard_share(res) if metric == "discarded_share" else getattr(res, metric)
            emit(f"budget_fill.{metric}.{label}", 100 * value if metric == "fill" else value, unit)

    # One task's fill moves in steps of about 1/35 (one invocation more or less, and how much
    # the final invocation holds): the mean over several seeds is the steadier comparison.
    plans = [workload(turns, seed) for seed in range(1, seeds + 1)]
    by_seed = [all_rules(p) for p in plans]
    for label in results:
        runs = [r[label] for r in by_seed]
        summary(f"budget_fill.seeds_1_to_{seeds}.{label}", runs, lowest=True)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
