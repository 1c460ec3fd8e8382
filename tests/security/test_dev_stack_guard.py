"""The dev stack's moto server, as a page of another site (or a rebinding one) would reach it.

A browser page on the same machine can ``fetch()`` loopback and POST forms to it without a
preflight (``multipart/form-data``, ``text/plain``). Each attack here is one a page can make;
the SDKs' own calls must still get through.
"""

from __future__ import annotations

import json
import shlex
import signal
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import boto3
import pytest

from continuum._local.dev_stack import DevStack
from continuum._local.runtime import BUCKET, LocalRuntime
from tests.outside.processes import Command, base_env, cli
from tests.timeline.tasks import timeline_app

EVIL = "http://evil.example"
#: What a forged request may carry to pass every rule but the one under test.
FAKE_SIGNATURE = (
    "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, "
    "SignedHeaders=host, Signature=" + "0" * 64
)


@dataclass
class Waiting:
    stack: DevStack
    runtime: LocalRuntime
    #: Its own per test: every moto server of a process shares one state.
    task_id: str

    @property
    def record_key(self) -> str:
        return f"tasks/{self.task_id}/record.json"

    @property
    def port(self) -> int:
        return int(self.stack.endpoint.rsplit(":", 1)[1])

    def record_bytes(self) -> bytes:
        return self.stack.client("s3").get_object(Bucket=BUCKET, Key=self.record_key)["Body"].read()

    def status(self) -> str:
        return str(self.runtime.app.client().status(self.task_id).status)

    def keys(self) -> list[str]:
        listing = self.stack.client("s3").list_objects_v2(
            Bucket=BUCKET, Prefix=f"tasks/{self.task_id}/"
        )
        return [item["Key"] for item in listing.get("Contents", [])]


@pytest.fixture
def waiting() -> Iterator[Waiting]:
    """``ask`` waiting for its callback, its record on the dev stack's moto server."""
    with DevStack(port=0, budget_s=60) as stack:
        runtime = LocalRuntime(timeline_app(), budget_s=5, endpoint_url=stack.endpoint)
        task_id = f"ask-{uuid.uuid4().hex}"
        runtime.run("ask", {"note": ""}, task_id=task_id)
        yield Waiting(stack, runtime, task_id)


def request(
    url: str, data: bytes | None = None, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one HTTP request, whatever its status."""
    sent = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(sent, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers), refused.read()


def upload_form(key: str, content: bytes) -> tuple[bytes, str]:
    """An S3 POST-policy upload as an HTML form sends it: (body, Content-Type)."""
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="key"\r\n\r\n{key}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="x"\r\n'
            "Content-Type: application/json\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def test_a_page_of_another_origin_cannot_list_the_dev_stacks_tasks(waiting):
    status, headers, body = request(
        f"{waiting.stack.endpoint}/moto-api/data.json", Origin=EVIL, **{"Sec-Fetch-Mode": "cors"}
    )
    assert status == 403
    assert "Access-Control-Allow-Origin" not in headers
    assert waiting.task_id.encode() not in body


def test_form_posts_from_another_origin_cannot_finish_a_waiting_task_or_cancel_it(waiting):
    before = waiting.record_bytes()
    forged = json.loads(before)
    forged["status"] = "succeeded"
    cancel = json.dumps({"reason": "evil", "requested_at": "2026-01-01T00:00:00Z"}).encode()
    answers = []
    for key, content in [
        (waiting.record_key, json.dumps(forged).encode()),
        (f"tasks/{waiting.task_id}/inbox/cancel.json", cancel),
    ]:
        body, content_type = upload_form(key, content)
        answers.append(
            request(
                f"{waiting.stack.endpoint}/{BUCKET}",
                body,
                Origin=EVIL,
                **{"Content-Type": content_type},
            )
        )
    assert waiting.status() == "waiting"
    assert waiting.record_bytes() == before
    assert waiting.keys() == [waiting.record_key]
    assert [status for status, _, _ in answers] == [403, 403]
    assert not [h for _, h, _ in answers if "Access-Control-Allow-Origin" in h]


def test_a_text_plain_post_from_another_origin_cannot_delete_a_record(waiting):
    delete = f"<Delete><Object><Key>{waiting.record_key}</Key></Object></Delete>".encode()
    status, _, _ = request(
        f"{waiting.stack.endpoint}/{BUCKET}?delete",
        delete,
        Origin=EVIL,
        **{"Content-Type": "text/plain"},
    )
    assert waiting.keys() == [waiting.record_key]
    assert waiting.status() == "waiting"
    assert status == 403


def test_a_dns_rebinding_page_cannot_reach_the_dev_stack(waiting):
    # The rebinding page is same-origin with its own name: no Origin on a GET, its Host.
    for path in ["/moto-api/data.json", f"/{BUCKET}/{waiting.record_key}"]:
        status, _, body = request(
            f"{waiting.stack.endpoint}{path}",
            Host=f"evil.example:{waiting.port}",
            Authorization=FAKE_SIGNATURE,
        )
        assert status == 403
        assert waiting.task_id.encode() not in body


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"Origin": EVIL}, id="an Origin"),
        pytest.param({"Origin": "null"}, id="a sandboxed page's null Origin"),
        pytest.param({"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, id="Sec-Fetch"),
    ],
)
def test_a_browsers_request_is_refused_even_when_it_looks_signed(waiting, headers):
    status, _, body = request(
        f"{waiting.stack.endpoint}/{BUCKET}/{waiting.record_key}",
        Authorization=FAKE_SIGNATURE,
        **headers,
    )
    assert status == 403
    assert waiting.task_id.encode() not in body


def test_an_unsigned_request_is_refused(waiting):
    status, _, body = request(f"{waiting.stack.endpoint}/{BUCKET}/{waiting.record_key}")
    assert status == 403
    assert b"unsigned" in body


def test_moto_api_is_refused_even_to_a_signed_local_request(waiting):
    status, _, body = request(
        f"{waiting.stack.endpoint}/moto-api/data.json", Authorization=FAKE_SIGNATURE
    )
    assert status == 403
    assert waiting.task_id.encode() not in body


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_the_sdks_calls_still_reach_the_dev_stack(waiting, name):
    options = {
        "region_name": "us-east-1",
        "endpoint_url": f"http://{name}:{waiting.port}",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    s3, sqs = boto3.client("s3", **options), boto3.client("sqs", **options)
    assert json.loads(s3.get_object(Bucket=BUCKET, Key=waiting.record_key)["Body"].read())[
        "status"
    ] == ("waiting")
    presigned = s3.generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": waiting.record_key}
    )
    assert request(presigned)[0] == 200
    # A queue of its own: dev stacks in one process share moto's state, and other tests' tasks.
    queue_url = sqs.create_queue(QueueName=f"guard-{uuid.uuid4().hex}")["QueueUrl"]
    sqs.send_message(QueueUrl=queue_url, MessageBody="hello")
    received = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1)["Messages"]
    assert [message["Body"] for message in received] == ["hello"]
    # And the task goes on: a callback answered through the client finishes it.
    client = waiting.runtime.app.client()
    [waiter] = client.status(waiting.task_id).waiting_for
    client.complete_callback(waiter.id or "", {"approved": True})
    waiting.runtime.drive(waiting.task_id)
    assert waiting.status() == "succeeded"


def test_a_presigned_url_of_either_signature_version_still_reads_its_object(waiting):
    from botocore.config import Config

    for version in ["s3", "s3v4"]:
        s3 = boto3.client(
            "s3",
            region_name="us-east-1",
            endpoint_url=waiting.stack.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(signature_version=version),
        )
        url = s3.generate_presigned_url(
            "get_object", Params={"Bucket": BUCKET, "Key": waiting.record_key}
        )
        status, _, body = request(url)
        assert (status, json.loads(body)["status"]) == (200, "waiting"), version


@pytest.mark.slow  # starts `continuum dev` in a subprocess
def test_a_running_continuum_dev_refuses_a_page_of_another_origin_and_serves_the_cli():
    dev = Command(
        "dev", "tests.outside.ledger_app:app", "--port", "0", "--no-ui", "--no-reload",
        "--grace", "2", env=base_env(),
    )  # fmt: skip
    try:
        exports = dev.wait_for(r"^  export (.*)$").group(1)
        env = base_env(**dict(item.split("=", 1) for item in shlex.split(exports)))
        endpoint = env["AWS_ENDPOINT_URL"]
        status, headers, body = request(f"{endpoint}/moto-api/data.json", Origin=EVIL)
        assert (status, "Access-Control-Allow-Origin" in headers) == (403, False)
        body, content_type = upload_form("tasks/t/record.json", b'{"status": "succeeded"}')
        status, _, _ = request(
            f"{endpoint}/{env['CONTINUUM_BUCKET']}",
            body,
            Origin=EVIL,
            **{"Content-Type": content_type},
        )
        assert status == 403
        # What the export line points at still works: the CLI, through boto3.
        missing = cli("status", "t", env=env)
        assert "no record for this task" in missing.stdout + missing.stderr, missing
        dev.send(signal.SIGINT)
        assert dev.wait(timeout=15) == 0, dev.output()
    finally:
        dev.stop()
