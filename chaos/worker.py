"""One worker process: plays a Lambda execution environment fed by the SQS event source.

It loops: receive one message (never long-polling), build the SQS event as Lambda would,
call ``app.handler`` with a Lambda context whose deadline is the budget (longer for the blob
task: ``chaos.tasks.invocation_budget``), and delete the messages the handler did not report
as failed — until it is told to stop (SIGTERM), its parent goes away, or it dies. It keeps its
app, clients and caches between invocations, as a warm Lambda environment does. The
:class:`chaos.faults.Injector` decides from outside the library where it dies and which AWS
calls fail. A watchdog kills the process if an invocation runs past its deadline, as Lambda
does.

Forked by ``chaos.zygote`` for the harness; ``python -m chaos.worker --endpoint URL --bucket B
--queue-url Q ...`` runs one by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import threading
import time
from typing import Any

import boto3
from botocore.exceptions import ClientError

from chaos import rollback, schedules, tasks
from chaos.base import TIMER_MAX_DELAY_S
from chaos.faults import KILL_POINTS, EventLog, Injector
from chaos.server import as_queue_message, client_options
from continuum import Continuum
from continuum._local.runtime import LocalLambdaContext, event_record
from continuum.backends.sqs import SQSContinuationQueue

#: How long an idle worker waits before polling the queue again (each poll is a request the
#: moto server, one process for the whole fleet, does not spend on real work).
IDLE_POLL_S = 0.1


def task_of(body: str) -> str | None:
    """The task id a continuation body names, if it parses."""
    try:
        task_id = json.loads(body).get("task_id")
    except (ValueError, AttributeError):
        return None
    return task_id if isinstance(task_id, str) else None


class Environment:
    """An emulated Lambda execution environment running the chaos app."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stopping = False
        self.invocations = 0  # in this process: after the first, the worker is warm
        self.parent = os.getppid()
        options = client_options(args.endpoint)
        s3, sqs = boto3.client("s3", **options), boto3.client("sqs", **options)
        self.source = boto3.client("sqs", **options)
        self.app = tasks.app
        queue = SQSContinuationQueue(sqs, args.queue_url)
        queue.max_delay_s = TIMER_MAX_DELAY_S  # long waits hop, as hours-long ones do on AWS
        self.app.configure(bucket=args.bucket, s3_client=s3, queue=queue)
        scheduler = schedules.worker_scheduler(
            args.endpoint, args.queue_arn, args.seed, args.run_dir
        )
        self.app.configure(scheduler=scheduler)  # waits past the 2 s reach: one schedule each
        self.app.update_settings(visibility_margin_s=args.visibility_margin)
        self.events = EventLog(os.path.join(args.run_dir, "events.jsonl"))
        self.injector = Injector(
            self.events,
            kills=dict(args.kill),
            rates=json.loads(args.faults),
            rng=random.Random(args.seed),
            shadow_s3=boto3.client("s3", **options),
            shadow_sqs=boto3.client("sqs", **options),
        )
        self.injector.install(self.app, s3, sqs, self.source)
        #: The older release's app, for the tasks it runs with code of its own (a rollback).
        self.older: Continuum | None = None
        if args.older_until:
            self.older = rollback.older_app()
            self.older.configure(bucket=args.bucket, s3_client=s3, queue=queue)
            self.older.configure(scheduler=scheduler)
            self.older.update_settings(visibility_margin_s=args.visibility_margin)

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        self.events.write(
            "start",
            kills=dict(self.args.kill),
            retire=self.args.retire_after,
            older=self.older is not None,
        )
        while not self.stopping and os.getppid() == self.parent:
            if self.args.retire_after and self.invocations >= self.args.retire_after:
                break  # Lambda retires execution environments too
            if self.older is not None and time.time() >= self.args.older_until:
                break  # the rollback is over: the release is rolled forward
            if not self.invoke_once():
                time.sleep(IDLE_POLL_S)
        self.events.write("exit", invocations=self.invocations)

    def _stop(self, *_: Any) -> None:
        self.stopping = True

    def invoke_once(self) -> bool:
        """Receive one batch and run the handler on it; False if the queue had nothing."""
        response = self.source.receive_message(
            QueueUrl=self.args.queue_url,
            MaxNumberOfMessages=1,
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=["All"],
        )
        messages = response.get("Messages", [])
        if not messages:
            return False
        task_id = task_of(messages[0]["Body"])
        budget = tasks.invocation_budget(task_id, self.args.budget)
        context = LocalLambdaContext(budget)
        invocation = context.aws_request_id
        for message in messages:
            attributes = message.get("Attributes", {})
            self.events.write(
                "receive",
                body=message["Body"],
                mid=message["MessageId"],
                count=int(attributes.get("ApproximateReceiveCount", "1")),
                task_id=task_of(message["Body"]),
                inv=invocation,
            )
        event = {
            "Records": [event_record(as_queue_message(m), self.args.queue_arn) for m in messages]
        }
        tasks.set_invocation(invocation, time.time() + budget)
        self.injector.begin(invocation, task_id)
        # Lambda kills an invocation at its deadline: no finally, no atexit.
        watchdog = threading.Timer(budget, self.injector.die, args=("deadline",))
        watchdog.daemon = True
        started = time.monotonic()
        watchdog.start()
        try:
            app = self.older if self.older and rollback.runs_older(task_id) else self.app
            result = app.handler(event, context)
        finally:
            watchdog.cancel()
        seconds = time.monotonic() - started
        failed = {item["itemIdentifier"] for item in result.get("batchItemFailures", [])}
        self.invocations += 1
        self.events.write(
            "invoked",
            task_id=task_id,
            inv=invocation,
            seconds=seconds,
            failed=len(failed),
            warm=self.invocations > 1,
        )
        self.injector.reach("before_ack")
        for message in messages:
            if message["MessageId"] in failed:
                continue
            # If the delete fails, the message comes back after its visibility timeout.
            with contextlib.suppress(ClientError):
                self.source.delete_message(
                    QueueUrl=self.args.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return True


def kill_spec(text: str) -> tuple[str, int]:
    """``POINT:N`` (a kill point of ``chaos.faults.KILL_POINTS`` and an occurrence)."""
    point, _, at = text.partition(":")
    if point not in KILL_POINTS or not at.isdigit() or int(at) < 1:
        raise argparse.ArgumentTypeError(f"expected POINT:N with POINT in {sorted(KILL_POINTS)}")
    return point, int(at)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m chaos.worker", description=__doc__)
    parser.add_argument("--endpoint", required=True, help="the moto server's URL")
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--queue-url", required=True)
    parser.add_argument("--queue-arn", required=True)
    parser.add_argument("--run-dir", required=True, help="where events.jsonl lives")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per invocation")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault dice")
    parser.add_argument(
        "--kill",
        type=kill_spec,
        action="append",
        default=[],
        metavar="POINT:N",
        help="die at the N-th occurrence of POINT (repeat to arm several; the first wins)",
    )
    parser.add_argument(
        "--retire-after", type=int, default=0, help="exit after this many invocations (0: never)"
    )
    parser.add_argument("--faults", default="{}", help="JSON: fault kind -> probability")
    parser.add_argument("--visibility-margin", type=int, default=1)
    parser.add_argument(
        "--older-until",
        type=float,
        default=0.0,
        help="run the older release (chaos.rollback) until this epoch time, then exit",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    Environment(parse_args(argv)).run()


if __name__ == "__main__":
    main()
