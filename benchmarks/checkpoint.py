"""Checkpoint: what saving and loading a 5 MB agent conversation costs, segmented or whole.

The state is an agent's conversation as model APIs write it: messages whose ``content`` is a
list of blocks (assistant text and tool calls, tool results), of seeded pseudo-English (a
Zipf-like vocabulary, so gzip meets text it can compress about as well as real chat text).
Each turn appends an assistant message with a tool call and the tool's result.

Two stores side by side, on one ``ThreadedMotoServer`` in a process of its own (S3 over HTTP
on loopback, as a Lambda talks to S3), in one run: **segmented** (the default: the state's
large lists are cut into content-addressed segments) and **whole**
(``segmenting=None``: the state is one gzip blob, as before segments).

Size and time, through ``BlobRecords``, medians of interleaved repeats: bytes uploaded (the sum of
the PUT bodies) and seconds of the first save (the whole history is new) and of a save after
one more turn (what a checkpoint costs; target: at most 64 KB uploaded), of a save with the
state unchanged (what a claim costs), and of a load by a fresh store (GET the record, then its
blobs in parallel; gunzip, verify, parse). Target: at most 64 KB uploaded per turn.

Memory: the peak resident set (``ru_maxrss``) of a whole worker invocation that loads the
state, takes one turn that appends a message (one step) and suspends (saves and sends). It runs
in a fresh child process against the moto server, so the child's memory is the worker's
alone. The child also reports its peak before the invocation (interpreter,
libraries, clients). Target: at most 160 MB, so that it runs in a 256 MB Lambda.
"""

from __future__ import annotations

import json
import random
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
from pydantic import BaseModel

from benchmarks import ScriptedContext, check, emit, median
from continuum import Continuum, TaskContext
from continuum._base.json_values import copy_json
from continuum._record.blob_records import BlobRecords
from continuum._record.model import TaskRecord
from continuum._record.segments import DEFAULT_SEGMENTING, Segmenting
from continuum.backends.s3 import S3RecordStore
from continuum.backends.store import RecordStore

TARGET_BYTES = 5 * 1024 * 1024
REGION = "us-east-1"
BUCKET = "continuum-local"
ROOT = Path(__file__).resolve().parent.parent
#: The stores compared: name -> how the state is segmented (None: one blob).
MODES: dict[str, Segmenting | None] = {"segmented": DEFAULT_SEGMENTING, "whole": None}


class Message(BaseModel):
    role: str
    content: list[dict[str, Any]]


class Chat(BaseModel):
    topic: str
    messages: list[Message] = []


class Words:
    """Seeded pseudo-English: a Zipf-like vocabulary of 5,000 words."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        letters = "etaoinshrdlucmfwypvbgkjqxz"
        self.vocabulary = [
            "".join(self.rng.choices(letters, weights=range(26, 0, -1), k=self.rng.randint(2, 9)))
            for _ in range(5000)
        ]
        self.weights = [1 / (rank + 1) for rank in range(len(self.vocabulary))]

    def text(self, least: int, most: int) -> str:
        words = self.rng.choices(self.vocabulary, self.weights, k=self.rng.randint(least, most))
        return " ".join(words).capitalize() + "."


def agent_turn(words: Words, n: int) -> list[dict[str, Any]]:
    """One turn: the assistant's text and tool call, then the tool's result (~3 KB)."""
    call_id = f"toolu_{n:06d}"
    call = {
        "type": "tool_use",
        "id": call_id,
        "name": "search",
        "input": {"query": words.text(3, 8)},
    }
    return [
        {"role": "assistant", "content": [{"type": "text", "text": words.text(30, 150)}, call]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": words.text(150, 450)}
            ],
        },
    ]


def conversation(target_bytes: int, seed: int = 5) -> dict[str, Any]:
    """A Chat state whose JSON is about ``target_bytes`` long."""
    words = Words(seed)
    messages: list[dict[str, Any]] = []
    size = 0
    while size < target_bytes:
        turn = agent_turn(words, len(messages))
        messages.extend(turn)
        size += len(json.dumps(turn))
    return {"topic": "tides", "messages": messages}


def build_app(**options: Any) -> tuple[Continuum, list[int]]:
    """The app, and a count of the live steps it has run."""
    app = Continuum(**options)
    executed = [0]
    words = Words(seed=6)

    @app.step
    def reply(n: int) -> list[dict[str, Any]]:
        executed[0] += 1
        return agent_turn(words, n)

    @app.task(state=Chat)
    def chat(ctx: TaskContext[Chat]) -> str | None:
        for message in reply(len(ctx.state.messages)):
            ctx.state.messages.append(Message(**message))
        return None  # never finishes: each invocation takes a turn and suspends

    return app, executed


# -- the moto server --------------------------------------------------------------------------

#: Runs a ThreadedMotoServer in its own process, as S3 is: in this process, the server's
#: threads would compete with the loader's parallel GETs for one GIL.
SERVER = """
import logging, sys
from moto.server import ThreadedMotoServer
logging.getLogger("werkzeug").setLevel(logging.ERROR)
server = ThreadedMotoServer(ip_address="127.0.0.1", port={port}, verbose=False)
server.start()
print("ready", flush=True)
sys.stdin.read()
server.stop()
"""


@contextmanager
def moto_server() -> Iterator[str]:
    """A ThreadedMotoServer in a child process on a free loopback port; yields its endpoint."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [sys.executable, "-c", SERVER.format(port=port)]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as server:
        assert server.stdout is not None
        assert server.stdin is not None
        assert server.stdout.readline().strip() == "ready"
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.stdin.close()
            server.wait(timeout=30)


class CountingStore:
    """A record store that adds up the bytes of the bodies it PUTs."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.put_bytes = 0

    def put(self, key: str, body: bytes, **options: Any) -> str:
        self.put_bytes += len(body)
        return self.store.put(key, body, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


# -- size and time ----------------------------------------------------------------------------


class Side:
    """One store of the comparison: its records, the task's record and what was measured."""

    def __init__(self, store: CountingStore, mode: str, state: dict[str, Any]) -> None:
        self.store, self.mode = store, mode
        self.records = BlobRecords(store, prefix=mode, segmenting=MODES[mode])
        self.record = TaskRecord(task_id="chat-1", task_name="chat", state=copy_json(state))
        self.figures: dict[str, list[float]] = {}
        self.etag = self.measure("first_save", lambda: self.records.create(self.record))

    def measure(self, name: str, action: Any) -> Any:
        """Run ``action``; note its seconds and the bytes it uploaded; return its value."""
        self.store.put_bytes = 0
        started = time.perf_counter()
        value = action()
        self.figures.setdefault(name, []).append(time.perf_counter() - started)
        self.figures.setdefault(f"{name}_upload", []).append(self.store.put_bytes)
        return value

    def turn(self, messages: list[dict[str, Any]]) -> None:
        """One more turn: save it; save again unchanged (a claim); load it in a fresh store."""
        self.record.state["messages"].extend(copy_json(messages))
        self.etag = self.measure("turn_save", self.save)
        self.etag = self.measure("unchanged_save", self.save)
        fresh = BlobRecords(self.store, prefix=self.mode)
        loaded, _ = self.measure("load", lambda: fresh.load("chat-1"))
        check(loaded.state == self.record.state, f"{self.mode}: a fresh store loaded another state")
        check(self.figures["turn_save_upload"][-1] > 0, f"{self.mode}: a turn's save uploaded 0 B")

    def save(self) -> str:
        return self.records.swap(self.record, revision=self.etag)

    def report(self, s3: Any) -> None:
        got, mode = self.figures, self.mode
        key = self.records.record_key("chat-1")
        body = s3.get_object(Bucket="ckpt", Key=key)["Body"].read()
        segments = sum(len(listed["segments"]) for listed in json.loads(body)["state_segments"])
        check(
            (segments > 0) == (MODES[mode] is not None),
            f"the {mode} store's record lists {segments} state segments",
        )
        emit(f"checkpoint.{mode}.first_save_upload", median(got["first_save_upload"]), "B")
        emit(f"checkpoint.{mode}.first_save", median(got["first_save"]), "s")
        emit(
            f"checkpoint.{mode}.turn_upload", median(got["turn_save_upload"]), "B (target <= 65536)"
        )
        emit(f"checkpoint.{mode}.turn_upload_max", max(got["turn_save_upload"]), "B")
        emit(f"checkpoint.{mode}.turn_save", median(got["turn_save"]), "s")
        emit(f"checkpoint.{mode}.unchanged_upload", median(got["unchanged_save_upload"]), "B")
        emit(f"checkpoint.{mode}.unchanged_save", median(got["unchanged_save"]), "s (a claim)")
        emit(f"checkpoint.{mode}.load", median(got["load"]), "s")
        emit(f"checkpoint.{mode}.record_object", len(body), "B")
        emit(f"checkpoint.{mode}.segments", segments)


def size_and_time(endpoint: str, state: dict[str, Any], repeats: int) -> None:
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
    s3.create_bucket(Bucket="ckpt")
    s3.put_bucket_versioning(Bucket="ckpt", VersioningConfiguration={"Status": "Enabled"})
    store = CountingStore(S3RecordStore(s3, "ckpt"))
    sides = [Side(store, mode, state) for mode in MODES]
    words = Words(seed=7)
    for i in range(repeats):
        turn = agent_turn(words, i)
        for side in sides if i % 2 == 0 else reversed(sides):
            side.turn(turn)
    for side in sides:
        made = len(side.figures["turn_save"])
        check(made == repeats, f"{side.mode}: {made} turns measured of {repeats}")
        side.report(s3)
    segmented, whole = (median(side.figures["turn_save_upload"]) for side in sides)
    emit("checkpoint.turn_upload_whole_over_segmented", whole / segmented, "x")


# -- memory: a worker invocation in a fresh process --------------------------------------------


def child(endpoint: str, queue_url: str, segmented: bool) -> None:
    """Run one worker invocation on the waiting message; print peak RSS (KiB) as JSON."""
    options = {"region_name": REGION, "endpoint_url": endpoint}
    app, executed = build_app()
    s3, sqs = boto3.client("s3", **options), boto3.client("sqs", **options)
    app.configure(bucket=BUCKET, queue_url=queue_url, s3_client=s3, sqs_client=sqs)
    app.records.segmenting = DEFAULT_SEGMENTING if segmented else None
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


def invocation_memory(endpoint: str, state: dict[str, Any], runs: int) -> None:
    from continuum._local.runtime import LocalRuntime

    for mode, segmenting in MODES.items():
        peaks, befores, hwms, seconds = [], [], [], []
        for run in range(runs):
            app, _ = build_app()
            runtime = LocalRuntime(app, budget_s=900, endpoint_url=endpoint)
            app.records.segmenting = segmenting
            drain(runtime.sqs, runtime.queue_url)  # the last run's continuation
            task_id = app.client().start("chat", state, task_id=f"mem-{mode}-{run}")
            args = f"{endpoint!r}, {runtime.queue_url!r}, {segmenting is not None}"
            argv = [sys.executable, "-c", BOOTSTRAP.format(args=args)]
            out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
            report = json.loads(out.stdout.strip().splitlines()[-1])
            check(report["batchItemFailures"] == [], f"the invocation failed: {report}")
            # The child's invocation took the turn (one step, two messages) and suspended.
            record = runtime.record(task_id)
            check(
                record.generation == 1
                and len(record.state["messages"]) == len(state["messages"]) + 2
                and bool(record.state_segments) == (segmenting is not None),
                f"{mode}: after the invocation, generation {record.generation} and "
                f"{len(record.state['messages'])} messages (of {len(state['messages'])} + 2)",
            )
            check(
                report["peak_kib"] >= report["before_kib"] > 0,
                f"{mode}: peak RSS {report['peak_kib']} KiB, before {report['before_kib']} KiB",
            )
            peaks.append(report["peak_kib"] / 1024)
            befores.append(report["before_kib"] / 1024)
            hwms.append(report["hwm_kib"] / 1024)
            seconds.append(report["seconds"])
        emit(f"checkpoint.invocation.{mode}.peak_rss", median(peaks), "MiB (target <= 160)")
        emit(f"checkpoint.invocation.{mode}.peak_rss_max", max(peaks), "MiB")
        emit(f"checkpoint.invocation.{mode}.peak_vm_hwm", median(hwms), "MiB (cross-check)")
        emit(f"checkpoint.invocation.{mode}.rss_before_message", median(befores), "MiB")
        emit(f"checkpoint.invocation.{mode}.seconds", median(seconds), "s (moto server)")


def main(quick: bool = False) -> None:
    state = conversation(TARGET_BYTES // 10 if quick else TARGET_BYTES)
    emit("checkpoint.state_json", len(json.dumps(state, separators=(",", ":"))), "B")
    emit("checkpoint.messages", len(state["messages"]))
    with moto_server() as endpoint:
        size_and_time(endpoint, state, 3 if quick else 15)
        invocation_memory(endpoint, state, 1 if quick else 3)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
