"""Cold import: what continuum adds to a Lambda cold start, over boto3 and pydantic.

Each measurement is a fresh interpreter (``CONTINUUM_BUCKET`` and ``CONTINUUM_QUEUE_URL`` set,
as on Lambda) timing its own imports in CPU time (``time.process_time``: an import is one
thread, and CPU time is steadier than wall time on a shared machine), so interpreter start-up
is left out, with the .pyc files a deployed package has. Kinds, interleaved, median of the
repeats:

- ``baseline``: ``import boto3, pydantic`` alone;
- ``handler``: ``import handlers.worker`` alone (what Lambda's init phase runs);
- ``handler_after_baseline``: boto3, botocore's exceptions and pydantic's model machinery
  first, then the handler, timed separately: what continuum brings beyond them, directly;
- the same with Powertools' batch utilities also imported first: continuum's own code.

continuum's part, as its target is defined = handler - baseline (target <= 50 ms). That figure
flatters it: the handler does not import all of boto3 (the app imports boto3 when it makes
its clients, on the first message), and ``import pydantic`` alone loads almost nothing. Also
timed: creating the S3 and SQS clients, which the app does on its first message (not an
import, but part of the cold start).
The biggest contributors come from ``python -X importtime``: modules the handler imports that
``import boto3, pydantic`` does not, their own (self) time summed by package, medians of runs.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from benchmarks import check, emit, median

ROOT = Path(__file__).resolve().parent.parent
#: The package that ``sam build`` makes holds compiled bytecode (``infra/build.mk`` runs
#: compileall): the imports are timed with .pyc files, which the first run writes.
#: PYTHONDONTWRITEBYTECODE would make every import compile continuum from source instead.
ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "CONTINUUM_APP": "samples.research_agent:app",
    "CONTINUUM_BUCKET": "bench-bucket",
    "CONTINUUM_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "PYTHONPATH": str(ROOT),
}
TIMED = """
import sys, time
cold = not any(name in sys.modules for name in ("boto3", "pydantic", "continuum", "handlers"))
t0 = time.process_time()
{first}
t1 = time.process_time()
{second}
t2 = time.process_time()
print(t1 - t0, t2 - t1, int(cold), int({loaded!r} in sys.modules))
"""
#: ``import pydantic`` is lazy: its model machinery loads on first use, which any pydantic
#: application pays. This baseline includes it (and botocore's exceptions, which any boto3
#: caller meets), so what the handler adds after it is continuum's and its other dependencies'.
MODELS = "import boto3, pydantic, botocore.exceptions; pydantic.BaseModel; pydantic.TypeAdapter"
KINDS = {
    "baseline": ("import boto3, pydantic", "pass"),
    "handler": ("import handlers.worker", "pass"),
    "handler_after_baseline": (MODELS, "import handlers.worker"),
    "handler_after_baseline_no_powertools": (
        f"{MODELS}; import aws_lambda_powertools.utilities.batch",
        "import handlers.worker",
    ),
    "clients": (
        "import handlers.worker",
        "import boto3; boto3.client('s3'); boto3.client('sqs')",
    ),
}


def timed(first: str, second: str) -> tuple[float, float]:
    """CPU seconds of ``first``, then of ``second``, in a fresh interpreter that had imported
    none of them before."""
    loaded = "handlers.worker" if "handlers.worker" in first + second else "boto3"
    code = TIMED.format(first=first, second=second, loaded=loaded)
    out = subprocess.run(
        [sys.executable, "-c", code], env=ENV, cwd=ROOT, capture_output=True, text=True, check=True
    )
    a, b, cold, imported = out.stdout.split()
    check(cold == "1", f"boto3, pydantic or continuum was imported before timing {first!r}")
    check(imported == "1", f"{loaded} was not imported by {first!r}; {second!r}")
    return float(a), float(b)


def importtime(statement: str) -> dict[str, int]:
    """Module -> self import time (us) from ``-X importtime``."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        env=ENV,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    modules = {}
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line.removeprefix("import time:").split("|")
        modules[name.strip()] = int(self_us)
    return modules


def group(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "aws_lambda_powertools":
        return ".".join(parts[:3])
    if parts[0] in ("continuum", "handlers", "samples"):
        return module
    return parts[0]


def contributors(runs: int) -> list[tuple[str, float]]:
    per_group: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        baseline = importtime(MODELS)
        full = importtime("import handlers.worker")
        check(
            "handlers.worker" in full and "continuum._worker.worker" in full,
            "-X importtime did not list the handler's modules",
        )
        sums: dict[str, float] = defaultdict(float)
        for module, self_us in full.items():
            if module not in baseline:
                sums[group(module)] += self_us / 1000
        for name, ms in sums.items():
            per_group[name].append(ms)
    medians = {name: median(v + [0.0] * (runs - len(v))) for name, v in per_group.items()}
    return sorted(medians.items(), key=lambda kv: kv[1], reverse=True)


def main(quick: bool = False) -> None:
    repeats = 3 if quick else 9
    timed("import handlers.worker", "pass")  # write any missing .pyc files first
    for module in ("continuum/_worker/worker.py", "handlers/worker.py"):
        cached = Path(importlib.util.cache_from_source(str(ROOT / module)))
        check(cached.exists(), f"no bytecode for {module}: the imports would compile it")
    results: dict[str, list[tuple[float, float]]] = {kind: [] for kind in KINDS}
    for _ in range(repeats):
        for kind, (first, second) in KINDS.items():
            results[kind].append(timed(first, second))
    baseline = median(a for a, _ in results["baseline"])
    handler = median(a for a, _ in results["handler"])
    after = median(b for _, b in results["handler_after_baseline"])
    no_powertools = median(b for _, b in results["handler_after_baseline_no_powertools"])
    clients = median(b for _, b in results["clients"])
    emit("cold_import.repeats", repeats)
    emit("cold_import.boto3_and_pydantic", 1000 * baseline, "ms")
    emit("cold_import.handlers_worker", 1000 * handler, "ms")
    emit("cold_import.continuum_own", 1000 * (handler - baseline), "ms (target <= 50)")
    emit("cold_import.handler_after_boto3_and_pydantic_models", 1000 * after, "ms")
    emit(
        "cold_import.handler_after_those_and_powertools_batch",
        1000 * no_powertools,
        "ms (continuum's own code and samples app)",
    )
    emit("cold_import.first_message_s3_sqs_clients", 1000 * clients, "ms")
    packages: dict[str, float] = defaultdict(float)
    for name, ms in contributors(3 if quick else 5):
        packages[name.split(".")[0]] += ms
        if ms >= 1.0:
            emit(f"cold_import.importtime_self.{name}", ms, "ms")
    for name, ms in sorted(packages.items(), key=lambda kv: kv[1], reverse=True)[:6]:
        emit(f"cold_import.importtime_self_by_package.{name}", ms, "ms")
    emit(
        "cold_import.importtime_self.all_beyond_baseline",
        sum(packages.values()),
        "ms (-X importtime inflates)",
    )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
