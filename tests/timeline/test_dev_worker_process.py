"""``continuum dev``'s worker process, when it ends by itself: killed (kill -9), it is started
again and the dev log says what happened; exited (an app that fails to import), it waits for
a change to the app's files, and the log says that."""

from __future__ import annotations

import os
import signal
import sys

from continuum.cli import dev
from continuum.cli.dev import _WorkerProcess

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def ended(worker: _WorkerProcess) -> None:
    assert worker.process is not None
    worker.process.wait(10)


def test_a_worker_process_killed_by_sigkill_is_started_again_and_the_log_says_so(
    capsys, monkeypatch
):
    monkeypatch.setattr(dev, "RESTART_AGAIN_AFTER_S", 0.0)
    worker = _WorkerProcess(SLEEPER, dict(os.environ))
    worker.start()
    try:
        first = worker.process
        assert first is not None
        first.kill()
        ended(worker)
        worker.report_exit()
        assert worker.process is not first
        assert worker.process is not None
        assert worker.process.poll() is None
    finally:
        worker.kill()
        ended(worker)
    out = capsys.readouterr().out
    assert "the worker process was killed by SIGKILL; starting it again" in out
    assert "fix the app" not in out


def test_a_worker_process_killed_again_right_after_its_start_waits_for_a_change(
    capsys, monkeypatch
):
    monkeypatch.setattr(dev, "RESTART_AGAIN_AFTER_S", 3600.0)
    worker = _WorkerProcess(SLEEPER, dict(os.environ))
    worker.start()
    assert worker.process is not None
    os.kill(worker.process.pid, signal.SIGKILL)
    ended(worker)
    first = worker.process
    worker.report_exit()
    worker.report_exit()  # said once
    assert worker.process is first
    out = capsys.readouterr().out
    assert out.count("killed by SIGKILL again within 3600 s of its start") == 1
    assert "starts again when a .py file changes" in out


def test_a_worker_process_that_exits_with_an_error_waits_for_a_change(capsys):
    worker = _WorkerProcess([sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ))
    worker.start()
    ended(worker)
    worker.report_exit()
    assert worker.process is not None
    assert worker.process.returncode == 3
    out = capsys.readouterr().out
    assert "the worker process exited with code 3" in out
    assert "starts again when a .py file changes" in out
