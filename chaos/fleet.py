"""The worker processes: each started with a kill point drawn from the seed, replaced when it dies.

Every worker is a separate process running ``chaos.worker`` against the moto server, forked by
the fork server ``chaos.zygote`` (so a replacement starts in milliseconds, not the second a
cold Python import takes). The harness keeps ``size`` of them alive; a worker that died
(SIGKILL from its own injector) is replaced by a fresh one with a new kill point, as Lambda
starts a new execution environment.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any

from chaos.faults import KILL_POINTS
from chaos.server import Resources

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker process is told on its command line."""

    index: int
    seed: int
    kills: tuple[tuple[str, int], ...]  # (kill point, occurrence): the first to come kills
    retire_after: int  # invocations after which a worker that was not killed exits (0: never)
    warm: bool = False  # one of the warm workers: no kill point, never retires
    older_until: float = 0.0  # runs the older release until then (``chaos.rollback``): extra


@dataclass
class _Running:
    spec: WorkerSpec
    pid: int
    log: str


class Zygote:
    """The fork server (``python -m chaos.zygote``) and its one-line JSON protocol."""

    def __init__(self, env: dict[str, str], log: str) -> None:
        self._log: IO[bytes] = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "chaos.zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            cwd=ROOT,
        )

    def ask(self, **request: Any) -> dict[str, Any]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write((json.dumps(request) + "\n").encode())
        stdin.flush()
        line = stdout.readline()
        if not line:
            code = self.process.poll()
            raise RuntimeError(f"the fork server exited ({code}); see {self._log.name}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def spawn(self, argv: list[str], log: str) -> int:
        return int(self.ask(op="spawn", argv=argv, log=log)["pid"])

    def reap(self) -> dict[int, int]:
        """Children that ended since the last call: pid -> return code."""
        return {int(pid): int(code) for pid, code in self.ask(op="reap")["exited"]}

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()


@dataclass
class Fleet:
    """Keeps ``size`` worker processes running until :meth:`stop`.

    Args:
        resources: the bucket and queues.
        run_dir: where the event log, the ledger and the worker logs go.
        budget_s: the deadline of each emulated invocation.
        rates: fault kind -> probability per call, for every worker.
        rng: draws each worker's kill points, occurrences and fault seed.
        kill_prob: the share of workers that arm kill points.
        size: how many workers run at once, the warm ones included.
        armed: how many kill points a worker that arms them arms (the first to come kills).
        retire_after: invocations after which a worker exits, if it was not killed before.
        warm: how many of the ``size`` are warm workers: no kill point, no retirement (only
            the poison step or a deadline kills one). A warm worker runs the whole run with
            its app, clients and caches, as a busy Lambda environment does, so a task often
            comes back to it after another worker ran (and tidied the blobs of) it.
    """

    resources: Resources
    run_dir: str
    budget_s: float
    rates: dict[str, float]
    rng: random.Random
    kill_prob: float
    size: int
    armed: int = 1
    retire_after: int = 0
    warm: int = 0
    started: int = 0
    exits: Counter[str] = field(default_factory=Counter)
    crash_logs: list[str] = field(default_factory=list)
    _running: dict[int, _Running] = field(default_factory=dict)
    _zygote: Zygote | None = None

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

    def next_spec(self, *, warm: bool = False) -> WorkerSpec:
        """A warm worker, or one of the others: a share ``kill_prob`` of them arm ``armed``
        kill points, the rest live until they retire after ``retire_after`` invocations."""
        if warm:
            return WorkerSpec(self.started, self.rng.randrange(2**32), (), 0, warm=True)
        kills: tuple[tuple[str, int], ...] = ()
        if self.rng.random() < self.kill_prob:
            points = self.rng.sample(sorted(KILL_POINTS), self.armed)
            kills = tuple((p, self.rng.randint(1, KILL_POINTS[p])) for p in sorted(points))
        return WorkerSpec(self.started, self.rng.randrange(2**32), kills, self.retire_after)

    def spawn_older(self, until: float) -> WorkerSpec:
        """One worker more, of the older release, with no kill point, until ``until``."""
        spec = WorkerSpec(self.started, self.rng.randrange(2**32), (), 0, older_until=until)
        return self.spawn(spec=spec)

    def spawn(self, *, warm: bool = False, spec: WorkerSpec | None = None) -> WorkerSpec:
        spec = spec or self.next_spec(warm=warm)
        r = self.resources
        argv = [
            *("--endpoint", r.endpoint, "--bucket", r.bucket),
            *("--queue-url", r.queue_url, "--queue-arn", r.queue_arn),
            *("--run-dir", self.run_dir, "--budget", str(self.budget_s)),
            *("--seed", str(spec.seed), "--faults", json.dumps(self.rates)),
            *(arg for point, at in spec.kills for arg in ("--kill", f"{point}:{at}")),
            *("--retire-after", str(spec.retire_after)),
            *("--older-until", str(spec.older_until)),
        ]
        if self._zygote is None:
            self._zygote = Zygote(self.env(), os.path.join(self.run_dir, "zygote.log"))
        log = os.path.join(self.run_dir, f"worker-{spec.index:04d}.log")
        pid = self._zygote.spawn(argv, log)
        self._running[pid] = _Running(spec, pid, log)
        self.started += 1
        return spec

    def fill(self) -> None:
        """Start workers until ``size`` run, ``warm`` of them warm."""
        while sum(not r.spec.older_until for r in self._running.values()) < self.size:
            warm = sum(r.spec.warm for r in self._running.values())
            self.spawn(warm=warm < self.warm)

    def reap(self) -> list[tuple[WorkerSpec, int]]:
        """Collect the workers that exited: (spec, return code); -9 means SIGKILL."""
        if self._zygote is None:
            return []
        dead = []
        for pid, code in self._zygote.reap().items():
            running = self._running.pop(pid, None)
            if running is None:
                continue
            dead.append((running.spec, code))
            if code == -signal.SIGKILL:
                self.exits["killed"] += 1
            elif code == 0:
                self.exits["exited"] += 1
            else:
                self.exits["crashed"] += 1
                self.crash_logs.append(running.log)
        return dead

    def _signal_all(self, signum: int) -> None:
        # Only our own workers, by pid: each is unreaped until reap() sees it, so its pid
        # cannot have been reused.
        for pid in self._running:
            os.kill(pid, signum)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Ask every worker to finish its invocation and exit; kill the ones that do not."""
        if self._zygote is None:
            return
        self._signal_all(signal.SIGTERM)
        ends = time.monotonic() + timeout_s
        while self._running and time.monotonic() < ends:
            time.sleep(0.05)
            self.reap()
        self._signal_all(signal.SIGKILL)
        while self._running:
            time.sleep(0.01)
            self.reap()
        self._zygote.close()
        self._zygote = None
