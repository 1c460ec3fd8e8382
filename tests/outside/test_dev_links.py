"""Approval links with `continuum dev`, and a start that no worker took, as a person meets them:
each command a process of its own, the second terminal given only what the export line says.

- The dev stack signs with a key of its own, which its export line carries, or with the user's
  ``CONTINUUM_SIGNING_KEY``, which it never prints (it may be a real one): the banner says to
  set it in the other terminal too. With the link endpoint's URL from the export line, a task
  started from another terminal runs, ``continuum status`` shows its callback's link, and the
  link answers it.
- A start the worker refused (not signed, or signed with another key) is not "about to run":
  ``continuum status`` and ``inspect`` say that a message naming it was refused, why, and how
  to mend it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from continuum._local.dev_stack import DevStack
from continuum.cli.common import Stack
from tests.fresh import ROOT, fenced_blocks
from tests.outside.processes import Command, base_env, cli, dev_stack, wait_until

DOCS = ROOT / "docs"

APP = """
from pydantic import BaseModel

from continuum import Continuum, TaskContext

app = Continuum()


class Ask(BaseModel):
    title: str


@app.task(state=Ask)
def ask(ctx: TaskContext[Ask]) -> bool:
    answer = ctx.create_callback("approval", request={"title": ctx.state.title}).result()
    return bool(answer["approved"])
"""


def curl_block() -> list[str]:
    """The commands of docs/approval-links.md's curl block."""
    (block,) = (text for _, text in fenced_blocks(DOCS / "approval-links.md") if "curl" in text)
    return block.splitlines()


def shell(command: str, **env: str) -> str:
    """``command`` run by bash as a person pastes it; its output."""
    done = subprocess.run(
        ["bash", "-c", command],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def status_of(task_id: str, env: dict[str, str], cwd: Path) -> dict:
    """``continuum status TASK_ID``, as the person in the second terminal runs it."""
    shown = cli("status", task_id, env=env, cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def reaches(env: dict[str, str], task_id: str, status: str, *, hint: bool = False) -> None:
    """Wait until the task is in ``status`` (and has a hint): polled in this process (a CLI
    process a poll would be slow), as ``continuum status`` reads it."""
    poll = Stack(env["CONTINUUM_BUCKET"], None, "tasks", env["AWS_ENDPOINT_URL"], "us-east-1")
    client = poll.client()

    def there() -> bool:
        now = client.status(task_id)
        return now.status.value == status and (now.hint is not None or not hint)

    wait_until(there, what=f"{status} task")


@pytest.mark.slow  # a dev stack or worker in subprocesses: seconds each
def test_dev_links_work_from_a_second_terminal_with_the_export_line_and_the_users_own_key(
    tmp_path,
):
    (tmp_path / "approvals.py").write_text(APP)
    dev = Command(
        "dev", "approvals:app", "--port", "0", "--no-reload",
        env=base_env(CONTINUUM_SIGNING_KEY="the-users-own-key"), cwd=tmp_path,
    )  # fmt: skip
    try:
        exports = dev.wait_for(r"^  export (.*)$").group(1)
        exported = dict(item.split("=", 1) for item in shlex.split(exports))
        assert "CONTINUUM_SIGNING_KEY" not in exported
        assert "the-users-own-key" not in dev.output()
        assert "set the same CONTINUUM_SIGNING_KEY in the other terminal too" in dev.output()
        # the second terminal: the export line, and the user's own key, as the banner says
        env = base_env(**exported, CONTINUUM_SIGNING_KEY="the-users-own-key")
        pages = dev.wait_for(r"^  timeline: (http://127\.0\.0\.1:\d+/) ").group(1)
        assert env["CONTINUUM_CALLBACK_URL"] == pages.rstrip("/")
        dev.wait_for(r"continuum worker: approvals:app", stream="stderr")

        started = cli("start", "ask", "--input", '{"title": "tides"}', env=env, cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        task_id = started.stdout.strip()

        reaches(env, task_id, "waiting")
        [waiter] = status_of(task_id, env, tmp_path)["waiting_for"]
        assert waiter["url"].startswith(pages + "cb/v1.")
        page, form, webhook = (
            shell(command, URL=waiter["url"]) for command in curl_block()
        )  # the approval page's shell block, as shown
        assert "tides" in page
        assert "you approved this request" in form
        assert "answered" in webhook

        reaches(env, task_id, "succeeded")
        assert status_of(task_id, env, tmp_path)["result"] is True
        dev.send(signal.SIGINT)
        assert dev.wait(timeout=15) == 0, dev.output()
    finally:
        dev.stop()
    assert "the-users-own-key" not in dev.output()  # in no line, the workers' neither
    assert "rejected" not in dev.output()
    assert "Traceback" not in dev.output()


def test_the_dev_stack_signs_with_a_key_of_its_own_unless_the_user_gives_one(monkeypatch):
    monkeypatch.delenv("CONTINUUM_SIGNING_KEY", raising=False)
    first, second = DevStack(port=0).signing_key, DevStack(port=0).signing_key
    assert len(first) >= 32
    assert first != second
    monkeypatch.setenv("CONTINUUM_SIGNING_KEY", "new-key, old-key")
    assert DevStack(port=0).signing_key == "new-key, old-key"


@pytest.mark.slow  # a dev stack or worker in subprocesses: seconds each
def test_a_start_the_worker_refused_says_so_in_status_and_inspect(tmp_path):
    (tmp_path / "approvals.py").write_text(APP)
    with dev_stack() as (_stack, env):
        assert env["CONTINUUM_SIGNING_KEY"]  # the stack's, which its worker verifies with
        worker = Command(
            "worker", "approvals:app", "--budget", "60", "--poll-wait", "1",
            env=env, cwd=tmp_path,
        )  # fmt: skip
        try:
            worker.wait_for(r"continuum worker: approvals:app", stream="stderr")
            # The second terminal without the key: its start is not signed.
            unsigned = {k: v for k, v in env.items() if k != "CONTINUUM_SIGNING_KEY"}
            start = ["start", "ask", "--app", "approvals:app", "--input", '{"title": "tides"}']
            started = cli(*start, env=unsigned, cwd=tmp_path)
            assert started.returncode == 0, started.stderr
            task_id = started.stdout.strip()
            worker.wait_for(r"rejected a message: message is not signed")
            reaches(env, task_id, "pending", hint=True)  # the worker notes it after its log

            status = status_of(task_id, env, tmp_path)
            assert status["status"] == "pending"
            hint = status["hint"]
            assert hint.startswith("a message naming this task was refused at ")
            assert "not signed" in hint
            assert "CONTINUUM_SIGNING_KEY" in hint
            assert f"continuum resume {task_id}" in hint
            shown = cli("inspect", task_id, env=env, cwd=tmp_path)
            assert shown.returncode == 0, shown.stderr
            assert hint in shown.stdout

            # Mended as the hint says: resumed with the key, it runs.
            resumed = cli("resume", task_id, env=env, cwd=tmp_path)
            assert resumed.returncode == 0, resumed.stderr
            reaches(env, task_id, "waiting")
            assert status_of(task_id, env, tmp_path).get("hint") is None
        finally:
            worker.stop()
