"""The template's policies for people and programs, enforced by moto's IAM, and read as text.

Each principal is an IAM user whose only policy is the template's (rendered with the default
parameters: no KMS key, no signing key), with its own access keys; moto then checks every
S3 and SQS call against it. moto evaluates actions and resources, and ignores every condition
on S3 keys (it evaluates ``StringEquals`` on ``sts:ExternalId`` only), so what the conditions
add (``s3:if-none-match``, ``s3:if-match``) is checked on the documents themselves, and the
client is checked to send the headers they require.

S3 calls are checked under their IAM action (``iam_enforced``): moto 5.2.6 checks them under
the operation's name, which IAM does not know for some (``ListObjectsV2`` is
``s3:ListBucket``), and so denies what AWS allows.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import enable_iam_authentication
from moto.iam.access_control import S3IAMRequest
from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum._local.lambda_emulation import LocalLambdaContext
from continuum._ops.inspection import inspect_task
from continuum._record.model import Status
from continuum.backends.store import StoreError
from continuum.scaffold import render_template

REGION = "us-east-1"
ACCOUNT = "123456789012"
BUCKET = "continuum-policies"
QUEUE = "continuum-policies"
PREFIX = "tasks"
BUCKET_ARN = f"arn:aws:s3:::{BUCKET}"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{QUEUE}"
EVENT = Path(__file__).resolve().parents[1] / "events" / "sqs_continuation.json"
#: Larger than the inline limit: the input goes to a blob beside the record.
LARGE_NOTE = "x" * (40 * 1024)
NOVALUE = object()


# -- the template's policies -------------------------------------------------------------------


class _CloudFormation(yaml.SafeLoader):
    """YAML with CloudFormation's short tags (``!Sub``, ``!If``...) read as ``{tag: value}``."""


def _tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {suffix: value}


_CloudFormation.add_multi_constructor("!", _tagged)

#: What the intrinsic functions in the policies name, for this test's stack.
NAMES = {
    "StateBucket.Arn": BUCKET_ARN,
    "TaskPrefix": PREFIX,
    "ContinuationQueue.Arn": QUEUE_ARN,
    "ScheduleGroup": "continuum-policies",
    "SchedulerRole.Arn": f"arn:aws:iam::{ACCOUNT}:role/continuum-policies-scheduler",
    "WorkerLogGroup.Arn": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/worker",
    "AWS::Partition": "aws",
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::NoValue": NOVALUE,
}


def _resolve(node: Any) -> Any:
    if isinstance(node, list):
        return [item for item in map(_resolve, node) if item is not NOVALUE]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        [(tag, value)] = node.items()
        if tag in ("Ref", "GetAtt"):
            return NAMES[value]
        if tag == "Sub":
            return re.sub(r"\$\{([^}]+)\}", lambda m: str(NAMES[m.group(1)]), value)
        if tag == "If":
            # Every condition in the policies is off with the default parameters.
            assert value[0].startswith("Use"), value
            return _resolve(value[2])
    return {key: _resolve(value) for key, value in node.items()}


def template_policies() -> dict[str, dict[str, Any]]:
    """The three policy documents of the reference template, resolved for this stack."""
    resources = yaml.load(render_template("reference"), Loader=_CloudFormation)["Resources"]
    return {
        "start": _resolve(resources["StartTasksPolicy"]["Properties"]["PolicyDocument"]),
        "operator": _resolve(resources["OperatorPolicy"]["Properties"]["PolicyDocument"]),
        "worker": _resolve(resources["WorkerRole"]["Properties"]["Policies"][0]["PolicyDocument"]),
    }


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def s3_writes(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The statements of a document that allow s3:PutObject."""
    return [s for s in document["Statement"] if "s3:PutObject" in _listed(s["Action"])]


# -- the tasks ----------------------------------------------------------------------------------


class Note(BaseModel):
    note: str = ""
    runs: int = 0


#: Whether the fix for ``broken`` is deployed.
FIX = {"deployed": False}


def make_app() -> Continuum:
    app = Continuum(default_step_s=0.05, safety_margin_s=0.05)

    @app.step
    def publish(note: str) -> int:
        if not FIX["deployed"]:
            raise ValueError("the press is down")
        return len(note)

    @app.task(state=Note)
    def echo(ctx: TaskContext[Note]) -> int:
        return len(ctx.state.note)

    @app.task(state=Note)
    def broken(ctx: TaskContext[Note]) -> int:
        ctx.state.runs += 1
        return publish(ctx.state.note)

    @app.task(state=Note)
    def hold(ctx: TaskContext[Note]) -> Any:
        signal = ctx.wait_for_signal("go")
        return None if signal is None else signal.payload

    return app


# -- the stack and its principals ----------------------------------------------------------------


@contextmanager
def iam_enforced() -> Iterator[None]:
    """moto's IAM checks every call, each S3 call under the IAM action that AWS checks it under.

    moto's S3 names that action in the request's data (``ListObjectsV2`` as ``ListBucket``, a
    GET with a version id as ``GetObjectVersion``), and moto before 5.2.6 checked that one;
    5.2.6 checks the operation's name instead. This gives the check the IAM action again.
    """
    original = S3IAMRequest.__init__

    def init(self: S3IAMRequest, **kwargs: Any) -> None:
        action = kwargs["data"].get("Action")
        if isinstance(action, str) and action:
            kwargs["action"] = action
        original(self, **kwargs)

    S3IAMRequest.__init__ = init  # type: ignore[method-assign]
    try:
        with enable_iam_authentication():
            yield
    finally:
        S3IAMRequest.__init__ = original  # type: ignore[method-assign]


@dataclass
class Principal:
    s3: Any
    sqs: Any
    app: Continuum = field(default_factory=make_app)
    #: The PutObject requests' conditional headers, in the order sent.
    puts: list[dict[str, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.app.configure(
            bucket=BUCKET, queue_url=self.queue_url, s3_client=self.s3, sqs_client=self.sqs
        )
        self.s3.meta.events.register("before-send.s3.PutObject", self._seen)

    @property
    def queue_url(self) -> str:
        return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{QUEUE}"

    def _seen(self, request: Any, **_: Any) -> None:
        def header(name: str) -> str | None:
            value = request.headers.get(name)
            return value.decode() if isinstance(value, bytes) else value

        path = urlparse(request.url).path.lstrip("/")
        self.puts.append(
            {
                "key": path.removeprefix(f"{BUCKET}/"),
                "If-None-Match": header("If-None-Match"),
                "If-Match": header("If-Match"),
            }
        )


@dataclass
class Stack:
    start: Principal
    operator: Principal
    worker: Principal

    def work(self, *task_ids: str, until: set[Status]) -> None:
        """Run the worker (as the stack's worker function would) until each task is in ``until``."""
        with EVENT.open() as f:
            template = json.load(f)["Records"][0]
        for _ in range(30):
            if all(self.status(t) in until for t in task_ids):
                return
            received = self.worker.sqs.receive_message(
                QueueUrl=self.worker.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
            ).get("Messages", [])
            for message in received:
                record = copy.deepcopy(template)
                record.update(
                    body=message["Body"],
                    messageId=message["MessageId"],
                    receiptHandle=message["ReceiptHandle"],
                    eventSourceARN=QUEUE_ARN,
                )
                answer = self.worker.app.handler({"Records": [record]}, LocalLambdaContext(30))
                if not answer["batchItemFailures"]:
                    self.worker.sqs.delete_message(
                        QueueUrl=self.worker.queue_url, ReceiptHandle=message["ReceiptHandle"]
                    )
        raise AssertionError({t: self.status(t) for t in task_ids})

    def status(self, task_id: str) -> Status:
        return self.operator.app.client().status(task_id).status


def _principal(iam: Any, name: str, document: dict[str, Any]) -> Principal:
    arn = iam.create_policy(PolicyName=name, PolicyDocument=json.dumps(document))["Policy"]["Arn"]
    iam.create_user(UserName=name)
    iam.attach_user_policy(UserName=name, PolicyArn=arn)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    options = {
        "region_name": REGION,
        "aws_access_key_id": key["AccessKeyId"],
        "aws_secret_access_key": key["SecretAccessKey"],
    }
    return Principal(boto3.client("s3", **options), boto3.client("sqs", **options))


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    monkeypatch.setitem(FIX, "deployed", False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        s3, sqs = boto3.client("s3", region_name=REGION), boto3.client("sqs", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        sqs.create_queue(QueueName=QUEUE)
        iam = boto3.client("iam", region_name=REGION)
        policies = template_policies()
        principals = {name: _principal(iam, name, doc) for name, doc in policies.items()}
        with iam_enforced():
            yield Stack(**principals)


def denied(call: Any) -> bool:
    try:
        call()
    except ClientError as exc:
        return exc.response["Error"]["Code"] in ("AccessDenied", "403")
    return False


# -- the start-tasks policy ---------------------------------------------------------------------


def test_the_start_tasks_policy_starts_tasks_small_and_large_that_the_worker_runs(stack):
    client = stack.start.app.client()
    small = client.start("echo", {"note": "tide"})
    large = client.start("echo", {"note": LARGE_NOTE})
    stack.work(small, large, until={Status.SUCCEEDED})
    assert stack.operator.app.client().status(large).result == len(LARGE_NOTE)
    assert {put["key"].split("/")[2] for put in stack.start.puts} == {"record.json", "blobs"}


def test_every_write_of_a_start_is_a_create(stack):
    stack.start.app.client().start("echo", {"note": LARGE_NOTE})
    assert stack.start.puts
    assert [put["If-None-Match"] for put in stack.start.puts] == ["*"] * len(stack.start.puts)


def test_the_start_tasks_policy_allows_writes_only_as_creates():
    # moto ignores conditions on S3 keys: the document itself must require If-None-Match.
    writes = s3_writes(template_policies()["start"])
    assert writes
    for statement in writes:
        assert statement["Condition"] == {"Null": {"s3:if-none-match": "false"}}, statement


def test_the_start_tasks_policy_reads_no_record_not_even_its_own(stack):
    client = stack.start.app.client()
    mine = client.start("echo", {"note": "mine"})
    other = stack.worker.app.client().start("echo", {"note": "theirs"})
    for task_id in [mine, other]:
        key = f"{PREFIX}/{task_id}/record.json"
        assert denied(lambda: stack.start.s3.get_object(Bucket=BUCKET, Key=key))
    document = template_policies()["start"]
    assert not [s for s in document["Statement"] if "s3:GetObject" in _listed(s["Action"])]


def test_a_start_with_a_taken_task_id_is_refused_and_changes_nothing(stack):
    task_id = stack.worker.app.client().start("echo", {"note": "first"})
    key = f"{PREFIX}/{task_id}/record.json"
    before = stack.operator.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    with pytest.raises(StoreError, match=rf"{key}: .*AccessDenied"):
        stack.start.app.client().start("echo", {"note": "second"}, task_id=task_id)
    assert stack.operator.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == before


def test_the_start_tasks_policy_writes_nothing_but_records_and_their_blobs(stack):
    task_id = stack.worker.app.client().start("hold", {"note": ""})
    inbox = f"{PREFIX}/{task_id}/inbox/cancel.json"
    assert denied(
        lambda: stack.start.s3.put_object(Bucket=BUCKET, Key=inbox, Body=b"{}", IfNoneMatch="*")
    )
    assert denied(
        lambda: stack.start.s3.delete_object(Bucket=BUCKET, Key=f"{PREFIX}/{task_id}/record.json")
    )


# -- the operator policy ------------------------------------------------------------------------


def test_the_operator_policy_inspects_earlier_versions_and_retries_a_fixed_failure(stack):
    operator = stack.operator.app.client()
    task_id = stack.start.app.client().start("broken", {"note": "tide"})
    stack.work(task_id, until={Status.FAILED})
    view = inspect_task(stack.operator.app.records, task_id)
    assert len(view.checkpoints) >= 2
    assert view.checkpoints[0].status == Status.PENDING

    FIX["deployed"] = True
    operator.retry(task_id)
    stack.work(task_id, until={Status.SUCCEEDED})
    assert operator.status(task_id).result == len("tide")


def test_the_operator_policy_forks_a_task_from_an_earlier_version(stack):
    operator = stack.operator.app.client()
    task_id = stack.start.app.client().start("broken", {"note": LARGE_NOTE})
    stack.work(task_id, until={Status.FAILED})
    first = inspect_task(stack.operator.app.records, task_id).checkpoints[0]
    FIX["deployed"] = True
    fork = operator.fork(task_id, version=first.version_id or "", new_id=f"fork-{uuid.uuid4().hex}")
    stack.work(fork, until={Status.SUCCEEDED})
    assert operator.status(fork).result == len(LARGE_NOTE)


def test_the_operator_policy_signals_and_cancels(stack):
    operator = stack.operator.app.client()
    signalled = stack.start.app.client().start("hold", {"note": ""})
    cancelled = stack.start.app.client().start("hold", {"note": ""})
    stack.work(signalled, cancelled, until={Status.WAITING})
    operator.signal(signalled, "go", {"ok": True})
    operator.cancel(cancelled, "not needed")
    stack.work(signalled, cancelled, until={Status.SUCCEEDED, Status.CANCELLED})
    assert operator.status(signalled).result == {"ok": True}
    assert operator.status(cancelled).status == Status.CANCELLED


def test_the_operator_policy_writes_records_only_by_compare_and_swap_or_create():
    # moto ignores these conditions too: the document must carry them.
    conditions = {
        json.dumps(statement.get("Condition"), sort_keys=True)
        for statement in s3_writes(template_policies()["operator"])
        if any(not r.endswith("/inbox/*") for r in _listed(statement["Resource"]))
    }
    assert conditions == {
        json.dumps({"Null": {"s3:if-match": "false"}}),
        json.dumps({"Null": {"s3:if-none-match": "false"}}),
    }
