"""The callback link function's role, enforced by moto's IAM: it shows a link's page and
answers it (the task wakes and takes the answer), and may write nothing but callback answers."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
import yaml
from moto import mock_aws
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from continuum._waits.link_endpoint import LinkEndpoint
from continuum.scaffold import render_template
from tests.security import test_policies as policies
from tests.security.test_policies import (
    ACCOUNT,
    BUCKET,
    PREFIX,
    QUEUE,
    REGION,
    Principal,
    Stack,
    _CloudFormation,
    denied,
    iam_enforced,
)

BASE = "https://links.example.test"


class Ask(BaseModel):
    what: str = "ship v2"


def link_app() -> Continuum:
    app = Continuum(signing_key="policy-key", callback_url=BASE, default_step_s=0.05)

    @app.task(state=Ask)
    def ask(ctx: TaskContext[Ask]) -> Any:
        return ctx.create_callback("go", timeout=600, request={"what": ctx.state.what}).result()

    return app


def _user(iam: Any, name: str, document: dict[str, Any]) -> dict[str, str]:
    import json

    arn = iam.create_policy(PolicyName=name, PolicyDocument=json.dumps(document))["Policy"]["Arn"]
    iam.create_user(UserName=name)
    iam.attach_user_policy(UserName=name, PolicyArn=arn)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {
        "region_name": REGION,
        "aws_access_key_id": key["AccessKeyId"],
        "aws_secret_access_key": key["SecretAccessKey"],
    }


@pytest.fixture
def link_stack(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    log_group = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/links"
    monkeypatch.setitem(policies.NAMES, "CallbackLinkLogGroup.Arn", log_group)
    resources = yaml.load(render_template("reference"), Loader=_CloudFormation)["Resources"]
    role = resources["CallbackLinkRole"]
    assert role["Condition"] == "UseCallbackLinks"
    documents = {
        "worker": policies.template_policies()["worker"],
        "links": policies._resolve(role["Properties"]["Policies"][0]["PolicyDocument"]),
    }
    with mock_aws():
        s3, sqs = boto3.client("s3", region_name=REGION), boto3.client("sqs", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        sqs.create_queue(QueueName=QUEUE)
        iam = boto3.client("iam", region_name=REGION)
        made = {}
        for name, document in documents.items():
            options = _user(iam, name, document)
            made[name] = Principal(
                boto3.client("s3", **options), boto3.client("sqs", **options), app=link_app()
            )
        with iam_enforced():
            yield made


def test_the_link_role_shows_and_answers_a_link_and_the_task_takes_it(link_stack):
    worker, links = link_stack["worker"], link_stack["links"]
    run = Stack(start=worker, operator=worker, worker=worker)
    task_id = worker.app.client().start("ask", {})
    run.work(task_id, until={Status.WAITING})
    [waiter] = worker.app.client().status(task_id).waiting_for
    assert waiter.url is not None
    path = waiter.url.removeprefix(BASE)
    endpoint = LinkEndpoint.of(links.app)
    assert endpoint.handle("GET", path, "", b"").status == HTTPStatus.OK
    form = "application/x-www-form-urlencoded"
    body = urlencode({"decision": "approve", "comment": "fine"}).encode()
    assert endpoint.handle("POST", path, form, body).status == HTTPStatus.OK
    assert endpoint.handle("POST", path, form, body).status == HTTPStatus.CONFLICT
    run.work(task_id, until={Status.SUCCEEDED})
    assert worker.app.client().result(task_id) == {"approved": True, "comment": "fine"}
    # It may write nothing but callback answers, and take nothing from the queue.
    record = f"{PREFIX}/{task_id}/record.json"
    s3, sqs = links.s3, links.sqs
    assert denied(lambda: s3.put_object(Bucket=BUCKET, Key=record, Body=b"{}"))
    assert denied(lambda: s3.delete_object(Bucket=BUCKET, Key=record))
    signal = f"{PREFIX}/{task_id}/inbox/signals/go/x.json"
    assert denied(lambda: s3.put_object(Bucket=BUCKET, Key=signal, Body=b"{}"))
    assert denied(
        lambda: s3.put_object(
            Bucket=BUCKET, Key=f"{PREFIX}/{task_id}/inbox/cancel.json", Body=b"{}"
        )
    )
    assert denied(lambda: sqs.receive_message(QueueUrl=links.queue_url))
