"""The worker processes: each started with a kill point drawn from the seed, replaced when it dies.

Every worker is a separate ``python -m chaos.worker`` process pointed at the moto server. The
harness keeps ``size`` of them alive; a worker that died (SIGKILL from its own injector) is
replaced by a fresh one with a new kill point, as Lambda starts a new execution environment.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import IO

from chaos.faults import KILL_POINTS
from chaos.server import Resources

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker process is told on its command line."""

    index: int
    seed: int
    kill_point: str
    kill_at: int


@dataclass
class _Running:
    spec: WorkerSpec
    process: subprocess.Popen[bytes]
    log: IO[bytes]


@dataclass
class Fleet:
    """Keeps ``size`` worker processes running until :meth:`stop`.

    Args:
        resources: the bucket and queues.
        run_dir: where the event log, the ledger and the worker logs go.
        budget_s: the deadline of each emulated invocation.
        rates: fault kind -> probability per call, for every worker.
        rng: draws each worker's kill point, occurrence and fault seed.
        kill_prob: the share of workers that get a kill point.
        size: how many workers run at once.
    """

    resources: Resources
    run_dir: str
    budget_s: float
    rates: dict[str, float]
    rng: random.Random
    kill_prob: float
    size: int
    started: int = 0
    exits: Counter[str] = field(default_factory=Counter)
    crash_logs: list[str] = field(default_factory=list)
    _running: list[_Running] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(
            {
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": self.resources.endpoint,
                "CHAOS_LEDGER": os.path.join(self.run_dir, "ledger.jsonl"),
                "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")])),
            }
        )
        return env

    def next_spec(self) -> WorkerSpec:
        point, at = "none", 1
        if self.rng.random() < self.kill_prob:
            point = self.rng.choice(sorted(KILL_POINTS))
            at = self.rng.randint(1, KILL_POINTS[point])
        return WorkerSpec(self.started, self.rng.randrange(2**32), point, at)

    def spawn(self) -> WorkerSpec:
        spec = self.next_spec()
        r = self.resources
        command = [
            sys.executable,
            "-m",
            "chaos.worker",
            *("--endpoint", r.endpoint, "--bucket", r.bucket),
            *("--queue-url", r.queue_url, "--queue-arn", r.queue_arn),
            *("--run-dir", self.run_dir, "--budget", str(self.budget_s)),
            *("--seed", str(spec.seed), "--faults", json.dumps(self.rates)),
            *("--kill-point", spec.kill_point, "--kill-at", str(spec.kill_at)),
        ]
        log = open(os.path.join(self.run_dir, f"worker-{spec.index:04d}.log"), "wb")  # noqa: SIM115
        process = subprocess.Popen(  # noqa: S603 - our own module, no shell
            command, stdout=log, stderr=subprocess.STDOUT, env=self.env(), cwd=ROOT
        )
        self._running.append(_Running(spec, process, log))
        self.started += 1
        return spec

    def fill(self) -> None:
        """Start workers until ``size`` run."""
        while len(self._running) < self.size:
            self.spawn()

    def reap(self) -> list[tuple[WorkerSpec, int]]:
        """Collect the workers that exited: (spec, return code); -9 means SIGKILL."""
        dead = []
        for running in list(self._running):
            code = running.process.poll()
            if code is None:
                continue
            running.log.close()
            self._running.remove(running)
            dead.append((running.spec, code))
            if code == -signal.SIGKILL:
                self.exits["killed"] += 1
            elif code == 0:
                self.exits["exited"] += 1
            else:
                self.exits["crashed"] += 1
                self.crash_logs.append(running.log.name)
        return dead

    def stop(self, timeout_s: float = 20.0) -> None:
        """Ask every worker to finish its invocation and exit; kill the ones that do not."""
        for running in self._running:
            if running.process.poll() is None:
                running.process.send_signal(signal.SIGTERM)
        for running in self._running:
            try:
                running.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                running.process.kill()
                running.process.wait()
        self.reap()
