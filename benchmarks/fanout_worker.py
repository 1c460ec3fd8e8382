"""One worker process of the fan-out benchmark (``benchmarks.fanout_tasks``).

It runs ``continuum._local.standalone.QueueWorker`` (what ``continuum worker`` runs) on the
benchmark's app, and tallies every S3 and SQS call the app's clients make, per message: a
botocore ``before-parameter-build`` hook (one event per API call, its retries inside it)
names the call by its key or message body, and an ``after-call`` hook counts it for the
message the calling thread is handling (an answer of 300 or more is tallied as
``call!status``; a LIST's keys are summed as ``listed``). The pool threads a parent uses to
create its children's records and read their reports handle no message of their own: their
calls are tallied under ``task: null``. The source's ReceiveMessage and DeleteMessage go
through a client of their own and are not counted (on AWS, Lambda's event source mapping
makes them). One JSON line per message goes to ``--tally``.

``python -m benchmarks.fanout_worker --endpoint URL --bucket B --queue-url Q --parent ID
--slots N --tally PATH`` (the benchmark starts several); SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

import boto3

from continuum import Observer
from continuum._local.shutdown import Shutdown, stop_on_signals
from continuum._local.standalone import QueueSource, QueueWorker
from continuum.backends.sqs import SQSContinuationQueue

#: A worker's long poll: short, so that a stop is quick.
POLL_WAIT_S = 1


def classify(service: str, operation: str, params: dict[str, Any], parent: str) -> str:
    """``service:Operation:target``, the target named by role, e.g.
    ``s3:PutObject:parent/inbox/children/*`` or ``sqs:SendMessage:parent.wake``."""
    if service == "s3":
        key = str(params.get("Key") or params.get("Prefix") or "")
        return f"s3:{operation}:{_role_of_key(key, parent)}"
    if operation == "SendMessage":
        body = json.loads(params["MessageBody"])
        who = _role(body.get("task_id", ""), parent)
        what = "start" if body.get("reason") == "start" else body.get("kind", "continue")
        return f"sqs:SendMessage:{who}.{what}"
    return f"sqs:{operation}"


def _role(task_id: str, parent: str) -> str:
    if task_id == parent:
        return "parent"
    return "child" if task_id.startswith(f"{parent}.") else "other"


def _role_of_key(key: str, parent: str) -> str:
    parts = key.split("/", 2)  # prefix / task id / the rest
    if len(parts) < 2:
        return key
    rest = parts[2] if len(parts) > 2 else ""
    if rest.startswith("inbox/children/"):
        rest = "inbox/children/*"
    return f"{_role(parts[1], parent)}/{rest}"


class Tally(Observer):
    """The calls of each message this process handles, written as JSON lines."""

    def __init__(self, path: str, parent: str) -> None:
        self.parent = parent
        self._local = threading.local()
        self._lock = threading.Lock()
        self._out = open(path, "a")  # noqa: SIM115 - lives as long as the process

    def attach(self, client: Any, service: str) -> None:
        """Tally each call of ``client``: named before it is sent, counted when it answered
        (an error answer too, as ``...!412``)."""

        def name(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
            context["bench_call"] = classify(service, model.name, params, self.parent)

        def count(http_response: Any, parsed: Any, context: dict[str, Any], **_: Any) -> None:
            call = context.get("bench_call", f"{service}:?")
            status = getattr(http_response, "status_code", 200)
            if status >= 300:
                call = f"{call}!{status}"
            listed = int(parsed.get("KeyCount", 0)) if isinstance(parsed, dict) else 0
            current = getattr(self._local, "message", None)
            if current is None:
                self._write({"task": None, "calls": [call], "listed": listed})
            else:
                current["calls"].append(call)
                current["listed"] += listed

        client.meta.events.register(f"before-parameter-build.{service}", name)
        client.meta.events.register(f"after-call.{service}", count)

    def wrap(self, handler: Any) -> Any:
        """``handler`` with each message's calls tallied."""

        def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
            body = json.loads(event["Records"][0]["body"])
            message = {
                "task": body.get("task_id"),
                "kind": body.get("kind", "continue"),
                "reason": body.get("reason"),
                "outcome": None,
                "calls": [],
                "listed": 0,
            }
            started = time.monotonic()
            self._local.message = message
            try:
                return dict(handler(event, context))
            finally:
                self._local.message = None
                message["seconds"] = round(time.monotonic() - started, 4)
                self._write(message)

        return handle

    def message_handled(self, event: Any) -> None:
        current = getattr(self._local, "message", None)
        if current is not None:
            current["outcome"] = event.outcome

    def _write(self, line: dict[str, Any]) -> None:
        with self._lock:
            self._out.write(json.dumps(line) + "\n")
            self._out.flush()


def main(argv: list[str]) -> int:
    from benchmarks import fanout_tasks, silence_worker_logs

    parser = argparse.ArgumentParser()
    for option in ("--endpoint", "--bucket", "--queue-url", "--queue-arn", "--parent", "--tally"):
        parser.add_argument(option, required=True)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--budget", type=float, default=60.0)
    args = parser.parse_args(argv)
    silence_worker_logs()
    options = {
        "region_name": "us-east-1",
        "endpoint_url": args.endpoint,
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    s3, sqs = boto3.client("s3", **options), boto3.client("sqs", **options)
    tally = Tally(args.tally, args.parent)
    tally.attach(s3, "s3")
    tally.attach(sqs, "sqs")
    app = fanout_tasks.app
    app.configure(bucket=args.bucket, queue_url=args.queue_url, s3_client=s3, sqs_client=sqs)
    app.observe(tally)
    source_queue = SQSContinuationQueue(boto3.client("sqs", **options), args.queue_url)
    source = QueueSource(
        "continuations",
        source_queue,
        args.queue_arn,
        tally.wrap(app.handler),
        args.budget,
        slots=args.slots,
    )
    shutdown = Shutdown()
    worker = QueueWorker(
        [source], shutdown=shutdown, poll_wait_s=POLL_WAIT_S, parent_pid=os.getppid(), grace_s=5
    )
    print("ready", flush=True)
    with stop_on_signals(shutdown, grace_s=5):
        return worker.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
