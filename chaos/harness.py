"""The fault-injection harness: many tasks, real worker deaths, hostile deliveries; then checks.

    python -m chaos.harness --seed 7 --tasks 200 [--workers 3] [--warm 1] [--budget 1.0]

It starts a moto server on loopback, a versioned bucket, a continuation queue with a short
visibility timeout and a dead-letter queue, starts the tasks, and keeps ``--workers`` worker
processes (``chaos.worker``, forked by ``chaos.zygote``) running. ``--warm`` of them are warm:
they keep their app for the whole run. Each other one arms a kill point drawn from the seed,
dies there by SIGKILL (or retires after ``--retire-after`` invocations) and is replaced, as
Lambda replaces execution environments. AWS calls fail at rates drawn from the seed; the
harness sends duplicate, late, stale and forged continuations and feeds dead letters to
``app.dead_letter_handler``.
When every task has finished and the queues are empty (a message whose task's finish sweep was
cut short comes back until the sweep is done), or nothing is left in any queue, or the time is
up, it stops the workers and checks
every task against its records' versions and the ledger of real step executions
(``chaos.checks``). It prints ``name: value unit`` lines and exits 1 if an invariant failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import random
import sys
import tempfile
import time
from collections import Counter, deque
from typing import Any

import boto3

from chaos import flowchecks, links, outside, rollback, schedules, steering, tasks
from chaos.base import INLINE_LIMIT_BYTES, TIMER_MAX_DELAY_S
from chaos.checks import (
    Failure,
    PlannedTask,
    Report,
    check_blobs,
    check_deliveries,
    check_history,
    check_outcome,
    check_planned_steps,
    check_steps,
    count_outcomes,
    hard_hit,
    read_jsonl,
    read_versions,
    recovery_latencies,
    summarize_latency,
)
from chaos.deliveries import DeadLetterPump, EventTail, Mischief
from chaos.faults import (
    FAULT_BASE_RATES,
    KILL_POINTS,
    NEW_PATHS,
    SENDER_BASE_RATES,
    WAIT_KILL_POINTS,
    EventLog,
    SenderFaults,
)
from chaos.fleet import Fleet
from chaos.server import (
    MotoServer,
    Resources,
    backend_versions,
    client_options,
    create_resources,
    queue_depth,
)
from continuum import Continuum
from continuum._worker.sqs_batch import logger as continuum_logger
from continuum.backends.sqs import SQSContinuationQueue

#: Probability per first delivery that the harness sends a copy back, by kind.
DELIVERY_BASE_RATES = {"duplicate": 0.08, "late": 0.05, "stale": 0.04, "forged": 0.01}
TOPICS = ("tides", "glaciers", "lichens", "comets", "reefs", "dunes", "auroras", "caves")
#: Seconds the queues must stay empty before the run counts as quiescent.
QUIET_S = 2.0
#: How often the harness looks at the queues (and feeds dead letters to their handler), and
#: asks the records whether open tasks finished (finish writes are seen in the event log; this
#: is for tasks the dead-letter handler failed). Every request it makes is one the moto
#: server does not serve a worker.
CHECK_EVERY_S = 1.0
CONFIRM_EVERY_S = 5.0


def draw_rates(rng: random.Random, kinds: list[str], scale: float) -> dict[str, float]:
    """Per-call fault probabilities for this run: the base rate, jittered by the seed."""
    return {k: round(FAULT_BASE_RATES[k] * scale * rng.uniform(0.5, 1.5), 4) for k in kinds}


#: Share of the tasks of these kinds (at least one each in a run of 10 tasks or more).
SHARES = {"blobs": 0.1, "nan": 0.03, "pool": 0.02}
#: The same for the kinds that wait and fan out (``chaos.flows``; off with ``--no-waits``).
WAIT_SHARES = {
    "sleeper": 0.05,
    "callback": 0.05,
    "signals": 0.04,
    "cancellable": 0.04,
    "gathering": 0.04,
    "fanmap": 0.04,
    "fantasks": 0.04,
    "invoker": 0.04,
    **steering.SHARES,
}
#: Kinds whose tasks take longest (long invocations, deaths at every attempt): none is
#: started in the last quarter of the run, so that the run does not end waiting for them.
SLOW = ("blobs", "poison", "runaway")
#: What an unserialisable value's error says (NaN, infinity, not JSON).
NOT_JSON = r"(?i)\bnan\b|infinit|\binf\b|not (valid )?json"


def _count(n: int, share: float) -> int:
    return max(1, round(n * share)) if n >= 10 else 0


def _flow_input(
    rng: random.Random, name: str, salt: int
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A random input for a task that waits or fans out, and the outside world's script."""
    if name in steering.SHARES:
        state = steering.plan_input(rng, name, salt)
        return state, steering.plan_script(name, state)
    if name == "sleeper":
        return {"salt": salt, "naps": [round(rng.uniform(1.5, 5.0), 2) for _ in range(3)]}, None
    if name == "callback":
        script = outside.plan_callback(rng)
        late = script["mode"] == "late"
        timeout = outside.LATE_TIMEOUT_S if late else outside.CALLBACK_TIMEOUT_S
        return {"salt": salt, "mode": script["mode"], "timeout_s": timeout}, script
    if name == "signals":
        state = {"salt": salt, "wants": rng.randint(1, 3)}
        return state, outside.plan_for(rng, name, state)
    if name == "cancellable":
        state = {"salt": salt, "chores": rng.randint(2, 5), "fan": rng.choice((0, 2))}
        return state, outside.plan_for(rng, name, state)
    if name == "gathering":
        state = {"salt": salt, "rounds": rng.randint(1, 3), "width": rng.randint(2, 4)}
        return state, outside.plan_for(rng, name, state)
    if name == "fanmap":
        items = rng.randint(3, 6)
        pauses = rng.sample(range(items), rng.randint(1, 2))
        pause = {str(i): round(rng.uniform(1.5, 3.5), 2) for i in sorted(pauses)}
        return {"salt": salt, "items": items, "limit": 2, "pause": pause}, None
    if name == "fantasks":
        children = rng.randint(3, 5)
        fail = sorted(rng.sample(range(children), rng.randint(0, 2)))
        return {"salt": salt, "children": children, "limit": 2, "fail": fail}, None
    return {"salt": salt, "fail_second": rng.random() < 0.4}, None  # invoker


def _input(
    rng: random.Random, name: str, budget: float
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A random input for a task of kind ``name`` (and what the outside world does to it)."""
    salt = rng.randrange(10**6)
    if name in WAIT_SHARES:
        return _flow_input(rng, name, salt)
    return _base_input(rng, name, budget, salt), None


def _base_input(rng: random.Random, name: str, budget: float, salt: int) -> dict[str, Any]:
    if name == "batch":
        return {"items": rng.randint(20, 40), "chunk": rng.randint(3, 6), "salt": salt}
    if name == "agent":
        return {"topic": rng.choice(TOPICS), "max_turns": rng.randint(6, 12), "salt": salt}
    if name == "blobs":
        return {"salt": salt, "turns": rng.randint(12, 20)}
    if name == "nan":
        where, value = rng.choice(("step", "state")), rng.choice(("nan", "inf", "-inf"))
        return {"salt": salt, "at": rng.randint(1, 4), "where": where, "value": value}
    if name == "pool":
        return {"salt": salt, "at": rng.randint(1, 3)}
    return {"salt": salt, "seconds": round(budget * 3, 3)}


def planned_failure(name: str, state: dict[str, Any]) -> Failure | None:
    """How a task of kind ``name`` started with ``state`` must fail (None: it must succeed)."""
    if name in tasks.DOOMED:
        return Failure("doomed tasks not failed naming their step", tasks.DOOMED[name])
    if name == "nan":
        return Failure(
            "NaN tasks not failed with UnserializableValueError naming the step or field",
            "measure" if state["where"] == "step" else "score",
            error_type="UnserializableValueError",
            pattern=NOT_JSON,
        )
    if name == "pool":
        return Failure(
            "thread-pool tasks not failed with the refusal naming the step",
            "pooled",
            pattern=r"(?i)thread",
        )
    return None


def plan_tasks(
    rng: random.Random, n: int, *, seed: int, budget: float, doomed: int, waits: bool = True
) -> list[PlannedTask]:
    """``n`` tasks: ``doomed`` poison and ``doomed`` runaway ones, ``SHARES`` of blobs, nan
    and pool ones (and ``WAIT_SHARES`` of the kinds that wait, with ``waits``), the rest
    batch or agent."""
    names = ["poison"] * doomed + ["runaway"] * doomed
    shares = {**SHARES, **WAIT_SHARES} if waits else SHARES
    names += [name for name, share in shares.items() for _ in range(_count(n, share))]
    names += [rng.choice(("batch", "agent")) for _ in range(max(0, n - len(names)))]
    rng.shuffle(names)
    cut = 3 * len(names) // 4
    for i in range(cut, len(names)):
        early = [j for j in range(cut) if names[j] not in SLOW]
        if names[i] in SLOW and early:
            j = rng.choice(early)
            names[i], names[j] = names[j], names[i]
    plan = []
    for i, name in enumerate(names[:n]):
        state, script = _input(rng, name, budget)
        plan.append(
            PlannedTask(
                task_id=f"{name}-{seed}-{i:04d}",
                name=name,
                input=state,
                expected=tasks.expected_result(name, state),
                failure=planned_failure(name, state),
                ending="cancelled" if name in outside.CANCELLED_KINDS else "succeeded",
                outside=script,
            )
        )
    return plan + steering.forks_of(plan)


class Run:
    """One chaos run against one moto server."""

    def __init__(self, opts: argparse.Namespace, resources: Resources, run_dir: str) -> None:
        self.opts = opts
        self.resources = resources
        self.run_dir = run_dir
        self.rng = random.Random(opts.seed)
        options = client_options(resources.endpoint)
        self.s3, self.sqs = boto3.client("s3", **options), boto3.client("sqs", **options)
        kinds = list(FAULT_BASE_RATES) if opts.faults == "all" else _kinds(opts.faults)
        self.rates = draw_rates(self.rng, kinds, opts.fault_scale)
        self.plan = plan_tasks(
            self.rng,
            opts.tasks,
            seed=opts.seed,
            budget=opts.budget,
            doomed=opts.doomed,
            waits=opts.waits,
        )
        self.app = tasks.app
        # The dead-letter handler runs here: its timers hop as the fleet's do, else one resent
        # for a long wait sat delayed in the queue and the run never went quiet.
        queue = SQSContinuationQueue(self.sqs, resources.queue_url)
        queue.max_delay_s = TIMER_MAX_DELAY_S
        self.app.configure(bucket=resources.bucket, s3_client=self.s3, queue=queue)
        self.fleet = Fleet(
            resources,
            run_dir,
            opts.budget,
            self.rates,
            random.Random(self.rng.randrange(2**32)),
            opts.kill_prob,
            opts.workers,
            armed=opts.armed,
            retire_after=opts.retire_after,
            warm=opts.warm,
        )
        delivery_rates = {k: v * opts.delivery_scale for k, v in DELIVERY_BASE_RATES.items()}
        self.mischief = Mischief(
            self.sqs, resources.queue_url, random.Random(self.rng.randrange(2**32)), delivery_rates
        )
        self.pump = DeadLetterPump(self.app, self.sqs, resources.dlq_url, resources.dlq_arn)
        self.tail = EventTail(os.path.join(run_dir, "events.jsonl"))
        self.events: list[dict[str, Any]] = []
        self.waiting = deque(self.plan)  # not started yet
        self.outside = self._outside(options, random.Random(self.rng.randrange(2**32)))
        self.open: set[str] = set()  # started, not known to be finished
        self.fires = schedules.Fires(
            resources.endpoint,
            resources.queue_url,
            resources.queue_arn,
            random.Random(self.rng.randrange(2**32)),
        )

    def _outside(self, options: dict[str, Any], rng: random.Random) -> outside.Outside:
        """The outside world: a client of its own whose calls fail and whose sender dies."""
        s3, sqs = boto3.client("s3", **options), boto3.client("sqs", **options)
        rates = {k: round(v * self.opts.fault_scale, 4) for k, v in SENDER_BASE_RATES.items()}
        if self.opts.faults == "none":
            rates = {}
        self.sender_faults = SenderFaults(
            EventLog(os.path.join(self.run_dir, "events.jsonl")),
            rates=rates,
            rng=rng,
            shadow_s3=boto3.client("s3", **options),
            shadow_sqs=boto3.client("sqs", **options),
        )
        self.sender_faults.install(s3, sqs)
        r = self.resources
        sender = Continuum(
            r.bucket,
            r.queue_url,
            s3_client=s3,
            sqs_client=sqs,
            inline_limit_bytes=INLINE_LIMIT_BYTES,
        )
        log = os.path.join(self.run_dir, "outside.jsonl")
        return outside.Outside(sender.client(), self.app.client(), self.sender_faults, log)

    def drive(self) -> str:
        """Start the tasks and run the workers until done, quiescent or out of time.

        At most ``--active`` tasks run at once (a new one starts when one finishes): a real
        deployment scales its workers with the queue, so a message should not wait behind
        hundreds of others, or recovery latency would measure the backlog.
        """
        client = self.app.client()
        ends = time.monotonic() + self.opts.timeout
        next_check, next_confirm, quiet_since = 0.0, 0.0, None
        rolled_back = False
        while time.monotonic() < ends:
            while self.waiting and len(self.open) < self.opts.active:
                task = self.waiting.popleft()
                if "fork_of" in task.input:
                    continue  # the outside world forks it; its original's script follows it
                if task.name == rollback.ROLLED and not rolled_back:
                    # The rollback starts with the first sleeper, so that it meets some.
                    self.fleet.spawn_older(until=time.time() + rollback.ROLLBACK_S)
                    rolled_back = True
                client.start(task.name, task.input, task_id=task.task_id)
                self.outside.add(task.task_id, task.name, task.outside)
                self.open.add(task.task_id)
            self.fleet.reap()
            self.fleet.fill()
            self._follow()
            self.outside.run()
            self.fires.pump()
            now = time.monotonic()
            if now >= next_check:
                next_check = now + CHECK_EVERY_S
                self.pump.pump()
                if now >= next_confirm:
                    next_confirm = now + CONFIRM_EVERY_S
                    self._confirm_finished()
                depth = queue_depth(self.sqs, self.resources.queue_url)
                if not self.pump.missing_handler:
                    depth += queue_depth(self.sqs, self.resources.dlq_url)
                quiet = depth == 0 and not self.outside.busy and not self.fires.busy(self._finished)
                quiet_since = (quiet_since or now) if quiet else None
                if quiet_since is not None and now - quiet_since >= QUIET_S:
                    # Every task finished, and no message is left: none of them still has a
                    # sweep to finish (a message comes back until its task's sweep is done).
                    if not self.open and not self.waiting:
                        return "finished"
                    if not self.waiting:
                        return "quiescent"
                    # The open tasks are stranded (the checks will say so): make room.
                    self.open.clear()
                    quiet_since = None
            time.sleep(0.05)
        return "timeout"

    def _follow(self) -> None:
        for event in self.tail.read():
            self.events.append(event)
            if event["ev"] == "receive":
                self.mischief.observe(event)
            elif event["ev"] == "write" and event["kind"] == "finish_write":
                self.open.discard(event["task_id"])

    def _finished(self, task_id: str) -> bool:
        """Has this task finished (its record says so)? Unknown counts as not."""
        try:
            return self.app.client().status(task_id).status.finished
        except Exception:
            return False

    def _confirm_finished(self) -> None:
        for task_id in list(self.open):
            if self.app.client().status(task_id).status.finished:
                self.open.discard(task_id)

    def finish(self, ending: str, started: float) -> Report:
        self.fleet.stop()
        self._follow()
        report = Report()
        bucket = self.resources.bucket
        stored = None if self.opts.via_s3_api else backend_versions(bucket, "tasks/")
        versions = read_versions(self.s3, bucket, stored=stored)
        report.add("record versions read", "via the S3 API" if stored is None else "from moto")
        ledger = read_jsonl(os.path.join(self.run_dir, "ledger.jsonl"))
        with open(os.path.join(self.run_dir, "versions.json"), "w") as f:
            json.dump(versions, f, indent=1)  # every record version, oldest first, per task
        statuses: Counter[str] = Counter()
        not_started = {task.task_id for task in self.waiting}
        excused = hard_hit(self.events, self.pump.task_ids)
        log = read_jsonl(os.path.join(self.run_dir, "outside.jsonl"))
        changed = flowchecks.check_children(report, self.plan, versions, log)
        for task in flowchecks.expect(self.plan, log):
            if task.task_id in changed:
                task = dataclasses.replace(task, expected=None, ending="any")
            if task.task_id in not_started:
                report.violate("tasks not started before the timeout", task.task_id)
                continue
            history = versions.get(task.task_id, [])
            check_history(report, task.task_id, history)
            status = check_outcome(report, task, self._final(history), excused)
            statuses[status] += 1
            if status not in ("succeeded", "failed", "cancelled"):
                invariant = (
                    "tasks stranded" if ending != "timeout" else "tasks unfinished at timeout"
                )
                report.violate(invariant, f"{task.task_id}: {status}, v{len(history)}")
        check_steps(report, versions, ledger)
        check_planned_steps(report, self.plan, ledger, self.events)
        check_blobs(report, self.s3, bucket, versions, self.events, stored)
        check_deliveries(report, self.events)
        flowchecks.check_cancels(report, self.plan, lambda t: self._final(versions.get(t, [])), log)
        flowchecks.check_outside(report, log)
        links.check_links(report, log)
        if self.opts.waits:
            rollback.check(report, self.events)
        self._figures(report, ending, statuses, versions, started)
        return report

    def _final(self, history: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The latest version of a record, with its result read back if it is in a blob."""
        if not history:
            return None
        final = history[-1]
        if final.get("result_ref") and final.get("status") == "succeeded":
            final = {**final, "result": self.app.client().status(final["task_id"]).result}
        return final

    def _figures(
        self,
        report: Report,
        ending: str,
        statuses: Counter[str],
        versions: dict[str, list[dict[str, Any]]],
        started: float,
    ) -> None:
        """Put what was done (tasks, kills, faults, deliveries) before the checks' figures."""
        kills = Counter(e["point"] for e in self.events if e["ev"] == "kill")
        invoked = [e for e in self.events if e["ev"] == "invoked"]
        faults = Counter(e["kind"] for e in self.events if e["ev"] == "fault")
        failed = Counter(
            str((h[-1].get("error") or {}).get("type"))
            for h in versions.values()
            if h and h[-1].get("status") == "failed"
        )
        head: list[tuple[str, Any, str]] = [("seed", self.opts.seed, "")]
        head.append(("tasks", len(self.plan), "tasks"))
        forks = sum("fork_of" in t.input for t in self.plan)
        head.append(("tasks forked by the outside world", forks, "tasks"))
        head += [
            (f"tasks {name}", n, "tasks")
            for name, n in sorted(Counter(t.name for t in self.plan).items())
        ]
        head += [
            ("run ended", ending, ""),
            ("worker processes", self.fleet.started, "processes"),
            ("worker processes crashed unexpectedly", self.fleet.exits["crashed"], "processes"),
            ("invocations", len(invoked), "invocations"),
            ("warm invocations", sum(bool(e.get("warm")) for e in invoked), "invocations"),
            ("faults and kills", sum(faults.values()) + sum(kills.values()), "injected"),
            ("kills", sum(kills.values()), "kills"),
        ]
        head += [(f"kills {p}", kills[p], "kills") for p in [*KILL_POINTS, "deadline", "poison"]]
        head.append(("aws faults", sum(faults.values()), "faults"))
        head += [(f"aws faults {k}", faults[k], "faults") for k in FAULT_BASE_RATES]
        head += self._new_path_figures(kills)
        head += [(f"fault rate {k}", rate, "per call") for k, rate in self.rates.items()]
        head += [(f"deliveries {k}", n, "messages") for k, n in self.mischief.counts().items()]
        head.append(("dead letters handled", self.pump.handled, "messages"))
        if self.pump.missing_handler:
            head.append(("dead letter handler", "missing", ""))
        head += [(f"tasks {s}", statuses[s], "tasks") for s in ("succeeded", "failed", "cancelled")]
        head += [(f"tasks failed {kind}", n, "tasks") for kind, n in sorted(failed.items())]

        def final(task_id: str) -> dict[str, Any] | None:
            history = versions.get(task_id)
            return history[-1] if history else None

        outcomes = count_outcomes(self.plan, final, [*SHARES, *WAIT_SHARES, *tasks.DOOMED])
        head += [(f"outcome {name}", n, "tasks") for name, n in outcomes]
        for invariant in ("tasks stranded", "tasks unfinished at timeout"):
            head.append((invariant, report.violations[invariant], "tasks"))
        head.append(("record versions", sum(len(h) for h in versions.values()), "versions"))
        head += self.fires.figures(self.events)
        report.figures[:0] = head
        summarize_latency(report, recovery_latencies(self.events))
        report.add("wall time", round(time.monotonic() - started, 1), "s")
        report.add("invariant violations", sum(report.violations.values()), "")

    def _new_path_figures(self, kills: Counter[str]) -> list[tuple[str, Any, str]]:
        """Kills and faults on the paths that waits and fan-out add (timers, wakes, inboxes,
        hops, child records, reports) and the outside world's own faults and deaths."""
        paths = Counter(
            e.get("path") for e in self.events if e["ev"] == "fault" and e.get("inv") != "harness"
        )
        sender = Counter(
            e["kind"] for e in self.events if e["ev"] == "fault" and e.get("inv") == "harness"
        )
        sender += Counter(e["point"] for e in self.events if e["ev"] == "sender_kill")
        new_kills = sum(kills[p] for p in WAIT_KILL_POINTS)
        new_faults = sum(paths[p] for p in NEW_PATHS)
        head: list[tuple[str, Any, str]] = [
            ("faults and kills on the wait and fan-out paths", new_kills + new_faults, "injected"),
            ("kills on the wait and fan-out paths", new_kills, "kills"),
            ("aws faults on the wait and fan-out paths", new_faults, "faults"),
        ]
        head += [(f"aws faults on path {p}", paths[p], "faults") for p in NEW_PATHS]
        head.append(("outside faults and deaths", sum(sender.values()), "injected"))
        head += [(f"outside {k}", sender[k], "injected") for k in SENDER_BASE_RATES]
        return head


def _kinds(text: str) -> list[str]:
    if text == "none":
        return []
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(FAULT_BASE_RATES))
    if unknown:
        raise SystemExit(
            f"unknown fault kinds: {', '.join(unknown)}; known: {', '.join(FAULT_BASE_RATES)}"
        )
    return kinds


def run(opts: argparse.Namespace) -> Report:
    """Run the harness with parsed options; return the report (figures and violations)."""
    # The dead-letter handler runs in this process: its task-failed warnings would drown the
    # figures (the workers' logs go to the run dir).
    continuum_logger.setLevel(logging.ERROR)
    run_dir = opts.run_dir or tempfile.mkdtemp(prefix=f"chaos-{opts.seed}-")
    os.makedirs(run_dir, exist_ok=True)
    started = time.monotonic()
    with MotoServer() as server:
        resources = create_resources(
            server.endpoint,
            visibility_timeout_s=opts.visibility,
            max_receive_count=opts.max_receives,
        )
        schedules.create_group(server.endpoint)
        chaos_run = Run(opts, resources, run_dir)
        driving = time.monotonic()
        try:
            ending = chaos_run.drive()
        finally:
            chaos_run.fleet.stop()
        checking = time.monotonic()
        report = chaos_run.finish(ending, started)
        report.add("time running the tasks", round(checking - driving, 1), "s")
        report.add("time checking", round(time.monotonic() - checking, 1), "s")
    report.figures.insert(1, ("run dir", run_dir, ""))
    return report


def print_report(report: Report, out: Any = sys.stdout) -> None:
    for name, value, unit in report.figures:
        print(f"{name}: {value} {unit}".rstrip(), file=out)
    for invariant, count in sorted(report.violations.items()):
        print(f"VIOLATION {invariant}: {count}", file=out)
        for example in report.examples[invariant]:
            print(f"  e.g. {example}", file=out)
    print("invariants: " + ("ok" if report.ok else "FAILED"), file=out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m chaos.harness", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--seed", type=int, required=True, help="seeds every random choice")
    p.add_argument("--tasks", type=int, default=200)
    p.add_argument("--workers", type=int, default=3, help="worker processes at once")
    p.add_argument(
        "--warm", type=int, default=1, help="of them, warm ones (no kill point, no retiring)"
    )
    p.add_argument("--budget", type=float, default=1.0, help="seconds per invocation")
    p.add_argument("--active", type=int, default=None, help="tasks running at once (4/worker)")
    p.add_argument("--doomed", type=int, default=None, help="poison and runaway tasks, each")
    p.add_argument(
        "--waits",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the kinds that wait and fan out (sleeps, callbacks, signals, cancels, children)",
    )
    p.add_argument("--faults", default="all", help="'all', 'none' or kinds, comma-separated")
    p.add_argument("--fault-scale", type=float, default=1.0, help="multiplies the fault rates")
    p.add_argument("--kill-prob", type=float, default=0.9, help="share of workers that die")
    p.add_argument("--armed", type=int, default=1, help="kill points each such worker arms")
    p.add_argument(
        "--retire-after", type=int, default=12, help="invocations before a worker retires"
    )
    p.add_argument("--delivery-scale", type=float, default=1.0, help="multiplies copy rates")
    p.add_argument("--visibility", type=int, default=3, help="queue visibility timeout (s)")
    p.add_argument("--max-receives", type=int, default=8, help="redrive maxReceiveCount")
    p.add_argument("--timeout", type=float, default=None, help="seconds (default 60 + 6/task)")
    p.add_argument(
        "--via-s3-api",
        action="store_true",
        help="read the record versions through the S3 API, not from the in-process moto",
    )
    p.add_argument("--run-dir", default=None, help="events, ledger and worker logs go here")
    p.add_argument("--report-json", default=None, help="also write the report as JSON here")
    opts = p.parse_args(argv)
    if opts.doomed is None:
        opts.doomed = max(1, opts.tasks // 100) if opts.tasks >= 10 else 0
    if opts.active is None:
        opts.active = 4 * opts.workers
    if opts.timeout is None:
        opts.timeout = 60.0 + 6.0 * opts.tasks
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    report = run(opts)
    print_report(report)
    if opts.report_json:
        with open(opts.report_json, "w") as f:
            json.dump(
                {
                    "figures": {name: value for name, value, _unit in report.figures},
                    "violations": dict(report.violations),
                    "examples": dict(report.examples),
                },
                f,
                indent=1,
            )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
