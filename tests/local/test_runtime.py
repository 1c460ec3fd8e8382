"""The local runtime (on both backends) and the CLI (on moto), end to end with the sample
research agent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from samples import research_agent
from tests.conftest import on_backend
from tests.support import LocalRuntime

ROOT = Path(__file__).resolve().parents[2]
FAST = {"topic": "tides", "latency_scale": 0.05}


def run_agent(backend: str, budget_s: float):
    with on_backend(backend):
        runtime = LocalRuntime(research_agent.app, budget_s=budget_s, backend=backend)
        seen = []
        summary = runtime.run("research", FAST, on_invocation=seen.append)
        record = runtime.record(summary.task_id)
    return summary, seen, record


def test_the_agent_report_does_not_depend_on_where_continuations_fell(backend):
    reference, _, _ = run_agent(backend, budget_s=600)
    assert reference.status == "succeeded"
    assert reference.continuations == 0

    for budget in (0.4, 0.5):
        summary, seen, record = run_agent(backend, budget_s=budget)
        assert summary.status == "succeeded"
        assert summary.result == reference.result
        assert summary.continuations >= 3
        assert summary.steps == reference.steps  # nothing ran twice
        # (No assertion on overruns: whether an invocation outlasted its budget depends on
        # the machine's load; the budget's fill and overruns are measured by make bench.)
        assert [inv.number for inv in seen] == list(range(1, len(seen) + 1))
        assert all(inv.reason for inv in seen[:-1])  # every suspension says why
        assert summary.aws_calls["sqs:SendMessage"] == summary.continuations + 1
        # The worker that suspended the task learned its send's duration when it claimed the
        # continuation; the first read was the only GET (it remembers what it wrote).
        assert summary.aws_calls["s3:GetObject"] == 1
        assert record.send_stats.count == summary.continuations
        assert record.save_stats.count >= summary.invocations


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``continuum ARGS`` in a fresh interpreter, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "continuum.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.moto_only(reason="`continuum run` runs on moto")
def test_cli_run_ends_with_a_json_summary_line():
    result = run_cli(
        "run",
        "samples.research_agent:research",
        "--input",
        json.dumps(FAST),
        "--budget",
        "0.4",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    summary = json.loads(lines[-1])
    for key in ("task_id", "status", "result", "invocations", "continuations", "steps"):
        assert key in summary
    assert summary["status"] == "succeeded"
    assert summary["continuations"] >= 5
    assert summary["result"].startswith("Report on tides")
    assert any(line.startswith("invocation") for line in lines)
    assert '"level"' not in result.stdout  # worker JSON logs stay out of the terminal


@pytest.mark.moto_only(reason="`continuum run` runs on moto")
def test_cli_rejects_bad_input_with_a_clear_error():
    result = run_cli(
        "run", "samples.research_agent:research", "--input", '{"topc": "x"}', "--budget", "1"
    )
    assert result.returncode == 2
    assert "topic: Field required" in result.stdout + result.stderr


def test_runtimes_over_one_app_register_one_outcome_observer(backend):
    from continuum import Continuum, Observer, TaskContext

    app = Continuum()
    registered: list[Observer] = []
    observe = app.observe

    def counting(observer):
        registered.append(observer)
        return observe(observer)

    app.observe = counting  # type: ignore[method-assign]

    @app.task(state=research_agent.Research)
    def noop(ctx: TaskContext[research_agent.Research]) -> str:
        return "done"

    with on_backend(backend):
        for _ in range(3):
            runtime = LocalRuntime(app, budget_s=60, backend=backend)
            assert runtime.run("noop", {"topic": "x"}).status == "succeeded"
    assert len(registered) == 1
