"""``continuum dev`` of an app whose code gives its own signing key and callback URL (as
docs/approval-links.md shows for a deployed stack): the dev stack's key and pages still rule
locally, so a start from a second terminal runs, the link the task is handed points at the dev
pages, and answering it there finishes the task."""

from __future__ import annotations

import shlex
import signal
import urllib.request
from urllib.parse import urlencode

import pytest

from tests.outside.processes import Command, base_env, cli
from tests.outside.test_dev_links import reaches, status_of

APP = """
from pydantic import BaseModel

from continuum import Continuum, TaskContext

app = Continuum(signing_key="the-apps-own-key", callback_url="https://links.example.test")


class Ask(BaseModel):
    title: str


@app.task(state=Ask)
def ask(ctx: TaskContext[Ask]) -> dict:
    callback = ctx.create_callback("approval", request={"title": ctx.state.title})
    return {"approved": callback.result()["approved"], "url": callback.url}
"""


@pytest.mark.slow  # a dev stack or worker in subprocesses: seconds each
def test_dev_serves_an_app_with_its_own_key_and_callback_url_in_code(tmp_path, monkeypatch):
    monkeypatch.delenv("CONTINUUM_SIGNING_KEY", raising=False)
    (tmp_path / "approvals.py").write_text(APP)
    dev = Command(
        "dev", "approvals:app", "--port", "0", "--no-reload", env=base_env(), cwd=tmp_path
    )
    try:
        exports = dev.wait_for(r"^  export (.*)$").group(1)
        env = base_env(**dict(item.split("=", 1) for item in shlex.split(exports)))
        pages = dev.wait_for(r"^  timeline: (http://127\.0\.0\.1:\d+/) ").group(1)
        dev.wait_for(r"continuum worker: approvals:app", stream="stderr")

        started = cli("start", "ask", "--input", '{"title": "tides"}', env=env, cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        task_id = started.stdout.strip()
        reaches(env, task_id, "waiting")
        [waiter] = status_of(task_id, env, tmp_path)["waiting_for"]
        form = urlencode({"decision": "approve"}).encode()
        with urllib.request.urlopen(waiter["url"], data=form, timeout=10) as answered:
            assert answered.status == 200

        reaches(env, task_id, "succeeded")
        result = status_of(task_id, env, tmp_path)["result"]
        assert result["approved"] is True
        assert result["url"] == waiter["url"]
        assert result["url"].startswith(pages + "cb/v1.")
        dev.send(signal.SIGINT)
        assert dev.wait(timeout=15) == 0, dev.output()
    finally:
        dev.stop()
    assert "rejected" not in dev.output()
