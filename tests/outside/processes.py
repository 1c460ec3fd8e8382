"""continuum commands in processes of their own, and a stack on a moto server for them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from continuum._local.dev_stack import DevStack

ROOT = Path(__file__).resolve().parents[2]


def base_env(**extra: str) -> dict[str, str]:
    """A clean environment: no AWS account, this checkout's continuum importable."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    env.update(extra)
    return env


@contextmanager
def dev_stack(budget_s: float = 60.0) -> Iterator[tuple[DevStack, dict[str, str]]]:
    """A moto server with the stack's bucket and queues, and the environment that reaches it."""
    with DevStack(port=0, budget_s=budget_s) as stack:
        yield stack, base_env(**stack.environment())


def cli(*args: str, env: dict[str, str], cwd: Path = ROOT, timeout: float = 60):
    """``continuum ARGS`` to its end."""
    return subprocess.run(
        [sys.executable, "-m", "continuum.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


class Command:
    """``continuum ARGS`` running in the background; its output lines are read as they come."""

    def __init__(self, *args: str, env: dict[str, str], cwd: Path = ROOT) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "continuum.cli", *args],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read, args=(name, getattr(self.process, name)))
            for name in self.lines
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, name: str, stream: Any) -> None:
        with stream:
            for line in stream:
                with self._changed:
                    self.lines[name].append(line.rstrip("\n"))
                    self._changed.notify_all()

    def output(self) -> str:
        with self._changed:
            return "\n".join(self.lines["stdout"] + ["--- stderr ---"] + self.lines["stderr"])

    def wait_for(self, pattern: str, *, stream: str = "stdout", timeout: float = 30) -> re.Match:
        """The first line of ``stream`` that matches ``pattern``, waiting for it."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        exited_at: float | None = None
        with self._changed:
            while True:
                for line in self.lines[stream]:
                    if found := regex.search(line):
                        return found
                now = time.monotonic()
                if self.process.poll() is not None:  # give the readers a moment to finish
                    exited_at = exited_at or now
                if now > deadline or (exited_at is not None and now - exited_at > 0.5):
                    raise AssertionError(f"no line matching {pattern!r}:\n{self.output()}")
                self._changed.wait(0.2)

    def send(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """The exit code, within ``timeout`` seconds."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"still running after {timeout}s:\n{self.output()}") from None

    def stop(self) -> None:
        """Kill it if it still runs, and wait for its output to be read."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for reader in self._readers:
            reader.join(5)


def wait_until(predicate: Callable[[], Any], *, timeout: float = 30, what: str = "") -> Any:
    """Poll ``predicate`` until it is truthy; return its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
