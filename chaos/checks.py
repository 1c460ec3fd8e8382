"""After a run: read every version of every record, the ledger and the event log; check.

The re-execution check, and why it is sound without comparing clocks:

- Every step execution in the ledger names its invocation ``I`` (the Lambda request id, which
  the library writes as the lease owner when ``I`` claims the record). A step can only run
  after its invocation's claim was written, so the claim version ``C(I)`` — the first version
  whose lease owner is ``I`` — happened before every execution of ``I``.
- A step ``(turn t, key k)`` is *recorded* in a version ``V`` when ``V`` is finished, or
  ``V.turn > t`` (the turn completed; its outcome is in the snapshot), or ``V.turn == t`` and
  ``k`` is in ``V.journal``.
- So if ``(t, k)`` is recorded in any version before ``C(I)``, it was recorded before ``I``
  ran it: a re-execution of a recorded step, which must never happen. Executions that happen
  before their key is first recorded (a crash between the step and the save) are allowed, and
  are counted as re-executed-before-recording.
- A zombie invocation running on after another one claimed is excluded by the lease, and by
  the watchdog that kills each worker at its deadline, as Lambda does (executions past their
  invocation's deadline are reported).

Blobs (``tasks/<id>/blobs/<sha256>.json.gz``): after the run every blob object is referenced
by the latest record of its task, deleted (only noncurrent versions and a delete marker left),
or tagged ``continuum-finished=true``; a finished record and the blobs it references are
tagged (its sweep completed, so they expire); no latest record points at a blob that is gone;
and a blob is tagged only after its task's finish write landed (a fenced finish tags nothing).

Also checked: every journal entry was produced by a real execution of an invocation that had
claimed at or before that version; a step never ran twice in one invocation; every key a
succeeded task ran is recorded in its final version (so a step that ran again used the same
idempotency key); generation, turn and continuations never went back between consecutive
versions, and a finished record never changed status again.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chaos.faults import INJECTED_CODES
from chaos.server import StoredVersion
from chaos.tasks import POOL_THREAD

FINISHED = ("succeeded", "failed", "cancelled")
#: Failures a task that is not doomed may end in under chaos: the designed, bounded ones.
ALLOWED_FAILURES = ("StepCrashedWorker", "DeadLettered")
#: More deliveries of one generation than this is a storm (dead letters stop at maxReceiveCount).
STORM_DELIVERIES = 20


#: A task that a worker death kept from failing as planned fails so after this many deaths.
HARD_HIT_KILLS = 3


@dataclass(frozen=True)
class Failure:
    """How a task that must fail has to fail.

    Attributes:
        invariant: the name a violation is counted under.
        mentions: a name the error's step or message must contain (the step, the field).
        error_type: the error's type (None: any).
        pattern: a regular expression the error's message must match (None: any).
    """

    invariant: str
    mentions: str
    error_type: str | None = None
    pattern: str | None = None

    def problem(self, status: str, error: dict[str, Any]) -> str | None:
        """What is wrong with this ending (None: it is the planned failure)."""
        message = str(error.get("message"))
        if status != "failed":
            return f"ended {status}"
        if self.mentions not in f"{error.get('step')} {message}":
            return f"does not name {self.mentions!r}"
        if self.error_type is not None and error.get("type") != self.error_type:
            return f"type {error.get('type')}, not {self.error_type}"
        if self.pattern is not None and not re.search(self.pattern, message):
            return f"message does not match {self.pattern!r}"
        return None


@dataclass(frozen=True)
class PlannedTask:
    """A task the harness started, and what it must end as (its result, or a failure)."""

    task_id: str
    name: str
    input: dict[str, Any]
    expected: Any  # None: none, or it depends on what the harness sends (``chaos.flowchecks``)
    failure: Failure | None = None
    #: or "cancelled" (the harness cancels it), or "any" (only that it ends is checked)
    ending: str = "succeeded"
    outside: dict[str, Any] | None = None  # what the harness sends it (chaos.outside)


@dataclass
class Report:
    """The figures of a run and the invariants it broke."""

    figures: list[tuple[str, Any, str]] = field(default_factory=list)
    violations: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, name: str, value: Any, unit: str = "") -> None:
        self.figures.append((name, value, unit))

    def add_all(self, unit: str, figures: dict[str, Any]) -> None:
        """Several figures of one unit."""
        for name, value in figures.items():
            self.add(name, value, unit)

    def violate(self, invariant: str, example: str) -> None:
        self.violations[invariant] += 1
        if len(self.examples[invariant]) < 5:
            self.examples[invariant].append(example)

    @property
    def ok(self) -> bool:
        return not self.violations


def _parse(body: bytes) -> dict[str, Any]:
    try:
        record: dict[str, Any] = json.loads(body)
    except ValueError as exc:
        record = {"_corrupt": str(exc)}
    return record


def read_versions(
    s3: Any, bucket: str, prefix: str = "tasks", stored: list[StoredVersion] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every version of every record, oldest first, as parsed JSON ({"_corrupt": ...} if not).

    From ``stored`` (the bucket's versions in write order) if given; else through the S3
    API, ordered by S3's LastModified, ties broken by the record's own updated_at (each write
    sets it after reading the version it replaces).
    """
    if stored is not None:
        in_order: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for version in stored:
            if version.key.endswith("/record.json") and version.body is not None:
                in_order[version.key.split("/")[-2]].append(_parse(version.body))
        return dict(in_order)
    refs = []
    paginator = s3.get_paginator("list_object_versions")
    for page in paginator.paginate(Bucket=bucket, Prefix=f"{prefix}/"):
        for version in page.get("Versions", []):
            if version["Key"].endswith("/record.json"):
                refs.append((version["Key"], version["VersionId"], version["LastModified"]))

    def fetch(ref: tuple[str, str, datetime]) -> tuple[str, datetime, dict[str, Any]]:
        key, version_id, modified = ref
        body = s3.get_object(Bucket=bucket, Key=key, VersionId=version_id)["Body"].read()
        return key.split("/")[-2], modified, _parse(body)

    with ThreadPoolExecutor(max_workers=8) as pool:
        fetched = list(pool.map(fetch, refs))
    versions: dict[str, list[tuple[datetime, datetime, dict[str, Any]]]] = defaultdict(list)
    for task_id, modified, record in fetched:
        updated = datetime.fromisoformat(record.get("updated_at", "1970-01-01T00:00:00+00:00"))
        versions[task_id].append((modified, updated, record))
    return {
        task_id: [record for _m, _u, record in sorted(items, key=lambda i: (i[0], i[1]))]
        for task_id, items in versions.items()
    }


def read_jsonl(path: str) -> list[dict[str, Any]]:
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def recorded(version: dict[str, Any], turn: int, key: str) -> bool:
    """Is step ``key`` of ``turn`` recorded in this version of the record?

    ``key`` is a path through the journal tree (``items#0/3/piece#0``: step ``piece#0`` of
    item 3 of the batch ``items#0``): it is recorded when the step's entry is, or when an
    entry on its path is done (a finished item or batch keeps its result, not its steps).
    """
    if version.get("status") in FINISHED or version.get("turn", 0) > turn:
        return True
    if version.get("turn") != turn:
        return False
    entries: list[dict[str, Any]] = version.get("journal", [])
    parts = key.split("/")
    for depth, part in enumerate(parts):
        entry = next((e for e in entries if e.get("key") == part), None)
        if entry is None:
            return False
        if depth == len(parts) - 1 or not entry.get("partial"):
            return True  # the step's own entry, or a finished item or batch holding it
        entries = entry.get("children") or []
    return False


def journal_steps(entries: list[dict[str, Any]], path: str = "") -> list[str]:
    """The keys (paths, as in :func:`recorded`) of every step entry in a journal tree; waits,
    batches and child contexts are not steps (no ledger line), but their children may be."""
    keys: list[str] = []
    for entry in entries:
        key = f"{path}{entry.get('key')}"
        if entry.get("kind", "step") == "step":
            keys.append(key)
        if entry.get("children"):
            keys += journal_steps(entry["children"], f"{key}/")
    return keys


def _claims(versions: list[dict[str, Any]]) -> dict[str, int]:
    """Invocation id -> index of its claim (the first version it holds the lease in)."""
    claims: dict[str, int] = {}
    for i, version in enumerate(versions):
        lease = version.get("lease") or {}
        owner = lease.get("owner")
        if version.get("status") == "running" and owner and owner not in claims:
            claims[owner] = i
    return claims


def check_steps(
    report: Report, versions: dict[str, list[dict[str, Any]]], ledger: list[dict[str, Any]]
) -> None:
    """Compare the ledger's real executions with the records' journals."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for execution in ledger:
        by_task[execution["task_id"]].append(execution)
    distinct = recorded_steps = late = 0
    for task_id, executions in by_task.items():
        history = versions.get(task_id, [])
        claims = _claims(history)
        seen: Counter[tuple[str, str]] = Counter()
        earliest: dict[str, int] = {}
        for e in executions:
            _task, _turn, key = e["key"].split("/", 2)
            seen[(e["inv"], e["key"])] += 1
            if seen[(e["inv"], e["key"])] == 2:
                report.violate("steps run twice in one invocation", f"{e['key']} in {e['inv']}")
            if e.get("deadline") is not None and e["t"] > e["deadline"] + 0.1:
                late += 1
            claim = claims.get(e["inv"])
            if claim is None:
                report.violate("step executions without a claim", f"{e['key']} by {e['inv']}")
                continue
            earliest[e["key"]] = min(earliest.get(e["key"], claim), claim)
            since = _since_retry(history, claim)
            before = [i for i in range(since, claim) if recorded(history[i], e["turn"], key)]
            if before:
                report.violate(
                    "re-executions of recorded steps",
                    f"{e['key']} ran in invocation {e['inv']} (claim = version {claim}) "
                    f"but version {before[0]} of {len(history)} already recorded it",
                )
        distinct += len(earliest)
        final = history[-1] if history else {}
        for key in earliest:
            if recorded(final, int(key.split("/")[1]), key.split("/", 2)[2]):
                recorded_steps += 1
            elif final.get("status") == "succeeded":
                # A deterministic task that succeeded records every key it ever ran; a key it
                # ran but never recorded means the key changed when the step ran again.
                report.violate("idempotency keys that changed between executions", key)
        # A fork's first record holds the steps its original ran: they ran under its id.
        first = history[0] if history and history[0].get("forked_from") else {}
        inherited = {
            f"{task_id}/{first.get('turn')}/{step}"
            for step in journal_steps(first.get("journal", []))
        }
        for i, version in enumerate(history):
            for step in journal_steps(version.get("journal", [])):
                key = f"{task_id}/{version.get('turn')}/{step}"
                if earliest.get(key, i + 1) > i and key not in inherited:
                    report.violate("recorded steps without an execution", f"{key} in version {i}")
    report.add("step executions", len(ledger), "executions")
    report.add("distinct steps executed", distinct, "steps")
    report.add("recorded steps", recorded_steps, "steps")
    report.add("re-executed before being recorded (allowed)", len(ledger) - distinct, "executions")
    report.add(
        "re-executions of recorded steps",
        report.violations["re-executions of recorded steps"],
        "executions",
    )
    report.add("executions past their invocation's deadline", late, "executions")


def _progress(record: dict[str, Any]) -> dict[str, int]:
    """The counts that may only grow from one version of a record to the next."""
    return {
        "generation": int(record.get("generation", 0)),
        "turn": int(record.get("turn", 0)),
        "continuations": int(record.get("counters", {}).get("continuations", 0)),
    }


def check_history(report: Report, task_id: str, history: list[dict[str, Any]]) -> None:
    """Generations, turns and continuations only grow; a finished record stays finished."""
    previous: dict[str, Any] | None = None
    for i, version in enumerate(history):
        if "_corrupt" in version:
            report.violate("record versions that do not parse", f"{task_id} v{i}")
            continue
        if previous is not None:
            before, after = _progress(previous), _progress(version)
            for name in before:
                if after[name] < before[name]:
                    report.violate(
                        "generation regressions",
                        f"{task_id} v{i}: {name} {before[name]} -> {after[name]}",
                    )
            if (
                previous.get("status") in FINISHED
                and version.get("status") != previous["status"]
                and not _retried(previous, version)
            ):
                report.violate(
                    "generation regressions",
                    f"{task_id} v{i}: {previous['status']} -> {version.get('status')}",
                )
        previous = version


def _retried(previous: dict[str, Any], version: dict[str, Any]) -> bool:
    """Whether ``version`` is an operator's retry of the failed ``previous``."""
    return (
        previous.get("status") == "failed"
        and version.get("status") == "suspended"
        and version.get("suspend_reason") == "retry"
    )


def _since_retry(history: list[dict[str, Any]], claim: int) -> int:
    """The first version a claim's steps answer to: the last retry before it (what the
    retry kept is recorded; what it reopened may run again), or the first version."""
    for i in range(claim, 0, -1):
        if _retried(history[i - 1], history[i]):
            return i
    return 0


def hard_hit(events: list[dict[str, Any]], dead_lettered: Iterable[str]) -> set[str]:
    """Tasks whose workers died often enough (or that were dead-lettered) that the designed,
    bounded failures (``ALLOWED_FAILURES``) may end them before their planned failure."""
    kills = Counter(e.get("task_id") for e in events if e["ev"] == "kill")
    return {str(t) for t, n in kills.items() if n >= HARD_HIT_KILLS} | set(dead_lettered)


def check_outcome(
    report: Report, task: PlannedTask, final: dict[str, Any] | None, excused: set[str]
) -> str:
    """Check how one task ended; return its final status ('missing' if no record).

    ``excused``: tasks that may end in one of ``ALLOWED_FAILURES`` instead of their planned
    failure (see :func:`hard_hit`).
    """
    if final is None:
        report.violate("tasks without a record", task.task_id)
        return "missing"
    status = str(final.get("status"))
    error = final.get("error") or {}
    expected = task.expected
    if status == "succeeded" and task.failure is None and expected is not None:  # noqa: SIM102
        if final.get("result") != expected:
            report.violate("wrong results", f"{task.task_id}: {final.get('result')!r}")
    if status == "failed" and not error.get("message"):
        report.violate("failed tasks without a reason", task.task_id)
    if task.ending == "any":  # a bounded failure of a child changed what it must end as
        return status
    if status == "cancelled" and task.ending != "cancelled":
        report.violate("tasks cancelled that nobody cancelled", task.task_id)
    if task.ending == "cancelled":
        bounded = status == "failed" and error.get("type") in ALLOWED_FAILURES
        if status in FINISHED and not bounded and error.get("type") != "TaskCancelledError":
            report.violate(
                "cancelled tasks not ended cancelled",
                f"{task.task_id}: {status}, {error.get('type')}: {error.get('message')}",
            )
    elif task.failure is not None:
        problem = task.failure.problem(status, error)
        bounded = error.get("type") in ALLOWED_FAILURES and task.task_id in excused
        if problem is not None and not (status == "failed" and bounded):
            report.violate(
                task.failure.invariant,
                f"{task.task_id} ({task.name}): {problem}; {status}, {error.get('type')}: "
                f"{str(error.get('message'))[:160]}",
            )
    elif status == "failed" and error.get("type") not in ALLOWED_FAILURES:
        text = f"{error.get('type')} {error.get('message')}"
        kind = (
            "tasks failed of a transient AWS fault"
            if any(code in text for code in INJECTED_CODES)
            else "tasks failed for another reason"
        )
        report.violate(kind, f"{task.task_id}: {text[:200]}")
    return status


def check_deliveries(report: Report, events: list[dict[str, Any]]) -> None:
    """Count deliveries per generation; a generation delivered very often is a message storm.

    Duplicates are harmless to correctness, but each one costs an invocation: if stale copies
    beget new copies, their number grows with every generation instead of dying out.
    """
    per_generation: Counter[tuple[str, int]] = Counter()
    for e in events:
        if e["ev"] != "receive":
            continue
        try:
            message = json.loads(e["body"])
            if message.get("batch"):
                continue  # a child's report wakes its parent at generation 0, whatever it is
            per_generation[(str(message["task_id"]), int(message["generation"]))] += 1
        except (ValueError, KeyError, TypeError):
            continue
    report.add("deliveries received", sum(per_generation.values()), "messages")
    most = per_generation.most_common(1)
    report.add("most deliveries of one generation", most[0][1] if most else 0, "messages")
    for (task_id, generation), count in sorted(per_generation.items()):
        if count > STORM_DELIVERIES:
            report.violate(
                f"generations delivered more than {STORM_DELIVERIES} times (message storm)",
                f"{task_id} generation {generation}: {count} deliveries",
            )


def recovery_latencies(events: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Seconds from each kill to the next claim of its task (kills after a finish excluded).

    ``all`` holds every such kill; ``claimed`` only kills of invocations that had claimed the
    task (their message's visibility was shortened to the deadline plus the margin).
    """
    finished_at: dict[str, float] = {}
    claims: dict[str, list[float]] = defaultdict(list)
    claimers: set[tuple[str, str]] = set()
    for e in events:
        if e["ev"] == "write" and e["kind"] == "finish_write":
            finished_at[e["task_id"]] = min(e["t"], finished_at.get(e["task_id"], e["t"]))
        elif e["ev"] == "write" and e["kind"] == "claim":
            claims[e["task_id"]].append(e["t"])
            claimers.add((e["task_id"], e["inv"]))
    latencies: dict[str, list[float]] = {"all": [], "claimed": []}
    for kill in events:
        task_id = kill.get("task_id")
        if kill["ev"] != "kill" or task_id is None:
            continue
        if finished_at.get(task_id, float("inf")) <= kill["t"]:
            continue
        later = [t for t in claims[task_id] if t > kill["t"]]
        if later:
            latencies["all"].append(min(later) - kill["t"])
            if (task_id, kill["inv"]) in claimers:
                latencies["claimed"].append(min(later) - kill["t"])
    return latencies


def summarize_latency(report: Report, latencies: dict[str, list[float]]) -> None:
    """Median and max recovery latency, over all kills and over kills of claimed work."""
    for group, label in (("all", "recovery latency"), ("claimed", "recovery latency (claimed)")):
        values = latencies[group]
        report.add(f"{label} kills measured", len(values), "kills")
        if values:
            report.add(f"{label} median", round(statistics.median(values), 3), "s")
            report.add(f"{label} max", round(max(values), 3), "s")


# -- the tasks with a planned failure: what the ledger must show ------------------------------


def check_planned_steps(
    report: Report,
    plan: Iterable[PlannedTask],
    ledger: list[dict[str, Any]],
    events: list[dict[str, Any]],
) -> None:
    """A NaN step ran at most once outside killed invocations; no step ran in a task's pool.

    A NaN result can be neither journaled nor retried: the first invocation that gets it
    fails the task. Only a worker death before the failure was written lets it run again.
    """
    killed = {e.get("inv") for e in events if e["ev"] == "kill"}
    nan_steps = {
        (t.task_id, int(t.input["at"]))
        for t in plan
        if t.name == "nan" and t.input.get("where") == "step"
    }
    runs: Counter[str] = Counter()
    pooled = 0
    for e in ledger:
        if e["step"] == "measure" and (e["task_id"], e["turn"]) in nan_steps:
            runs["executions"] += 1
            if e["inv"] not in killed:
                runs[e["task_id"]] += 1
                if runs[e["task_id"]] == 2:
                    report.violate(
                        "NaN steps run again by an invocation that was not killed",
                        f"{e['key']} in {e['inv']}",
                    )
        if e["step"] == "pooled" or str(e.get("thread", "")).startswith(POOL_THREAD):
            pooled += 1
            report.violate(
                "steps run from a task's thread pool", f"{e['key']} on {e.get('thread')}"
            )
    report.add("NaN steps executed", runs["executions"], "executions")
    report.add("steps executed from a thread pool", pooled, "executions")


# -- blobs -------------------------------------------------------------------------------------


def blob_digests(value: Any) -> set[str]:
    """The digest of every blob reference (``{"sha256", "size", "stored"}``) in a raw record."""
    found: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("sha256"), str) and "stored" in value:
            found.add(value["sha256"])
        for item in value.values():
            found |= blob_digests(item)
    elif isinstance(value, list):
        for item in value:
            found |= blob_digests(item)
    return found


@dataclass
class BlobObject:
    """What the bucket holds under one blob key."""

    versions: int = 0
    delete_markers: int = 0
    current: bool = False


def read_blobs(
    s3: Any, bucket: str, prefix: str = "tasks", stored: list[StoredVersion] | None = None
) -> dict[str, BlobObject]:
    """Every blob key ever written, with its versions and whether it is current (not deleted),
    from ``stored`` if given, else through the S3 API."""
    blobs: dict[str, BlobObject] = defaultdict(BlobObject)
    if stored is not None:
        for version in stored:
            if "/blobs/" in version.key:
                blob = blobs[version.key]
                if version.body is None:
                    blob.delete_markers += 1
                else:
                    blob.versions += 1
                    blob.current = blob.current or version.latest
        return dict(blobs)
    paginator = s3.get_paginator("list_object_versions")
    for page in paginator.paginate(Bucket=bucket, Prefix=f"{prefix}/"):
        for version in page.get("Versions", []):
            if "/blobs/" in version["Key"]:
                blob = blobs[version["Key"]]
                blob.versions += 1
                blob.current = blob.current or bool(version.get("IsLatest"))
        for marker in page.get("DeleteMarkers", []):
            if "/blobs/" in marker["Key"]:
                blobs[marker["Key"]].delete_markers += 1
    return dict(blobs)


def _blob_key(task_id: str, digest: str, prefix: str = "tasks") -> str:
    return f"{prefix}/{task_id}/blobs/{digest}.json.gz"


def _tagged_finished(s3: Any, bucket: str, key: str) -> bool:
    tags = s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
    return {"Key": "continuum-finished", "Value": "true"} in tags


#: Calls whose fault, after the finish write in the invocation that made it, cuts its sweep
#: short (a GetObject there is the read that would confirm a write whose reply was lost).
TIDYING = ("DeleteObject", "PutObjectTagging", "ListObjectsV2", "GetObject")
#: A leaked blob whose task's finish sweep was cut short: a kill or a fault after the finish.
SWEEP_LEAK = "blobs leaked by an interrupted finish sweep"
OTHER_LEAK = "blobs left unreferenced, undeleted and untagged"
MISSING_BLOB = "records pointing at a missing blob"
TAGGED_EARLY = "blobs tagged before their task finished"
#: A blob its finished task's record uses, or that record itself, not tagged: never expires.
FINISHED_UNTAGGED = "blobs referenced by a finished record, untagged (never expire)"
UNSWEPT = "finished records untagged (their sweep never completed)"


def sweep_interruptions(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per task, what cut short the sweep of its blobs: a kill or a fault on a tidying call
    met by the invocation that wrote its finish, after that write."""
    causes: dict[str, list[str]] = defaultdict(list)
    finisher: dict[str, str] = {}
    for e in events:
        task_id = e.get("task_id")
        if task_id is None:
            continue
        if e["ev"] == "write" and e["kind"] == "finish_write":
            finisher[task_id] = e["inv"]
        elif task_id in finisher and e.get("inv") == finisher[task_id]:
            if e["ev"] == "kill":
                causes[task_id].append(f"killed at {e['point']}")
            elif e["ev"] == "fault" and e["op"] in TIDYING:
                causes[task_id].append(f"{e['kind']} on {e['op']}")
    return dict(causes)


def check_blobs(
    report: Report,
    s3: Any,
    bucket: str,
    versions: dict[str, list[dict[str, Any]]],
    events: list[dict[str, Any]],
    stored: list[StoredVersion] | None = None,
) -> None:
    """Every blob ends referenced, deleted or tagged; none a latest record needs is gone."""
    blobs = read_blobs(s3, bucket, stored=stored)
    interrupted = sweep_interruptions(events)
    referenced = {
        _blob_key(task_id, digest)
        for task_id, history in versions.items()
        if history
        for digest in blob_digests(history[-1])
    }
    for key in sorted(referenced):
        if not (key in blobs and blobs[key].current):
            task_id = key.split("/")[1]
            status = versions[task_id][-1].get("status")
            report.violate(MISSING_BLOB, f"{task_id} ({status}): {key}")
    counts: Counter[str] = Counter()
    for key, blob in sorted(blobs.items()):
        counts["written"] += blob.versions
        if not blob.current:
            counts["deleted"] += 1
        elif key in referenced:
            counts["referenced"] += 1
            final = versions[key.split("/")[1]][-1]
            if final.get("status") in FINISHED and not _tagged_finished(s3, bucket, key):
                report.violate(FINISHED_UNTAGGED, f"{key} (task {final.get('status')})")
        elif _tagged_finished(s3, bucket, key):
            counts["tagged"] += 1
        else:
            task_id = key.split("/")[1]
            status = (versions.get(task_id) or [{}])[-1].get("status")
            causes = interrupted.get(task_id, [])
            why = ", ".join(causes) if causes else "no kill or tidying fault after the finish"
            report.violate(SWEEP_LEAK if causes else OTHER_LEAK, f"{key} (task {status}; {why})")
    check_tags_after_finish(report, events)
    check_records_swept(report, s3, bucket, versions)
    report.add("blob versions written", counts["written"], "versions")
    report.add_all(
        "blobs",
        {
            "blob keys": len(blobs),
            "blobs deleted": counts["deleted"],
            "blobs referenced by a latest record": counts["referenced"],
            "blobs unreferenced, tagged finished": counts["tagged"],
        },
    )
    invariants = (OTHER_LEAK, SWEEP_LEAK, FINISHED_UNTAGGED, MISSING_BLOB, TAGGED_EARLY)
    report.add_all("blobs", {name: report.violations[name] for name in invariants})
    report.add(UNSWEPT, report.violations[UNSWEPT], "records")
    report.add("tasks whose finish sweep was cut short", len(interrupted), "tasks")
    add_blob_sharing(report, events)


def check_records_swept(
    report: Report, s3: Any, bucket: str, versions: dict[str, list[dict[str, Any]]]
) -> None:
    """Every finished record is tagged finished: the library tags it last, once its task's
    sweep completed (a sweep cut short is retried with the task's message until it does)."""
    for task_id, history in sorted(versions.items()):
        status = history[-1].get("status") if history else None
        if status in FINISHED and not _tagged_finished(s3, bucket, _record_key(task_id)):
            report.violate(UNSWEPT, f"{task_id} ({status})")


def _record_key(task_id: str, prefix: str = "tasks") -> str:
    return f"{prefix}/{task_id}/record.json"


def check_tags_after_finish(report: Report, events: list[dict[str, Any]]) -> None:
    """A worker tags a task's blobs only after a finish write of that task landed."""
    finished: set[str] = set()
    for e in events:
        if e["ev"] == "write" and e["kind"] == "finish_write":
            finished.add(e["task_id"])
        elif e["ev"] == "blob" and e["op"] == "tag" and "/blobs/" in str(e["key"]):
            task_id = str(e["key"]).split("/")[1]
            if task_id not in finished:
                report.violate(TAGGED_EARLY, f"{e['key']} by {e['inv']}")


def add_blob_sharing(report: Report, events: list[dict[str, Any]]) -> None:
    """How often warm workers shared blobs: the case a stale "I uploaded it" would break.

    A *re-upload after another's delete* is a worker putting a blob it had put before, after
    another worker process deleted it: the upload must happen (and did, or the record
    pointing at it would find it gone).
    """
    put_by: dict[str, set[int]] = defaultdict(set)
    deleted_by: dict[str, int] = {}
    counts: Counter[str] = Counter()
    claimers: dict[str, set[int]] = defaultdict(set)
    for e in events:
        if e["ev"] == "write" and e["kind"] == "claim":
            claimers[e["task_id"]].add(e["pid"])
        if e["ev"] != "blob" or e["op"] == "tag":
            continue
        key, pid = str(e["key"]), int(e["pid"])
        counts[e["op"]] += 1
        if e["op"] == "delete":
            deleted_by[key] = pid
            continue
        other = deleted_by.pop(key, None)
        if other is not None:
            counts["re-uploaded after a delete"] += 1
            if pid in put_by[key] and other != pid:
                counts["re-uploaded after another worker deleted it"] += 1
        put_by[key].add(pid)
    blob_tasks = {str(e["key"]).split("/")[1] for e in events if e["ev"] == "blob"}
    shared = sum(len(claimers[t]) > 1 for t in blob_tasks)
    report.add_all(
        "calls",
        {
            "blob puts": counts["put"],
            "blob deletes": counts["delete"],
            "blob re-uploads after a delete": counts["re-uploaded after a delete"],
            "blob re-uploads by a worker after another worker deleted it": counts[
                "re-uploaded after another worker deleted it"
            ],
        },
    )
    report.add("blob tasks claimed by more than one worker process", shared, "tasks")


def count_outcomes(
    plan: Iterable[PlannedTask], final: Callable[[str], dict[str, Any] | None], names: Iterable[str]
) -> list[tuple[str, int]]:
    """``outcome NAME STATUS [ERROR TYPE]`` counts for the tasks of the kinds ``names``."""
    wanted = set(names)
    outcomes: Counter[str] = Counter()
    for task in plan:
        if task.name not in wanted:
            continue
        record = final(task.task_id) or {}
        error = (record.get("error") or {}).get("type")
        outcomes[" ".join(filter(None, [task.name, str(record.get("status")), error]))] += 1
    return sorted(outcomes.items())
