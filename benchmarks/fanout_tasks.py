"""Fan-out and fan-in of child tasks: ``ctx.map_tasks`` over N trivial children on a moto server.

A ThreadedMotoServer in this process (the bucket versioned, PutObject made atomic as in
``chaos.server``, DeleteMessage made safe against a concurrent send) and ``WORKERS`` worker
processes (``benchmarks.fanout_worker``: the ``continuum worker`` loop, ``SLOTS`` messages at
a time each, a 60 s budget). A parent task ``map_tasks`` N children of one trivial step with
``max_concurrency=50`` and returns the sum of their results. Measured, for N = 100 and
N = 1000 (``--quick``: N = 10 and 20, 2 workers, ``max_concurrency=5``):

- **wall**: from ``client.start`` of the parent to its record saying ``succeeded``.
- **parent record writes**: the versions of ``tasks/<parent>/record.json`` in the bucket (its
  create included), and the PutObject calls on that key the workers made (the same, less the
  create). Target: they do not grow with N.
- **parent invocations**: ``record.counters.invocations``; and the parent's messages by outcome
  (a child's wake that its batch cannot yet decide on is ``wake-ignored``: after one LIST, or
  with none if the child had a successor, whose report comes later).
- **calls per child for its report** (target: at most 3 S3 calls and 2 SQS sends): the child's
  report PutObject, its wake SendMessage and its successor-start SendMessage (counted in the
  child's own messages), plus every call made while a worker handled that child's wake to the
  parent (the message names the child in its reason): the LIST of the parent's inbox (only
  the wakes of the last ``max_concurrency`` children, which have no successor), and any GET
  of the parent's record. The wake that completes the batch runs the parent's last
  invocation, so the max includes it; the median is one child's cost. Besides: the parent's
  own per-child calls (creating each child's record, reading each report once at the end),
  amortized over N, and each child's whole life (its record's reads and writes too).

Calls are tallied in the workers by botocore hooks on the app's clients, per message (see
``benchmarks.fanout_worker``); the event source's ReceiveMessage and DeleteMessage are not the
app's and are not counted.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import boto3
from pydantic import BaseModel

from benchmarks import check, emit
from continuum import Continuum, Status, TaskContext
from continuum._local.dev_stack import faithful_moto

ROOT = Path(__file__).resolve().parents[1]
WORKERS = 4
SLOTS = 4
MAX_CONCURRENCY = 50
BUDGET_S = 60.0
#: Give up on a run after this long (wall time).
TIMEOUT_S = 600.0

app = Continuum()


class Fan(BaseModel):
    n: int
    max_concurrency: int = MAX_CONCURRENCY


class Leaf(BaseModel):
    i: int


@app.step
def double(i: int) -> int:
    return 2 * i


@app.task(state=Leaf)
def leaf(ctx: TaskContext[Leaf]) -> int:
    return int(double(ctx.state.i))


@app.task(state=Fan)
def fan(ctx: TaskContext[Fan]) -> int:
    inputs = [{"i": i} for i in range(ctx.state.n)]
    batch = ctx.map_tasks("leaf", inputs, max_concurrency=ctx.state.max_concurrency)
    return sum(batch.values())


# -- one run -------------------------------------------------------------------------------------


def run(
    n: int, *, workers: int = WORKERS, slots: int = SLOTS, max_concurrency: int = MAX_CONCURRENCY
) -> dict[str, Any]:
    """Run the fan-out of ``n`` children on a fresh moto server; what was measured."""
    from chaos.server import MotoServer, client_options, create_resources

    parent = f"fan-{n}"
    faithful_moto()
    with MotoServer() as server, tempfile.TemporaryDirectory() as tmp:
        resources = create_resources(
            server.endpoint, visibility_timeout_s=int(6 * BUDGET_S), max_receive_count=10
        )
        options = client_options(server.endpoint)
        s3, sqs = boto3.client("s3", **options), boto3.client("sqs", **options)
        app.configure(
            bucket=resources.bucket, queue_url=resources.queue_url, s3_client=s3, sqs_client=sqs
        )
        procs = [_start_worker(resources, parent, slots, Path(tmp) / f"tally-{i}.jsonl")
                 for i in range(workers)]  # fmt: skip
        try:
            client = app.client()
            started = time.monotonic()
            client.start("fan", {"n": n, "max_concurrency": max_concurrency}, task_id=parent)
            # Polled by reading the record alone: client.status also LISTs the parent's inbox
            # (to count its children), which would add a LIST of up to N keys per poll.
            while not app.records.load(parent)[0].status.finished:
                if time.monotonic() - started > TIMEOUT_S:
                    raise RuntimeError(f"the parent did not finish in {TIMEOUT_S:.0f}s")
                time.sleep(0.2)
            wall = time.monotonic() - started
            status = client.status(parent)
            # The winning wake goes on after the finish write (the sweep tags every report),
            # and duplicate or late wakes may still be in flight: let them be handled and
            # tallied before the workers stop.
            _drain(sqs, resources.queue_url, Path(tmp), parent)
        finally:
            _stop(procs)
        check(status.status == Status.SUCCEEDED, f"the parent ended {status.status}")
        check(status.result == n * (n - 1), f"the parent summed its children to {status.result}")
        versions = s3.list_object_versions(
            Bucket=resources.bucket, Prefix=f"tasks/{parent}/record.json"
        )
        record_versions = len(versions.get("Versions", []))
        lines = [
            json.loads(line)
            for path in sorted(Path(tmp).glob("tally-*.jsonl"))
            for line in path.read_text().splitlines()
        ]
    out = analyse(lines, parent, n)
    # Every write of the parent's record that made a version was tallied (the create is the
    # client's, not a worker's).
    check(
        out["record_puts"] == record_versions - 1,
        f"{out['record_puts']} PutObject calls on the parent's record tallied, "
        f"{record_versions} versions of it stored",
    )
    out.update(
        wall=wall,
        invocations=status.counters.invocations,
        record_versions=record_versions,
    )
    return out


def _start_worker(resources: Any, parent: str, slots: int, tally: Path) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "benchmarks.fanout_worker",
        "--endpoint", resources.endpoint, "--bucket", resources.bucket,
        "--queue-url", resources.queue_url, "--queue-arn", resources.queue_arn,
        "--parent", parent, "--slots", str(slots), "--budget", str(BUDGET_S),
        "--tally", str(tally),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CONTINUUM_SIGNING_KEY", None)
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise RuntimeError("a worker did not start")
    return proc


def _drain(sqs: Any, queue_url: str, tallies: Path, parent: str, timeout_s: float = 60) -> None:
    """Wait until the message that finished the parent is tallied and no message is visible
    (twice in a row, half a second apart), or ``timeout_s``. A wake handed back while the
    parent ran stays invisible until its lease ends: not waited for."""
    deadline, quiet = time.monotonic() + timeout_s, 0
    while quiet < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
        got = sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        idle = int(got.get("ApproximateNumberOfMessages", 0)) == 0
        quiet = quiet + 1 if idle and _finisher_tallied(tallies, parent) else 0


def _finisher_tallied(tallies: Path, parent: str) -> bool:
    for path in tallies.glob("tally-*.jsonl"):
        for line in path.read_text().splitlines():
            message = json.loads(line)
            if message["task"] == parent and message["outcome"] == "succeeded":
                return True
    return False


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- attributing the calls -----------------------------------------------------------------------


REPORT_PUT = "s3:PutObject:parent/inbox/children/*"
WAKE_SEND = "sqs:SendMessage:parent.wake"
SUCCESSOR_SEND = "sqs:SendMessage:child.start"


def analyse(lines: list[dict[str, Any]], parent: str, n: int) -> dict[str, Any]:
    """Per-child and parent figures from the workers' tallies (one line per message)."""
    by_child: dict[str, list[str]] = defaultdict(list)  # each child's own messages' calls
    wakes: dict[str, list[str]] = defaultdict(list)  # the calls of each child's wake(s)
    parent_calls: Counter[str] = Counter()  # the parent's messages, its pool threads
    outcomes: Counter[str] = Counter()
    wake_messages: Counter[str] = Counter()
    wake_listed: Counter[str] = Counter()  # keys the LISTs of each child's wake(s) returned
    for line in lines:
        task, calls = line["task"], line["calls"]
        if task is None or task == parent:
            parent_calls.update(calls)
        if task == parent:
            outcomes[f"{line['kind']}.{line['outcome']}"] += 1
            reason = str(line.get("reason") or "")
            if line["kind"] == "wake" and reason.startswith("child "):
                wakes[reason.split(" ")[1]].extend(calls)
                wake_messages[reason.split(" ")[1]] += 1
                wake_listed[reason.split(" ")[1]] += line.get("listed", 0)
        elif task is not None:
            by_child[task].extend(calls)
    children = sorted(by_child)
    check(len(children) == n, f"calls tallied for {len(children)} children of {n}")
    check(
        any(outcome.endswith(".succeeded") for outcome in outcomes),
        f"the message that finished the parent was not tallied: {dict(outcomes)}",
    )
    report_s3, report_sqs, life_s3, life_sqs = [], [], [], []
    parts: dict[str, list[int]] = defaultdict(list)
    for child in children:
        own, wake = by_child[child], wakes.get(child, [])
        mine = [c for c in own if c in (REPORT_PUT, WAKE_SEND, SUCCESSOR_SEND)]
        report = mine + wake
        report_s3.append(sum(c.startswith("s3:") for c in report))
        report_sqs.append(sum(c.startswith("sqs:SendMessage") for c in report))
        life_s3.append(sum(c.startswith("s3:") for c in own + wake))
        life_sqs.append(sum(c.startswith("sqs:") for c in own + wake))
        parts["report_put"].append(own.count(REPORT_PUT))
        parts["wake_send"].append(own.count(WAKE_SEND))
        parts["successor_send"].append(own.count(SUCCESSOR_SEND))
        parts["wake_list"].append(wake.count("s3:ListObjectsV2:parent/inbox/"))
        parts["wake_parent_get"].append(wake.count("s3:GetObject:parent/record.json"))
        parts["wake_messages"].append(wake_messages[child])
        parts["wake_listed_keys"].append(wake_listed[child])
    return {
        "n": n,
        "report_s3": report_s3,
        "report_sqs": report_sqs,
        "life_s3": life_s3,
        "life_sqs": life_sqs,
        "parts": parts,
        "record_puts": parent_calls["s3:PutObject:parent/record.json"],
        "record_puts_refused": sum(
            n for k, n in parent_calls.items() if k.startswith("s3:PutObject:parent/record.json!")
        ),
        "inbox_tags": parent_calls["s3:PutObjectTagging:parent/inbox/children/*"],
        "listed": sum(line.get("listed", 0) for line in lines),
        "creates": parent_calls["s3:PutObject:child/record.json"],
        "report_gets": parent_calls["s3:GetObject:parent/inbox/children/*"],
        "parent_calls": parent_calls,
        "outcomes": outcomes,
        "all_s3": sum(v for k, v in _all(lines).items() if k.startswith("s3:")),
        "all_sqs": sum(v for k, v in _all(lines).items() if k.startswith("sqs:")),
    }


def _all(lines: list[dict[str, Any]]) -> Counter[str]:
    total: Counter[str] = Counter()
    for line in lines:
        total.update(line["calls"])
    return total


# -- the figures ---------------------------------------------------------------------------------


def report(out: dict[str, Any]) -> None:
    n = out["n"]
    name = f"fanout_tasks.n{n}"
    emit(f"{name}.children", n)
    emit(f"{name}.wall", out["wall"], "s")
    emit(f"{name}.children_per_s", n / out["wall"], "children/s")
    emit(f"{name}.parent.record_versions", out["record_versions"], "versions (its create included)")
    emit(f"{name}.parent.record_puts", out["record_puts"], "PutObject calls by the workers")
    emit(
        f"{name}.parent.record_puts_refused",
        out["record_puts_refused"],
        "PutObject calls answered 412 (wakes racing to claim it)",
    )
    emit(f"{name}.parent.invocations", out["invocations"])
    for outcome, count in sorted(out["outcomes"].items()):
        emit(f"{name}.parent.messages.{outcome}", count, "messages")
    for key, values in (("s3", out["report_s3"]), ("sqs_send", out["report_sqs"])):
        emit(f"{name}.per_child.report.{key}.median", statistics.median(values), "calls")
        emit(f"{name}.per_child.report.{key}.mean", statistics.fmean(values), "calls")
        emit(f"{name}.per_child.report.{key}.max", max(values), "calls")
    for part, values in sorted(out["parts"].items()):
        unit = "keys" if part.endswith("keys") else "calls"
        emit(f"{name}.per_child.report.{part}.median", statistics.median(values), unit)
    emit(f"{name}.per_child.life.s3.median", statistics.median(out["life_s3"]), "calls")
    emit(f"{name}.per_child.life.sqs.median", statistics.median(out["life_sqs"]), "calls")
    emit(f"{name}.parent_side.create_per_child", out["creates"] / n, "PutObject")
    emit(f"{name}.parent_side.report_reads_per_child", out["report_gets"] / n, "GetObject")
    emit(f"{name}.parent_side.report_tags_per_child", out["inbox_tags"] / n, "PutObjectTagging")
    emit(f"{name}.listed_keys_per_child", out["listed"] / n, "keys returned by LISTs")
    emit(f"{name}.all_calls_per_child.s3", out["all_s3"] / n, "calls")
    emit(f"{name}.all_calls_per_child.sqs", out["all_sqs"] / n, "calls")


def main(quick: bool = False) -> None:
    sizes = (10, 20) if quick else (100, 1000)
    writes = {}
    for n in sizes:
        # Quick: a few children with a successor each, and a few without.
        out = run(n, workers=2, max_concurrency=5) if quick else run(n)
        report(out)
        writes[n] = out["record_versions"]
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        emit(
            "fanout_tasks.parent_record_writes_growth",
            writes[large] / writes[small],
            f"x (N={large} / N={small}; target 1: they do not grow with N)",
        )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
