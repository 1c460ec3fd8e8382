"""A small seeded chaos run: real worker deaths, AWS faults and hostile deliveries.

The harness (``python -m chaos.harness``) runs as a subprocess with its own moto server and
worker processes, so nothing here touches the in-process moto of the other tests. The full
run is ``make chaos``; this one is small enough for ``make test``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED = 11
#: Enough for one task of every kind (17 with the gathering kind): a plan cut to fewer drops
#: kinds at random, and a kind this suite checks may be the one dropped.
TASKS = 18

#: Invariants the harness checks; each must hold for every task of the run.
INVARIANTS = [
    "wrong results",
    "failed tasks without a reason",
    "tasks failed of a transient AWS fault",
    "tasks failed for another reason",
    "doomed tasks not failed naming their step",
    "tasks stranded",
    "tasks unfinished at timeout",
    "tasks not started before the timeout",
    "tasks without a record",
    "re-executions of recorded steps",
    "steps run twice in one invocation",
    "step executions without a claim",
    "recorded steps without an execution",
    "idempotency keys that changed between executions",
    "generation regressions",
    "record versions that do not parse",
    "generations delivered more than 20 times (message storm)",
    "NaN tasks not failed with UnserializableValueError naming the step or field",
    "thread-pool tasks not failed with the refusal naming the step",
    "NaN steps run again by an invocation that was not killed",
    "steps run from a task's thread pool",
    "blobs left unreferenced, undeleted and untagged",
    "blobs leaked by an interrupted finish sweep",
    "blobs referenced by a finished record, untagged (never expire)",
    "finished records untagged (their sweep never completed)",
    "records pointing at a missing blob",
    "blobs tagged before their task finished",
    "tasks cancelled that nobody cancelled",
    "cancelled tasks not ended cancelled",
    "cancels whose first reason did not win",
    "child tasks stranded",
    "child tasks started more than once",
    "child tasks with a wrong ending",
    "child tasks never started",
    "second callback answers accepted",
    "outside calls given up",
    "answers over the task's limit accepted",
    "records an older worker wrote",
]


@pytest.fixture(scope="module")
def chaos_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("chaos")
    report_path = run_dir / "report.json"
    command = [
        sys.executable,
        *("-m", "chaos.harness", "--seed", str(SEED), "--tasks", str(TASKS)),
        *("--run-dir", str(run_dir), "--report-json", str(report_path), "--timeout", "150"),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240)
    figures = "\n".join(line for line in done.stdout.splitlines() if not line.startswith("{"))
    print(figures)  # shown by pytest when a test fails
    assert report_path.exists(), f"the harness did not report:\n{done.stdout}\n{done.stderr}"
    report = json.loads(report_path.read_text())
    return done, report, figures


@pytest.mark.slow
@pytest.mark.parametrize("invariant", INVARIANTS)
def test_invariant_holds(chaos_run, invariant):
    _done, report, figures = chaos_run
    count = report["violations"].get(invariant, 0)
    examples = "\n".join(report["examples"].get(invariant, []))
    assert count == 0, f"{invariant}: {count}\n{examples}\n\n{figures}"


@pytest.mark.slow
def test_faults_were_injected_and_every_task_accounted_for(chaos_run):
    done, report, figures = chaos_run
    f = report["figures"]
    # The planned tasks, and the forks the outside world makes of the forkfan ones.
    assert f["tasks"] == TASKS + f["tasks forked by the outside world"], figures
    assert f["kills"] > 0, figures
    assert f["aws faults"] > 0, figures
    assert f["faults and kills"] == f["kills"] + f["aws faults"], figures
    assert f["step executions"] >= f["recorded steps"] > 0, figures
    assert f["tasks succeeded"] + f["tasks failed"] + f["tasks cancelled"] == f["tasks"], figures
    assert done.returncode == (0 if not report["violations"] else 1), figures


@pytest.mark.slow
def test_the_hardening_cases_ran(chaos_run):
    """Blobs were written and superseded blobs removed mid-run; NaN and pool tasks ran."""
    _done, report, figures = chaos_run
    f = report["figures"]
    for kind in ("blobs", "nan", "pool"):
        assert f[f"tasks {kind}"] >= 1, figures
    assert f["blob puts"] > 0, figures
    assert f["blob deletes"] > 0, figures
    assert f["warm invocations"] > 0, figures
    assert f["steps executed from a thread pool"] == 0, figures


@pytest.mark.slow
def test_the_wait_and_fan_out_kinds_ran(chaos_run):
    """Sleeps, callbacks, signals, cancels (of gathered async steps too) and child tasks ran,
    and met kills and faults."""
    _done, report, figures = chaos_run
    f = report["figures"]
    kinds = ("sleeper", "callback", "signals", "cancellable", "gathering", "fanmap", "fantasks")
    for kind in (*kinds, "invoker"):
        assert f[f"tasks {kind}"] >= 1, figures
    assert f["outcome cancellable cancelled TaskCancelledError"] >= 1, figures
    assert f["outcome gathering cancelled TaskCancelledError"] >= 1, figures
    assert f["child tasks succeeded"] > 0, figures
    assert f["faults and kills on the wait and fan-out paths"] > 0, figures


@pytest.mark.slow
def test_long_waits_went_to_schedules_that_failed_and_misfired(chaos_run):
    """Waits past the workers' 2 s reach were handed to schedules (some creates failing back
    to hops); the harness fired them, some twice, late or stale, and the invariants held."""
    _done, report, figures = chaos_run
    f = report["figures"]
    assert f["schedules created"] > 0, figures
    assert f["schedule fires"] > 0, figures
    assert f["schedule fires still held at the end"] == 0, figures
