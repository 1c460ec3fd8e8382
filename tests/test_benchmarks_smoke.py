"""The benchmarks run (tiny versions) and print `name: value unit` lines. No timing is
asserted here: performance is measured by `make bench`, never by a test."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^[\w.:/()<>' -]+: -?[\d.e+-]+( .*)?$")


def printed_names(*args: str) -> set[str]:
    """Run ``python -m ARGS``; check it succeeds and prints only ``name: value unit`` lines;
    return the names."""
    done = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    bad = [line for line in lines if not LINE.match(line)]
    assert not bad, bad[:5]
    return {line.split(":")[0] for line in lines}


@pytest.mark.slow
def test_benchmarks_run_quick_and_print_name_value_unit_lines():
    names = printed_names("benchmarks.run", "--quick")
    for expected in (
        "budget_fill.fill.b_predictive",
        "budget_fill.overruns.b_predictive",
        "step_overhead.one_long_turn.overhead",
        "aws_calls.per_continuation.all",
        "local_e2e.ratio",
        "cold_import.continuum_own",
        "wait_cost.usd_per_million_task_days.continuum",
        "task_cost.continuum.usd_per_million_tasks",
        "task_cost.step_functions_standard.usd_per_million_tasks",
        "task_cost.lambda_durable_functions.usd_per_million_tasks",
        "wait_cost.usd_per_million_task_days.step_functions_standard",
        "wake_latency.memory.median",
        "wake_latency.moto.p95",
        "long_sleep.cap_900s.warm",
        "long_sleep.lifted.cold",
        "agent_overhead.model_request.overhead",
        "agent_overhead.tool_call.overhead",
        "checkpoint.invocation.segmented.peak_rss",
        "checkpoint.segmented.turn_upload",
        "map_threads.ratio",
        "map_threads.thread_pool.median",
        "fanout_tasks.n20.wall",
        "fanout_tasks.n20.parent.record_versions",
        "fanout_tasks.n20.per_child.report.s3.max",
        "fanout_tasks.n20.per_child.report.sqs_send.max",
        "fanout_tasks.parent_record_writes_growth",
    ):
        assert expected in names, expected


@pytest.mark.slow
def test_versus_measures_revisions_side_by_side_from_worktrees():
    """One round, HEAD against the working tree: a worktree is made, measured and removed."""
    names = printed_names("benchmarks.versus", "--rounds", "1", "HEAD", ".")
    assert {"versus.HEAD.cold_import", "versus.working_tree.step_overhead_ratio"} <= names
    listed = subprocess.run(
        ["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "continuum-versus-" not in listed.stdout  # removed again
