"""Checkpoint: size, time and memory of an agent state holding a 5 MB conversation.

The state is a pydantic model with a list of messages of seeded pseudo-English (a Zipf-like
vocabulary, so gzip meets text it can compress about as well as real chat text).

Size and time, through ``RecordStore`` on in-process moto: stored bytes, seconds to save
(``replace`` of a changed state: JSON, gzip and SHA-256 of the blob, two PUTs), to save again
unchanged (what a claim or a periodic save costs: the blob is known, only the record is put)
and to load (a fresh store: GET the record and the blob, gunzip, verify, parse), medians of
interleaved repeats, for the default store (the state goes to a gzip blob) against one whose
inline limit is so large that the state stays uncompressed inside the record.

Memory: the peak resident set (``ru_maxrss``) of a whole worker invocation that loads the
state, takes one turn that appends a message (one step) and suspends (saves and sends). It runs
in a fresh child process against a ``ThreadedMotoServer`` in this process, so the child's
memory is the worker's alone: in-process moto would hold every stored object in the same
process. The child also reports its peak before the invocation (interpreter, libraries, clients).
Target: at most 160 MB, so that it runs in a 256 MB Lambda.
"""

from __future__ import annotations

import json
import logging
import random
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
from pydantic import BaseModel

from benchmarks import ScriptedContext, emit, median
from continuum import Continuum, TaskContext
from continuum.record import TaskRecord
from continuum.records import Records
from continuum.s3 import S3RecordStore

TARGET_BYTES = 5 * 1024 * 1024
REGION = "us-east-1"
BIG = 1 << 40  # an inline limit no state reaches
ROOT = Path(__file__).resolve().parent.parent


class Message(BaseModel):
    role: str
    content: str


class Chat(BaseModel):
    topic: str
    messages: list[Message] = []


def conversation(target_bytes: int, seed: int = 5) -> dict[str, Any]:
    """A Chat state whose JSON is about ``target_bytes`` long."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    vocabulary = [
        "".join(rng.choices(letters, weights=range(26, 0, -1), k=rng.randint(2, 9)))
        for _ in range(5000)
    ]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    messages, size = [], 0
    while size < target_bytes:
        words = rng.choices(vocabulary, weights=weights, k=rng.randint(150, 450))
        content = " ".join(words).capitalize() + "."
        messages.append({"role": "user" if len(messages) % 2 else "assistant", "content": content})
        size += len(content) + 40
    return {"topic": "tides", "messages": messages}


def build_app(**options: Any) -> tuple[Continuum, list[int]]:
    """The app, and a count of the live steps it has run."""
    app = Continuum(**options)
    executed = [0]

    @app.step
    def reply(n: int) -> str:
        executed[0] += 1
        return f"Reply {n}: the tide turns twice a day."

    @app.task(state=Chat)
    def chat(ctx: TaskContext[Chat]) -> str | None:
        text = reply(len(ctx.state.messages))
        ctx.state.messages.append(Message(role="assistant", content=text))
        return None  # never finishes: each invocation takes a turn and suspends

    return app, executed


# -- size and time ----------------------------------------------------------------------------


def size_and_time(state: dict[str, Any], repeats: int) -> None:
    from continuum.local import moto_backend

    with moto_backend():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="ckpt")
        s3.put_bucket_versioning(Bucket="ckpt", VersioningConfiguration={"Status": "Enabled"})
        bucket = S3RecordStore(s3, "ckpt")
        modes = {"compressed": Records(bucket, prefix="gz")}
        modes["uncompressed"] = Records(bucket, prefix="raw", inline_limit=BIG)
        records, etags = {}, {}
        saves: dict[str, list[float]] = {m: [] for m in modes}
        same: dict[str, list[float]] = {m: [] for m in modes}  # a claim: the state unchanged
        loads: dict[str, list[float]] = {m: [] for m in modes}
        for mode, store in modes.items():
            records[mode] = TaskRecord(task_id="chat-1", task_name="chat", state=state)
            etags[mode] = store.create(records[mode])
        for i in range(repeats):
            for mode, store in modes.items() if i % 2 == 0 else reversed(modes.items()):
                record = records[mode]
                record.state["messages"].append({"role": "user", "content": f"more {i}"})
                started = time.perf_counter()
                etags[mode] = store.replace(record, etag=etags[mode])
                saves[mode].append(time.perf_counter() - started)
                fresh = Records(bucket, prefix=store.prefix, inline_limit=store.inline_limit)
                started = time.perf_counter()
                loaded, _ = fresh.load("chat-1")
                loads[mode].append(time.perf_counter() - started)
                assert loaded.state == record.state
                started = time.perf_counter()
                etags[mode] = store.replace(record, etag=etags[mode])
                same[mode].append(time.perf_counter() - started)
        sizes = {}
        for mode, store in modes.items():
            body = s3.get_object(Bucket="ckpt", Key=store.record_key("chat-1"))["Body"].read()
            ref = json.loads(body)["state_ref"]
            sizes[mode] = len(body) + (ref["stored"] if ref else 0)
            emit(f"checkpoint.{mode}.record_object", len(body), "B")
            emit(f"checkpoint.{mode}.one_checkpoint", sizes[mode], "B (record + its blob)")
            emit(f"checkpoint.{mode}.save", median(saves[mode]), "s")
            emit(f"checkpoint.{mode}.save_unchanged_state", median(same[mode]), "s (e.g. a claim)")
            emit(f"checkpoint.{mode}.load", median(loads[mode]), "s")
        emit("checkpoint.compression_ratio", sizes["uncompressed"] / sizes["compressed"], "x")
        # Each save of a changed state writes a new content-addressed blob; the old ones stay.
        blobs = s3.list_objects_v2(Bucket="ckpt", Prefix="gz/chat-1/blobs/")["Contents"]
        emit(
            "checkpoint.compressed.blobs_left_after_saves",
            len(blobs),
            f"after {repeats + 1} states",
        )
        emit("checkpoint.compressed.blob_bytes_left", sum(b["Size"] for b in blobs), "B")


# -- memory: a worker invocation in a fresh process --------------------------------------------


def child(endpoint: str, queue_url: str, inline_limit: int) -> None:
    """Run one worker invocation on the waiting message; print peak RSS (KiB) as JSON."""
    options = {"region_name": REGION, "endpoint_url": endpoint}
    app, executed = build_app(inline_limit_bytes=inline_limit)
    s3, sqs = boto3.client("s3", **options), boto3.client("sqs", **options)
    app.configure(bucket="continuum-local", queue_url=queue_url, s3_client=s3, sqs_client=sqs)
    from benchmarks import silence_worker_logs

    silence_worker_logs()
    message = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1)["Messages"][0]
    event = {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "awsRegion": REGION,
            }
        ]
    }
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = app.handler(event, ScriptedContext(1, lambda: executed[0]))
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    report = {"before_kib": before, "peak_kib": peak, "hwm_kib": vm_hwm_kib(), "seconds": seconds}
    print(json.dumps({**report, **result}))


#: ``ru_maxrss`` survives ``exec``: a process started from this one (fork or vfork, then exec)
#: reports at least this process's peak, moto server and all. So the fresh interpreter forks
#: at once, before importing anything, and the invocation runs in the grandchild, whose peak
#: is its own. (``VmHWM`` in /proc, reset by exec, is printed beside it as a cross-check.)
BOOTSTRAP = """
import os, sys
pid = os.fork()
if pid == 0:
    try:
        from benchmarks.checkpoint import child
        child({args})
    finally:
        sys.stdout.flush()
        os._exit(0)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def vm_hwm_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))


def drain(sqs: Any, queue_url: str) -> None:
    while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
        "Messages"
    ):
        for message in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def invocation_memory(state: dict[str, Any], runs: int) -> None:
    from moto.server import ThreadedMotoServer

    from continuum.local import LocalRuntime

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the server's request log
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for label, inline_limit in (("compressed", 32 * 1024), ("uncompressed", BIG)):
            peaks, befores, hwms, seconds = [], [], [], []
            for run in range(runs):
                app, _ = build_app(inline_limit_bytes=inline_limit)
                runtime = LocalRuntime(app, budget_s=900, endpoint_url=endpoint)
                drain(runtime.sqs, runtime.queue_url)  # the last run's continuation
                task_id = app.client().start("chat", state, task_id=f"mem-{label}-{run}")
                args = f"{endpoint!r}, {runtime.queue_url!r}, {inline_limit}"
                argv = [sys.executable, "-c", BOOTSTRAP.format(args=args)]
                out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
                report = json.loads(out.stdout.strip().splitlines()[-1])
                assert report["batchItemFailures"] == [], report
                record = runtime.record(task_id)
                assert record.generation == 1, record
                assert len(record.state["messages"]) == len(state["messages"]) + 1
                peaks.append(report["peak_kib"] / 1024)
                befores.append(report["before_kib"] / 1024)
                hwms.append(report["hwm_kib"] / 1024)
                seconds.append(report["seconds"])
            emit(f"checkpoint.invocation.{label}.peak_rss", median(peaks), "MiB (target <= 160)")
            emit(f"checkpoint.invocation.{label}.peak_rss_max", max(peaks), "MiB")
            emit(f"checkpoint.invocation.{label}.peak_vm_hwm", median(hwms), "MiB (cross-check)")
            emit(f"checkpoint.invocation.{label}.rss_before_message", median(befores), "MiB")
            emit(f"checkpoint.invocation.{label}.seconds", median(seconds), "s (moto server)")
    finally:
        server.stop()


def main(quick: bool = False) -> None:
    state = conversation(TARGET_BYTES // 10 if quick else TARGET_BYTES)
    emit("checkpoint.state_json", len(json.dumps(state, separators=(",", ":"))), "B")
    emit("checkpoint.messages", len(state["messages"]))
    size_and_time(state, 2 if quick else 5)
    invocation_memory(state, 1 if quick else 3)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
