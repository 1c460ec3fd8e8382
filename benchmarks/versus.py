"""Side by side with earlier releases: cold import and step overhead, in one run.

``python -m benchmarks.versus [--rounds N] REV [REV ...]`` checks each revision out as a git
worktree (detached, in a temporary folder), compiles its bytecode as a deployed package has
it, and measures, with each tree first on ``PYTHONPATH`` and the rounds interleaved:

- ``cold_import``: ``import handlers.worker`` after boto3, pydantic's models and Powertools'
  batch utilities (what ``cold_import.handler_after_those_and_powertools_batch`` measures), in
  CPU time, in a fresh interpreter;
- ``continuum_own``: ``import handlers.worker`` minus ``import boto3, pydantic``, each alone in
  a fresh interpreter, in CPU time: ``cold_import.continuum_own``, whose target is 50 ms;
- ``step_overhead``: 20,000 no-op steps in one turn through that tree's ``TurnLoop``
  (``benchmarks.step_overhead.build``), CPU time per step.

The working tree counts as the revision ``.``. Medians over the rounds, then each figure as a
ratio to the first revision's: on a shared machine only those ratios mean anything. The
revisions must have ``benchmarks/step_overhead.py`` (b6d92d2 and later have it).

``--instructions`` also counts the instructions each revision executes, under valgrind's
cachegrind (when installed): the same import, ``continuum_own`` as ``cold_import`` defines it
(``import handlers.worker`` minus ``import boto3, pydantic``), and a step (6,000 steps minus
1,000, over 5,000). A count does not depend on what else the machine runs, so one round is
enough, and its ratios are what CPU times show on a quiet machine, less the noise (not
exactly: an instruction is not a fixed time).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import Mismeasured, check, emit, median
from benchmarks.cold_import import ENV, KINDS

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("continuum", "handlers", "samples")

IMPORT = f"""
import time
{KINDS["handler_after_baseline_no_powertools"][0]}
started = time.process_time()
import handlers.worker
print(time.process_time() - started, handlers.worker.__file__)
"""

STEPS = """
import math, time
from benchmarks.step_overhead import build
try:  # a tree with packages by role says how to build its turn loop
    from benchmarks.step_overhead import TaskRecord, turn_loop
except ImportError:  # the flat layout of the releases before it
    from continuum.budget import Budget
    from continuum.record import TaskRecord
    from continuum.turns import TurnLoop

    def turn_loop(task, record):
        return TurnLoop(task, record, Budget(remaining=lambda: 1e9), lambda: None, math.inf)
task, _ = build(1, 20000)
best = []
for _ in range(3):
    record = TaskRecord(task_id="versus", task_name="spin", state={})
    loop = turn_loop(task, record)
    started = time.process_time()
    loop.run()
    best.append((time.process_time() - started) / 20000)
    if record.counters.steps_executed != 20000:
        raise SystemExit(f"{record.counters.steps_executed} steps ran live, of 20000")
import continuum
print(min(best), continuum.__file__)
"""

#: ``import boto3, pydantic`` or the handler alone, timed (``cold_import``'s ``continuum_own``).
ALONE = """
import time
started = time.process_time()
import {module}
print(time.process_time() - started, {module}.__file__)
"""

#: ``STEPS`` without the timing: run ``sys.argv[1]`` no-op steps in one turn, checked.
COUNTED_STEPS = (
    STEPS.split("best = []")[0]
    + """
import sys
steps = int(sys.argv[1])
task, _ = build(1, steps)
record = TaskRecord(task_id="versus", task_name="spin", state={})
turn_loop(task, record).run()
if record.counters.steps_executed != steps:
    raise SystemExit(f"{record.counters.steps_executed} steps ran live, of {steps}")
"""
)
COUNTED_IMPORT = "import handlers.worker"
IMPORT_BASELINE = KINDS["handler_after_baseline_no_powertools"][0]
OWN_BASELINE = KINDS["baseline"][0]


def label(rev: str) -> str:
    return "working_tree" if rev == "." else rev


def run_in(tree: Path, code: str, *, own: bool = True) -> float:
    """The figure ``code`` prints, run on ``tree``'s code (checked: not the installed one;
    ``own`` False: ``code`` times a dependency, which is not checked)."""
    env = {**ENV, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tree, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise Mismeasured(f"{tree}: {done.stderr.strip().splitlines()[-1]}")
    figure, module = done.stdout.split()[-2:]
    check(
        not own or Path(module).resolve().is_relative_to(tree.resolve()),
        f"measured {module}, not the code of {tree}",
    )
    check(float(figure) > 0, f"{tree}: measured {figure} s")
    return float(figure)


def continuum_own(tree: Path) -> float:
    """CPU seconds of ``import handlers.worker`` less those of ``import boto3, pydantic``."""
    handler = run_in(tree, ALONE.format(module="handlers.worker"))
    dependencies = ALONE.format(module="boto3").replace("import boto3", OWN_BASELINE)
    return handler - run_in(tree, dependencies, own=False)


def instructions(tree: Path, code: str, *args: str) -> int:
    """The instructions a fresh interpreter executes running ``code`` on ``tree``'s code."""
    env = {**ENV, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    valgrind = ["valgrind", "--tool=cachegrind", "--cache-sim=no"]
    valgrind.append("--cachegrind-out-file=/dev/null")
    done = subprocess.run(
        [*valgrind, sys.executable, "-c", code, *args],
        env=env, cwd=tree, capture_output=True, text=True, check=False,
    )  # fmt: skip
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise Mismeasured(f"{tree}: valgrind did not count {code!r}: {done.stderr[-300:]}")
    return int(found.group(1).replace(",", ""))


def counted(tree: Path) -> dict[str, float]:
    """Millions of instructions of the import and of continuum's own part, thousands a step."""
    after = instructions(tree, f"{IMPORT_BASELINE}\n{COUNTED_IMPORT}")
    before = instructions(tree, IMPORT_BASELINE)
    own = instructions(tree, COUNTED_IMPORT) - instructions(tree, OWN_BASELINE)
    per_step = (
        instructions(tree, COUNTED_STEPS, "6000") - instructions(tree, COUNTED_STEPS, "1000")
    ) / 5000
    figures = {"cold_import": (after - before) / 1e6, "continuum_own": own / 1e6}
    figures["step_overhead"] = per_step / 1e3
    for name, value in figures.items():
        check(value > 0, f"{tree}: counted {value} for {name}")
    return figures


def checkout(rev: str, into: Path) -> Path:
    if rev == ".":
        return ROOT
    tree = into / rev.replace("/", "_")
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), rev],
        check=True,
    )
    return tree


def compile_bytecode(tree: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *SOURCES],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
    )


def main(argv: list[str]) -> int:
    rounds = 7
    if "--rounds" in argv:
        at = argv.index("--rounds")
        rounds = int(argv[at + 1])
        del argv[at : at + 2]
    count = "--instructions" in argv
    if count and shutil.which("valgrind") is None:
        raise Mismeasured("--instructions needs valgrind (apt-get install valgrind)")
    revs = [a for a in argv if not a.startswith("-")] or ["b6d92d2", "."]
    counts: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="continuum-versus-") as tmp:
        trees = {rev: checkout(rev, Path(tmp)) for rev in revs}
        try:
            for tree in trees.values():
                compile_bytecode(tree)
            imports: dict[str, list[float]] = {rev: [] for rev in revs}
            owns: dict[str, list[float]] = {rev: [] for rev in revs}
            steps: dict[str, list[float]] = {rev: [] for rev in revs}
            for n in range(rounds):
                for rev in revs if n % 2 == 0 else revs[::-1]:  # interleaved, alternating
                    imports[rev].append(run_in(trees[rev], IMPORT))
                    owns[rev].append(continuum_own(trees[rev]))
                    steps[rev].append(run_in(trees[rev], STEPS))
            if count:
                counts = {rev: counted(tree) for rev, tree in trees.items()}
        finally:
            for rev, tree in trees.items():
                if rev != ".":
                    subprocess.run(
                        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                        check=False,
                    )
    first = revs[0]
    emit("versus.rounds", rounds)
    for rev in revs:
        name = label(rev)
        emit(f"versus.{name}.cold_import", 1000 * median(imports[rev]), "ms CPU (median)")
        emit(f"versus.{name}.continuum_own", 1000 * median(owns[rev]), "ms CPU (median)")
        emit(f"versus.{name}.step_overhead", 1e6 * median(steps[rev]), "us CPU per step")
    for rev in revs[1:]:
        name = label(rev)
        ratio = median(imports[rev]) / median(imports[first])
        emit(f"versus.{name}.cold_import_ratio", ratio, f"x {first}")
        ratio = median(owns[rev]) / median(owns[first])
        emit(f"versus.{name}.continuum_own_ratio", ratio, f"x {first}")
        emit(
            f"versus.{name}.step_overhead_ratio",
            median(steps[rev]) / median(steps[first]),
            f"x {first}",
        )
    units = {"cold_import": "M instructions", "continuum_own": "M instructions"}
    for rev, figures in counts.items():
        for name, value in figures.items():
            unit = units.get(name, "K instructions per step")
            emit(f"versus.{label(rev)}.{name}_instructions", value, unit)
    for rev in revs[1:] if counts else []:
        for name, value in counts[rev].items():
            ratio = value / counts[first][name]
            emit(f"versus.{label(rev)}.{name}_instructions_ratio", ratio, f"x {first}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
