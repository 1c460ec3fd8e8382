"""CLI start-up: each ``continuum`` command a person types, against ``python -c "import boto3"``.

Every command is a fresh process on a ``continuum dev`` stack (a moto server in this process),
as a person runs it, timed on the wall clock from spawn to exit: what the person waits for.
The baseline is the least any Python tool that talks to AWS pays. Kinds run interleaved, so a
busy moment of the shared machine falls on all of them; each figure is the median of the
repeats and its ratio to the baseline's median (``ratio``: how many ``import boto3`` it costs).
``start`` starts the support-agent sample's task (an app on pydantic-ai whose state model has a
module of its own, as ``continuum init`` writes it): it reads the app's source and imports only
that module (``continuum.cli.declaration``), afresh in every process. There is no
``continuum result`` command: ``status`` shows the result.
``cancel`` asks the pending task to stop (no worker runs it, so it stays pending; the first
reason wins, so a repeat writes nothing new): it reads the record and sends a wake.

The commands write their bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped) and one untimed round
runs first, as a user's ``pip install`` compiles the package: otherwise a checkout would time
Python's compiler on every run, not the command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import check, emit, median

ROOT = Path(__file__).resolve().parent.parent
APP = "samples.support_agent:app"
INPUT = json.dumps({"question": "Order A-1001 arrived broken. Can I get my money back?"})
BASELINE = "import boto3"


def commands(task_id: str) -> dict[str, list[str]]:
    """Each command measured, by name, with its arguments."""
    return {
        "help": ["--help"],
        "status": ["status", task_id],
        "start": ["start", "support", "--input", INPUT],
        "list": ["list"],
        "inspect": ["inspect", task_id],
        "cost": ["cost", task_id],
        "cancel": ["cancel", task_id, "--reason", "measured"],
    }


#: What each command's output must hold, or it did not do what it is timed for.
EXPECTED = {
    "help": "usage: continuum",
    "status": '"status": "pending"',
    "start": "",
    "list": "TASK ID",
    "inspect": "(support): pending",
    "cost": "",
    "cancel": "asked",
}


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    return time.perf_counter() - started, done


def main(quick: bool = False) -> None:
    from continuum._local.dev_stack import DevStack

    repeats = 2 if quick else 7
    with DevStack(port=0, budget_s=60) as stack:
        env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith("CONTINUUM_") and k != "PYTHONDONTWRITEBYTECODE"
            },
            **stack.environment(),
            "CONTINUUM_APP": APP,
            "PYTHONPATH": str(ROOT),
        }
        cli = [sys.executable, "-m", "continuum.cli"]
        _, first = timed([*cli, "start", "support", "--input", INPUT], env)
        check(first.returncode == 0, f"the first start failed: {first.stderr}")
        task_id = first.stdout.strip()
        kinds = {"baseline": [sys.executable, "-c", BASELINE]}
        kinds.update({name: [*cli, *args] for name, args in commands(task_id).items()})
        seconds: dict[str, list[float]] = {name: [] for name in kinds}
        for lap in range(repeats + 1):
            for name, argv in kinds.items():
                took, done = timed(argv, env)
                check(done.returncode == 0, f"{name} exited {done.returncode}: {done.stderr}")
                check(EXPECTED.get(name, "") in done.stdout, f"{name} printed {done.stdout!r}")
                if lap:  # the first lap writes the bytecode
                    seconds[name].append(took)
    base = median(seconds["baseline"])
    check(base > 0, "the baseline took no time")
    emit("cli_start.baseline.median", base, "s (python -c 'import boto3')")
    for name in commands(task_id):
        emit(f"cli_start.{name}.median", median(seconds[name]), "s")
        emit(f"cli_start.{name}.ratio", median(seconds[name]) / base, "x import boto3")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
