"""Local end to end: continuations per second through the local runtime, against plain boto3.

continuum: the one-step-per-turn task of ``aws_calls_per_continuation`` driven by
``LocalRuntime.invoke_once`` (receive, build the SQS event, ``app.handler`` with Powertools'
batch processor and logger, delete) until its queue is empty; every invocation suspends after
one step, so each is one continuation.

Plain boto3: the same S3 and SQS calls, no framework, on the same in-process moto: receive the
message, GET the record and parse it, PUT it back with ``If-Match`` (the claim), change the
message's visibility, PUT with ``If-Match`` again (the suspension), send the next message,
delete the received one. Its record is continuum's own stored record, so the bytes moved are
the same. Each repeat runs both in a fresh moto, in alternating order; medians of the repeats.
Target: continuum within 1.3x of plain boto3.
"""

from __future__ import annotations

import json
import sys
import time

import boto3

from benchmarks import check, emit, median, silence_worker_logs
from benchmarks.aws_calls_per_continuation import build, drive
from continuum import Status
from continuum._local.runtime import BUCKET, LocalRuntime, moto_backend

REGION = "us-east-1"


def time_continuum(turns: int) -> tuple[float, int, bytes]:
    """Seconds per continuation, the continuations, and the final stored record."""
    app, executed = build(turns)
    runtime = LocalRuntime(app, budget_s=900)
    task_id = app.client().start("tally", {}, task_id="e2e-1")
    started = time.perf_counter()
    drive(runtime, executed)
    elapsed = time.perf_counter() - started
    record = runtime.record(task_id)
    body = runtime.s3.get_object(Bucket=BUCKET, Key=app.records.record_key(task_id))
    continuations = record.counters.continuations
    check(
        record.status == Status.SUCCEEDED and continuations == turns - 1 and executed[0] == turns,
        f"the task ended {record.status} after {continuations} continuations and "
        f"{executed[0]} live steps ({turns} one-step turns)",
    )
    return elapsed / continuations, continuations, body["Body"].read()


def time_plain(continuations: int, record_body: bytes) -> float:
    """Seconds per continuation of the same calls made directly with boto3."""
    s3 = boto3.client("s3", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    bucket, key = "plain", "tasks/plain-1/record.json"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    queue_url = sqs.create_queue(QueueName="plain", Attributes={"VisibilityTimeout": "5400"})[
        "QueueUrl"
    ]
    s3.put_object(Bucket=bucket, Key=key, Body=record_body, IfNoneMatch="*")
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps({"task_id": "plain-1", "g": 0}))
    started = time.perf_counter()
    generation = 0
    for generation in range(1, continuations + 1):
        messages = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=1, MessageSystemAttributeNames=["All"]
        )["Messages"]
        json.loads(messages[0]["Body"])
        got = s3.get_object(Bucket=bucket, Key=key)
        record = json.loads(got["Body"].read())
        record["status"] = "running"
        claimed = s3.put_object(
            Bucket=bucket, Key=key, Body=json.dumps(record, indent=1).encode(), IfMatch=got["ETag"]
        )
        sqs.change_message_visibility(
            QueueUrl=queue_url, ReceiptHandle=messages[0]["ReceiptHandle"], VisibilityTimeout=905
        )
        record["status"], record["generation"] = "suspended", generation
        s3.put_object(
            Bucket=bucket,
            Key=key,
            Body=json.dumps(record, indent=1).encode(),
            IfMatch=claimed["ETag"],
        )
        body = json.dumps({"task_id": "plain-1", "generation": generation})
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=messages[0]["ReceiptHandle"])
    elapsed = time.perf_counter() - started
    stored = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    check(
        stored["generation"] == generation == continuations,
        f"the plain loop stored generation {stored['generation']}, of {continuations}",
    )
    return elapsed / continuations


def main(quick: bool = False) -> None:
    turns, repeats = (6, 2) if quick else (61, 9)
    silence_worker_logs()
    with moto_backend():  # warm up both, and learn the record the plain loop will move
        _, continuations, body = time_continuum(turns)
        time_plain(continuations, body)
    ours, plain = [], []
    for repeat in range(repeats):
        for which in ("continuum", "plain") if repeat % 2 == 0 else ("plain", "continuum"):
            with moto_backend():
                if which == "continuum":
                    ours.append(time_continuum(turns)[0])
                else:
                    plain.append(time_plain(continuations, body))
    # Side by side: every repeat measured both, the same number of continuations each.
    check(
        len(ours) == len(plain) == repeats and min(ours) > 0 and min(plain) > 0,
        f"{len(ours)} continuum and {len(plain)} plain runs of {repeats}",
    )
    emit("local_e2e.continuations_per_run", continuations)
    emit("local_e2e.record_bytes", len(body), "B")
    emit("local_e2e.continuum", 1 / median(ours), "continuations/s")
    emit("local_e2e.plain_boto3", 1 / median(plain), "continuations/s")
    emit("local_e2e.ratio", median(ours) / median(plain), "x plain boto3 (target <= 1.3)")
    paired = [o / p for o, p in zip(ours, plain, strict=True)]
    emit("local_e2e.ratio_median_of_pairs", median(paired), "x")
    emit("local_e2e.ratio_range_of_pairs", f"{min(paired):.3f}-{max(paired):.3f}", "x")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
