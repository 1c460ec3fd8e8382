"""The benchmarks run (tiny versions), check that they measured what they name, and print
`name: value unit` lines. No timing is asserted here: performance is measured by `make bench`,
never by a test."""

from __future__ import annotations

import pkgutil
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import benchmarks
from benchmarks import Mismeasured, run
from continuum._base.clock import real_monotonic
from tests.fresh import INSTALL_TIMEOUT_S, copy_checkout, outside_env, sh

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^[\w.:/()<>' -]+: -?[\d.e+-]+( .*)?$")


def printed(*args: str) -> dict[str, str]:
    """Run ``python -m ARGS``; check it succeeds and prints only ``name: value unit`` lines;
    return each name's value."""
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
    return {name: rest.split()[0] for name, _, rest in (line.partition(": ") for line in lines)}


# -- budget fill: its clock reaches what it measures, and it counts every overrun ------------


def test_budget_fill_learns_the_virtual_durations_it_simulates():
    from benchmarks.budget_fill import Simulation, predictive, workload

    plan = workload(60, 3)
    simulation = Simulation(plan, predictive())
    simulation.run()
    learned = simulation.final_record.step_stats
    for name in ("llm", "tool", "summarize"):
        drawn = [d for turn in plan for step, d in turn if step == name]
        assert learned[name].count == len(drawn)
        assert learned[name].total_s == pytest.approx(sum(drawn), abs=1e-3)


def test_budget_fill_refuses_to_report_when_the_step_timing_misses_its_clock(monkeypatch):
    """As when steps came to be timed in a module that its clock did not reach."""
    import continuum._steps.turn_state
    from benchmarks.budget_fill import Simulation, predictive, workload

    monkeypatch.setattr(continuum._steps.turn_state, "monotonic_clock", lambda: real_monotonic)
    with pytest.raises(Mismeasured, match="learned"):
        Simulation(workload(60, 3), predictive()).run()


def test_budget_fill_refuses_to_report_an_overrun_it_did_not_count(monkeypatch):
    from benchmarks.budget_fill import Simulation, fixed, workload

    killed = Simulation._killed

    def forgetful(self: Simulation, stored: str) -> str:
        out = killed(self, stored)
        self.result.overruns -= 1
        return out

    monkeypatch.setattr(Simulation, "_killed", forgetful)
    with pytest.raises(Mismeasured, match="overrun"):
        Simulation(workload(200, 3), fixed(0.0)).run()  # no margin: steps run past the deadline


# -- the runner: every benchmark runs, and a failed check fails the run ------------------------


def test_every_benchmark_module_is_run_by_make_bench_or_named_as_not_a_benchmark():
    modules = {m.name for m in pkgutil.iter_modules(benchmarks.__path__)}
    assert modules == set(run.BENCHMARKS) | set(run.NOT_RUN)
    assert not set(run.BENCHMARKS) & set(run.NOT_RUN)


def test_a_benchmark_that_fails_its_check_fails_the_run(monkeypatch, capsys):
    def main(quick: bool) -> None:
        benchmarks.check(False, "the work was never done")

    monkeypatch.setitem(sys.modules, "benchmarks.broken", types.SimpleNamespace(main=main))
    monkeypatch.setattr(run, "BENCHMARKS", ("broken",))
    assert run.main(["--quick"]) == 1
    assert "benchmark broken did not measure what it names: the work was never done" in (
        capsys.readouterr().err
    )


def test_a_benchmark_that_checks_nothing_fails_the_run(monkeypatch, capsys):
    monkeypatch.setitem(
        sys.modules, "benchmarks.unchecked", types.SimpleNamespace(main=lambda quick: None)
    )
    monkeypatch.setattr(run, "BENCHMARKS", ("unchecked",))
    assert run.main(["--quick"]) == 1
    assert "benchmark unchecked checked nothing" in capsys.readouterr().err


def test_a_benchmark_that_cannot_run_is_named_and_the_others_still_run(monkeypatch, capsys):
    def crash(quick: bool) -> None:
        raise RuntimeError("the moto server would not start")

    def fine(quick: bool) -> None:
        benchmarks.check(True, "measured")

    monkeypatch.setitem(sys.modules, "benchmarks.unimportable", None)  # its import fails
    monkeypatch.setitem(sys.modules, "benchmarks.crashing", types.SimpleNamespace(main=crash))
    monkeypatch.setitem(sys.modules, "benchmarks.fine", types.SimpleNamespace(main=fine))
    monkeypatch.setattr(run, "BENCHMARKS", ("unimportable", "crashing", "fine"))
    assert run.main(["--quick"]) == 1
    out, err = capsys.readouterr()
    assert "run.fine.checks: 1 self-checks passed" in out
    assert "benchmark unimportable could not run: ModuleNotFoundError" in err
    assert "benchmark crashing could not run: RuntimeError('the moto server would not start')" in (
        err
    )
    assert err.rstrip().endswith("benchmarks that could not run: unimportable, crashing")


#: A program that imports every module of the package named by its argument, and every module
#: those import anywhere in their code (a benchmark imports what it measures inside functions).
IMPORT_ALL = """
import ast, importlib, pathlib, pkgutil, sys
package = importlib.import_module(sys.argv[1])
for found in pkgutil.iter_modules(package.__path__):
    module = importlib.import_module(f"{sys.argv[1]}.{found.name}")
    for node in ast.walk(ast.parse(pathlib.Path(module.__file__).read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            importlib.import_module(node.module)
"""


@pytest.mark.slow
def test_the_venvs_make_builds_for_chaos_and_bench_import_every_module_they_run(tmp_path):
    """A fresh clone's venv, from the Makefile's own install lines: the run's (make chaos)
    imports every chaos module and what they import, then the bench stamp's (make bench) every
    benchmark module and what they import."""
    checkout = copy_checkout(tmp_path / "clone")
    venv = tmp_path / "venv"
    for stamp, package in ((".installed-run", "chaos"), (".installed-bench", "benchmarks")):
        made = sh(
            f"make VENV={venv} {venv / stamp} && {venv}/bin/python -c '{IMPORT_ALL}' {package}",
            checkout,
            outside_env(),
            timeout=INSTALL_TIMEOUT_S,
        )
        assert made.returncode == 0, f"{stamp}:\n{made.stdout[-2000:]}{made.stderr[-4000:]}"


# -- the async agent: it refuses a turn whose tool calls did not run side by side ----------


def test_agent_async_refuses_to_report_when_the_tool_calls_ran_one_at_a_time(monkeypatch):
    from pydantic_ai.tool_manager import ToolManager

    from benchmarks.agent_async import SideBySide
    from continuum.integrations.pydantic_ai import _capability

    class OneAtATime:
        @staticmethod
        def parallel_execution_mode(mode: str) -> Any:
            return ToolManager.parallel_execution_mode("sequential")

    monkeypatch.setattr(_capability, "ToolManager", OneAtATime)
    with pytest.raises(Mismeasured, match="tool calls did not overlap"):
        SideBySide().turns_s()


# -- the quick runs ----------------------------------------------------------------------------


@pytest.mark.slow
def test_every_benchmark_runs_quick_checks_itself_and_prints_name_value_unit_lines():
    values = printed("benchmarks.run", "--quick")
    for name in run.BENCHMARKS:
        assert float(values[f"run.{name}.checks"]) > 0, name
    for expected in (
        "budget_fill.fill.b_predictive",
        "budget_fill.overruns.b_predictive",
        "step_overhead.one_long_turn.overhead",
        "step_overhead.async.one_long_turn.vs_sync",
        "tracing_overhead.with_tracing",
        "aws_calls.per_continuation.all",
        "local_e2e.ratio",
        "cold_import.continuum_own",
        "cli_start.status.ratio",
        "wait_cost.usd_per_million_task_days.continuum",
        "task_cost.continuum.usd_per_million_tasks",
        "task_cost.step_functions_standard.usd_per_million_tasks",
        "task_cost.lambda_durable_functions.usd_per_million_tasks",
        "wait_cost.usd_per_million_task_days.step_functions_standard",
        "wake_latency.memory.median",
        "wake_latency.moto.p95",
        "wake_latency.link.memory.median",
        "long_sleep.cap_900s.warm",
        "long_sleep.lifted.cold",
        "agent_overhead.model_request.overhead",
        "agent_overhead.tool_call.overhead",
        "agent_async.model_request.overhead",
        "agent_async.side_by_side.live_turn",
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
        assert expected in values, expected


@pytest.mark.slow
def test_versus_measures_revisions_side_by_side_from_worktrees():
    """One round, HEAD against the working tree: a worktree is made, measured and removed."""
    values = printed("benchmarks.versus", "--rounds", "1", "HEAD", ".")
    assert {"versus.HEAD.cold_import", "versus.working_tree.step_overhead_ratio"} <= set(values)
    listed = subprocess.run(
        ["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "continuum-versus-" not in listed.stdout  # removed again
