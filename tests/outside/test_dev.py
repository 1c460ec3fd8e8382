"""From an empty directory: continuum init, dev, start, status, run, resume; reload; Ctrl-C.

This is the README's "Your own project", run as a person would, each command a process of its
own; only `sam build` is left out (it needs the SAM CLI: tests/test_template.py checks the
packaging offline).
"""

from __future__ import annotations

import json
import shlex
import signal
import urllib.request

from continuum.cli.common import Stack
from tests.outside.processes import Command, base_env, cli, wait_until

A_SLOW_TASK = """
from pydantic import BaseModel


class Slow(BaseModel):
    n: int
    done: int = 0


@app.step
def nap(i: int) -> int:
    import time

    time.sleep(0.3)
    return i


@app.task(state=Slow)
def slow(ctx: TaskContext[Slow]) -> int | None:
    if ctx.state.done < ctx.state.n:
        ctx.state.done = nap(ctx.state.done) + 1
        return None
    ctx.wait_for_signal("go")  # held, so that a Ctrl-C always finds it still followed
    return ctx.state.done
"""


def test_init_dev_start_status_reload_run_resume_and_ctrl_c(tmp_path):
    project = tmp_path / "tides"
    made = cli("init", "tides", "--path", str(project), env=base_env(), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    src = project / "src"
    dev = Command("dev", "tides:app", "--port", "0", "--budget", "1", "--grace", "2",
                  env=base_env(), cwd=src)  # fmt: skip
    try:
        exports = dev.wait_for(r"^  export (.*)$").group(1)
        env = base_env(**dict(item.split("=", 1) for item in shlex.split(exports)))
        assert env["CONTINUUM_APP"] == "tides:app"
        dev.wait_for(r"continuum worker: tides:app \(tasks: word_count\)", stream="stderr")

        def status(task_id: str) -> dict:
            done = cli("status", task_id, env=env, cwd=src)
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        # Polled in this process (a CLI process a poll would be slow); read once by the CLI.
        stack = Stack(env["CONTINUUM_BUCKET"], None, "tasks", env["AWS_ENDPOINT_URL"], "us-east-1")
        poll = stack.client()

        def finished(task_id: str) -> bool:
            return poll.status(task_id).status.finished

        lines = json.dumps({"lines": ["the tide comes in", "the tide goes out"]})
        started = cli("start", "word_count", "--input", lines, env=env, cwd=src)
        assert started.returncode == 0, started.stderr
        task_id = started.stdout.strip()
        wait_until(lambda: finished(task_id))
        done = status(task_id)
        assert done["status"] == "succeeded"
        assert done["result"] == {"comes": 1, "goes": 1, "in": 1, "out": 1, "the": 2, "tide": 2}
        dev.wait_for(rf"task {task_id} word_count: succeeded")

        # Its pages list the task and show its timeline (tests/timeline tests them whole).
        pages = dev.wait_for(r"^  timeline: (http://127\.0\.0\.1:\d+/) ").group(1)
        with urllib.request.urlopen(pages, timeout=10) as listing:
            assert f'data-task-id="{task_id}"' in listing.read().decode()
        with urllib.request.urlopen(f"{pages}tasks/{task_id}", timeout=10) as page:
            assert f'"task_id":"{task_id}"' in page.read().decode()

        # A change to the app's code restarts the workers on it.
        module = src / "tides.py"
        module.write_text(module.read_text() + A_SLOW_TASK)
        dev.wait_for(r"tides.py changed; reloading the workers")
        dev.wait_for(r"\(tasks: slow, word_count\)", stream="stderr")

        # `continuum run` on the dev server follows the task; Ctrl-C leaves it going.
        run = Command("run", "tides:slow", "--input", '{"n": 8}', env=env, cwd=src)
        try:
            slow_id = run.wait_for(r"started slow as task (\w+) on http").group(1)
            run.wait_for(r"^generation ")
            run.send(signal.SIGINT)
            assert run.wait(timeout=10) == 130, run.output()
        finally:
            run.stop()
        assert f"stopped following task {slow_id}" in run.output()
        assert "Traceback" not in run.output()
        sent = cli("signal", slow_id, "go", env=env, cwd=src)
        assert sent.returncode == 0, sent.stderr
        wait_until(lambda: finished(slow_id))
        ended = status(slow_id)
        assert (ended["status"], ended["result"]) == ("succeeded", 8)
        assert ended["counters"]["continuations"] >= 1  # 2.4 s of steps, 1 s invocations
        resumed = cli("resume", slow_id, env=env, cwd=src)
        assert (
            resumed.stdout.strip() == f"task {slow_id} has finished (succeeded): nothing to resume"
        )

        dev.send(signal.SIGINT)
        assert dev.wait(timeout=15) == 0, dev.output()
    finally:
        dev.stop()
    assert "continuum dev: stopped" in dev.output()
    assert "Traceback" not in dev.output()


def test_the_readmes_own_project_commands_parse_as_written():
    """Every `continuum` line of the docs' "Your own project" is a valid command line."""
    from pathlib import Path

    from continuum.cli import build_parser

    page = (Path(__file__).resolve().parents[2] / "docs" / "your-project.md").read_text()
    section = page.split("# Your own project", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("continuum ")]
    assert {line.split()[1] for line in lines} >= {"init", "dev", "start", "status", "run"}
    for line in lines:
        args = build_parser().parse_args(shlex.split(line, comments=True)[1:])
        assert callable(args.func), line
