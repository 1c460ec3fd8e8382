"""``continuum ui`` against a stack, as an operator runs it: a moto server on loopback stands
for AWS, the command runs in its own process with the stack's environment, and its pages are
used in headless Chromium: the task list, a task's page, a callback answered, a failed task
retried. Its guards hold: a POST without the server's token, another Host, another Origin
are refused (403) and change nothing; a read without the token the command printed (its
cookie) is refused (403) and shows no task."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from continuum import Status
from continuum.errors import CallbackError
from tests.conftest import sqs_event
from tests.support import LocalLambdaContext
from tests.timeline.browser import Browser
from tests.timeline.ui_app import app

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"


@contextlib.contextmanager
def stack() -> Iterator[tuple[dict[str, str], Any]]:
    """A moto server on 127.0.0.1 with the stack's bucket and queue; its environment."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
        sqs = boto3.client("sqs", region_name=REGION, endpoint_url=endpoint)
        s3.create_bucket(Bucket="stack-bucket")
        queue_url = sqs.create_queue(QueueName="stack-queue")["QueueUrl"]
        app.configure(bucket="stack-bucket", queue_url=queue_url, s3_client=s3, sqs_client=sqs)
        env = {
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_ENDPOINT_URL": endpoint,
            "CONTINUUM_BUCKET": "stack-bucket",
            "CONTINUUM_QUEUE_URL": queue_url,
        }
        yield env, sqs
    finally:
        server.stop()


def run_worker_until(done: Callable[[], bool], env: dict[str, str], sqs: Any) -> None:
    """The stack's worker: the queue's messages, handled as the Lambda would, until ``done``."""
    for _ in range(100):
        if done():
            return
        got = sqs.receive_message(
            QueueUrl=env["CONTINUUM_QUEUE_URL"], MaxNumberOfMessages=10, WaitTimeSeconds=1
        )
        for message in got.get("Messages", []):
            event = sqs_event(
                message["Body"],
                message_ids=[message["MessageId"]],
                receipt=message["ReceiptHandle"],
            )
            app.handler(event, LocalLambdaContext(30))
            sqs.delete_message(
                QueueUrl=env["CONTINUUM_QUEUE_URL"], ReceiptHandle=message["ReceiptHandle"]
            )
    raise AssertionError("the tasks did not get there in 100 polls of the queue")


@contextlib.contextmanager
def continuum_ui(env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """``continuum ui --port 0`` in its own process; its pages' root, and the URL it prints
    (the root with the token once)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "continuum.cli", "ui", "--port", "0"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)\?token=[\w-]+", first)
        assert found, first + (process.stderr.read() if process.poll() is not None else "")
        yield found.group(1), found.group(0)
    finally:
        process.terminate()
        process.wait(10)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def answer_to(
    url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, str, Any]:
    """The status, body and headers of a request, without following a redirect."""
    request = urllib.request.Request(url, data=data, headers=headers or {})
    opener = urllib.request.build_opener(NoRedirects)
    try:
        with opener.open(request, timeout=10) as answer:
            return int(answer.status), answer.read().decode(), answer.headers
    except urllib.error.HTTPError as refused:
        with refused:
            return int(refused.code), refused.read().decode(), refused.headers


def status_of(url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None) -> int:
    return answer_to(url, data=data, headers=headers)[0]


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: Any) -> None:
        return None


def form(**fields: str) -> bytes:
    from urllib.parse import urlencode

    return urlencode(fields).encode()


def follow_link(browser: Browser, selector: str) -> None:
    """Click the link ``selector`` finds and wait for the page it opens."""
    browser.events.clear()
    browser.evaluate(f"document.querySelector({selector!r}).click()")
    browser.wait_for_event("Page.loadEventFired")


@pytest.mark.slow  # a dev stack or worker in subprocesses: seconds each
def test_continuum_ui_serves_a_stacks_tasks_with_their_actions_and_guards(
    browser: Browser, quiet: Any
):
    with stack() as (env, sqs):
        client = app.client()
        parent = client.start("review", {}, task_id="review-1")
        failing = client.start("breaks", {}, task_id="broken-1")

        def waiting_and_failed() -> bool:
            kids = client.tasks(task_name="needs_approval")
            return (
                [k.status for k in kids] == [Status.WAITING]
                and client.status(parent).status == Status.WAITING
                and client.status(failing).status == Status.FAILED
            )

        run_worker_until(waiting_and_failed, env, sqs)
        [child] = [t.task_id for t in client.tasks(task_name="needs_approval")]
        with continuum_ui(env) as (url, printed):
            browser.open("about:blank")  # what the page before left reloading stops
            browser.open(printed)
            listed = browser.evaluate("document.body.innerText")
            assert {parent, child, failing} <= set(listed.split())
            assert "continuum ui" in browser.evaluate("document.title")

            browser.open(f"{url}tasks/{parent}")
            follow_link(browser, "#children a")  # the parent's page links its child's
            assert browser.evaluate("location.pathname") == f"/tasks/{child}"
            token = browser.evaluate(
                "JSON.parse(document.getElementById('timeline-data').textContent).server.token"
            )
            cancel = f"{url}tasks/{child}/cancel"
            port = url.rstrip("/").rpartition(":")[2]
            assert status_of(cancel, data=form(token="wrong")) == 403
            assert status_of(url, headers={"Host": "evil.example"}) == 403
            foreign_origin = {"Origin": "http://evil.example"}
            assert status_of(cancel, data=form(token=token), headers=foreign_origin) == 403
            foreign_host = {"Host": f"evil.example:{port}"}
            assert status_of(cancel, data=form(token=token), headers=foreign_host) == 403
            assert client.records.inbox.cancel(child) is None  # nothing was written

            browser.submit("form.complete-callback", result='{"approved": true}')
            assert "Callback completed" in browser.evaluate("document.body.innerText")
            [callback] = client.status(child).waiting_for
            with pytest.raises(CallbackError, match="already answered"):
                client.complete_callback(callback.id, {"approved": False})

            browser.open(f"{url}tasks/{failing}")
            browser.submit("form.retry-task")
            assert "Retry started" in browser.evaluate("document.body.innerText")
            assert client.status(failing).status != Status.FAILED
            browser.open("about:blank")  # the pages reload themselves: not once the server left

        def finished() -> bool:
            ends = (client.status(parent).status, client.status(failing).status)
            return ends == (Status.SUCCEEDED, Status.FAILED)  # the retry failed again, as it must

        run_worker_until(finished, env, sqs)
        assert client.status(parent).result == {"approved": True}
    assert browser.violations() == []


def test_continuum_ui_shows_tasks_only_to_whom_opened_the_url_it_printed(browser: Browser):
    with stack() as (env, _):
        task = app.client().start("review", {}, task_id="secret-task-1")
        with continuum_ui(env) as (url, printed):
            for page in (url, f"{url}tasks/{task}", f"{url}tasks/{task}?done=cancel"):
                status, body, _ = answer_to(page)
                assert status == 403, page
                assert task not in body
                assert "open the URL it printed" in body
            status, body, _ = answer_to(f"{url}tasks/{task}?token=wrong")
            assert status == 403
            assert task not in body
            port = url.rstrip("/").rpartition(":")[2]
            forged = {"Cookie": f"continuum_token_{port}=wrong"}
            assert status_of(url, headers=forged) == 403

            status, _, headers = answer_to(printed)
            assert (status, headers["Location"]) == (303, "/")  # the same page, without the token
            token = printed.partition("?token=")[2]
            cookie = f"continuum_token_{port}={token}; HttpOnly; SameSite=Strict; Path=/"
            assert headers["Set-Cookie"] == cookie
            deep = answer_to(f"{url}tasks/{task}?done=retry&token={token}")[2]
            assert deep["Location"] == f"/tasks/{task}?done=retry"
            elsewhere = answer_to(f"{url}/evil.example/?token={token}")[2]
            assert elsewhere["Location"] == "/"  # its own pages only: no open redirect

            browser.open("about:blank")
            browser.open(printed)
            assert browser.evaluate("location.href") == url  # the token left the address bar
            assert task in browser.evaluate("document.body.innerText").split()
            assert browser.evaluate("document.cookie") == ""  # HttpOnly: no script reads it
            browser.open(f"{url}tasks/{task}")  # later pages need only the cookie
            assert browser.evaluate("location.pathname") == f"/tasks/{task}"
            assert task in browser.evaluate("document.title")
            browser.open("about:blank")
