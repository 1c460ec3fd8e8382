"""The Lambda entry points as Lambda calls them, and the CLI against a moto server."""

from __future__ import annotations

import gc
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from continuum import ConfigurationError
from tests.conftest import sqs_event
from tests.support import LocalLambdaContext, moto_backend

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.moto_only(
    reason="the Lambda entry points build their app from the environment, on boto3's clients"
)


@pytest.fixture
def lambda_env(monkeypatch):
    """moto, a bucket and a queue, and the environment the SAM template gives the function."""
    with moto_backend():
        s3 = boto3.client("s3", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        s3.create_bucket(Bucket="state")
        queue_url = sqs.create_queue(QueueName="continuations")["QueueUrl"]
        monkeypatch.setenv("CONTINUUM_BUCKET", "state")
        monkeypatch.setenv("CONTINUUM_QUEUE_URL", queue_url)
        monkeypatch.setenv("CONTINUUM_PREFIX", "tasks")
        monkeypatch.setenv("CONTINUUM_APP", "samples.research_agent:app")
        # A fresh import, as in a new Lambda execution environment.
        for name in ("handlers.worker", "handlers.dead_letter", "samples.research_agent"):
            sys.modules.pop(name, None)
        worker = importlib.import_module("handlers.worker")
        yield worker, sqs, queue_url
        for name in ("handlers.worker", "handlers.dead_letter", "samples.research_agent"):
            sys.modules.pop(name, None)
        gc.unfreeze()  # the import froze this whole test process's objects


def test_the_worker_import_freezes_what_it_made_and_leaves_the_collector_on(lambda_env):
    assert gc.isenabled()
    assert gc.get_freeze_count() > 10_000  # the modules, classes and schemas of the import


def test_the_worker_import_leaves_the_blob_store_records_to_the_first_message():
    env = {
        **os.environ,
        "CONTINUUM_APP": "samples.research_agent:app",
        "CONTINUUM_BUCKET": "state",
        "CONTINUUM_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONPATH": str(ROOT),
    }
    code = "import sys, handlers.worker; print('continuum._record.blob_records' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]


def test_a_worker_import_that_fails_leaves_the_collector_on(monkeypatch):
    monkeypatch.delenv("CONTINUUM_APP", raising=False)
    sys.modules.pop("handlers.worker", None)
    try:
        with pytest.raises(ConfigurationError, match="CONTINUUM_APP is not set"):
            importlib.import_module("handlers.worker")
        assert gc.isenabled()
    finally:
        sys.modules.pop("handlers.worker", None)
        gc.unfreeze()


def test_worker_handler_runs_a_whole_task_as_lambda_calls_it(lambda_env):
    worker, sqs, queue_url = lambda_env
    client = worker.app.client()
    task_id = client.start("research", {"topic": "kelp", "latency_scale": 0.02, "max_turns": 5})

    invocations = 0
    while not client.status(task_id).status.finished:
        received = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=1, MessageSystemAttributeNames=["All"]
        )
        assert received.get("Messages"), "an unfinished task must have a continuation waiting"
        message = received["Messages"][0]
        event = sqs_event(
            message["Body"], message_ids=[message["MessageId"]], receipt=message["ReceiptHandle"]
        )  # shape: tests/events/*.json
        response = worker.handler(event, LocalLambdaContext(0.35))
        invocations += 1
        assert response == {"batchItemFailures": []}
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        assert invocations < 50

    status = client.status(task_id)
    assert status.status == "succeeded"
    assert status.result.startswith("Report on kelp")
    assert status.counters.continuations >= 2
    assert invocations == status.counters.invocations


def test_worker_handler_reports_a_malformed_batch_item_without_failing_others(lambda_env):
    worker, _, _ = lambda_env
    with open(ROOT / "tests" / "events" / "sqs_malformed_batch.json") as f:
        event = json.load(f)
    response = worker.handler(event, LocalLambdaContext(5))
    assert response == {"batchItemFailures": []}  # bad input is acknowledged, not retried


@pytest.mark.slow
def test_cli_start_and_status_against_a_moto_server(tmp_path):
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        env = {
            **os.environ,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_ENDPOINT_URL": endpoint,
        }
        s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=endpoint)
        sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint)
        s3.create_bucket(Bucket="stack-bucket")
        queue_url = sqs.create_queue(QueueName="stack-queue")["QueueUrl"]
        env.update(
            CONTINUUM_BUCKET="stack-bucket",
            CONTINUUM_QUEUE_URL=queue_url,
            CONTINUUM_APP="samples.research_agent:app",
        )

        def cli(*args: str) -> str:
            done = subprocess.run(
                [sys.executable, "-m", "continuum.cli", *args],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        task_id = cli("start", "research", "--input", '{"topic": "moss", "max_turns": 2}').strip()
        assert json.loads(cli("status", task_id))["status"] == "pending"

        # A worker against the same server finishes it; the CLI sees the result.
        from samples import research_agent

        runtime_app = research_agent.app
        runtime_app.configure(
            bucket="stack-bucket", queue_url=queue_url, s3_client=s3, sqs_client=sqs
        )
        while json.loads(cli("status", task_id))["status"] != "succeeded":
            received = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1)
            for message in received.get("Messages", []):
                event = sqs_event(
                    message["Body"],
                    message_ids=[message["MessageId"]],
                    receipt=message["ReceiptHandle"],
                )
                runtime_app.handler(event, LocalLambdaContext(30))
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        assert json.loads(cli("status", task_id))["result"].startswith("Report on moss")
    finally:
        server.stop()


def test_worker_emits_outcome_metrics_when_a_namespace_is_set(lambda_env, monkeypatch, capsys):
    worker, sqs, queue_url = lambda_env
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "ContinuumTest")
    from continuum._worker.worker import Worker

    app = worker.app
    metered = Worker(
        app.registry, app.records, app.continuations, app.settings, child_client=app.client
    )
    task_id = worker.app.client().start("research", {"topic": "x", "max_turns": 1})
    message = sqs.receive_message(QueueUrl=queue_url)["Messages"][0]
    capsys.readouterr()
    metered.handle_batch(
        sqs_event(message["Body"], receipt=message["ReceiptHandle"]), LocalLambdaContext(30)
    )
    emitted = [
        json.loads(line)
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("{") and "_aws" in line
    ]
    assert emitted, "no EMF metric line printed"
    by_name = {}
    for line in emitted:
        for metric in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            by_name[metric["Name"]] = line
    assert by_name["succeeded"]["succeeded"] == [1.0]
    assert by_name["succeeded"]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ContinuumTest"
    # Per task: its end and the invocation's duration, with a task dimension.
    assert by_name["TaskSucceeded"]["task"] == "research"
    assert by_name["InvocationDuration"]["task"] == "research"
    assert by_name["InvocationDuration"]["InvocationDuration"][0] > 0
    assert worker.app.client().status(task_id).status == "succeeded"
