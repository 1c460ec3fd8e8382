"""The commands a person runs many times a day load little beyond Python and botocore: each runs
its ``main`` in a fresh interpreter, which then holds no app, no runtime, no tracing, no test
tools and no boto3 (botocore makes the clients), and has made only the AWS clients it uses.
The timings are benchmarks/cli_start.py's; this is the structure that keeps them low.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.outside.processes import ROOT, cli, dev_stack

#: Run in a fresh interpreter: the command's main, then what it loaded and the clients it made.
RUN_MAIN = """
import json, sys
import botocore.session

made = []
create_client = botocore.session.Session.create_client

def counted(self, service_name, *args, **kwargs):
    made.append(service_name)
    return create_client(self, service_name, *args, **kwargs)

botocore.session.Session.create_client = counted
from continuum.cli import main

code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules), "clients": made}), file=sys.stderr)
"""

#: What none of them may load: the app, the task machinery and the runtimes, Powertools, the
#: integrations, tracing, test tools, boto3.
NOT_LOADED = (
    "continuum._app.app",
    "continuum._turn",
    "continuum._worker.worker",
    "continuum._worker.sqs_batch",
    "continuum._local.runtime",
    "continuum._local.dev_stack",
    "continuum._local.standalone",
    "continuum.integrations",
    "aws_lambda_powertools",
    "pydantic_ai",
    "opentelemetry",
    "moto",
    "freezegun",
    "boto3",
)


def run_main(*argv: str, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", RUN_MAIN, *argv], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    loaded["stderr"] = done.stderr
    return loaded


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m == "boto3" or m.startswith(NOT_LOADED)]


@pytest.fixture(scope="module")
def pending_task() -> Iterator[tuple[str, dict[str, str]]]:
    """A task started on a dev stack (no worker runs it), and the environment that reaches it."""
    with dev_stack() as (_stack, env):
        env = {**env, "CONTINUUM_APP": "tests.outside.ledger_app:app"}
        started = cli("start", "count", "--input", '{"n": 1, "ledger": "/dev/null"}', env=env)
        assert started.returncode == 0, started.stderr
        yield started.stdout.strip(), env


@pytest.mark.parametrize("command", ["status", "list", "inspect", "cost"])
def test_a_reading_command_loads_no_app_runtime_tracing_or_boto3_and_makes_only_an_s3_client(
    pending_task, command
):
    task_id, env = pending_task
    argv = [command] if command == "list" else [command, task_id]
    loaded = run_main(*argv, env=env)
    assert loaded["code"] == 0
    assert heavy(loaded["modules"]) == []
    assert loaded["clients"] == ["s3"]


@pytest.mark.parametrize(
    "command",
    [
        ["cancel", "{task_id}", "--reason", "not needed"],
        ["signal", "{task_id}", "nudge", "--payload", "1"],
    ],
)
def test_an_answering_command_loads_no_app_runtime_tracing_or_boto3_and_makes_one_client_each(
    pending_task, command
):
    task_id, env = pending_task
    loaded = run_main(*[part.format(task_id=task_id) for part in command], env=env)
    assert loaded["code"] == 0
    assert heavy(loaded["modules"]) == []
    assert sorted(loaded["clients"]) == ["s3", "sqs"]


def test_an_answer_to_a_callback_reads_the_record_loading_no_app_runtime_tracing_or_boto3(
    pending_task,
):
    task_id, env = pending_task
    loaded = run_main("callback", "complete", f"{task_id}.approve", "--answer", "approve", env=env)
    assert loaded["code"] == 2
    assert "is not open" in loaded["stderr"]
    assert heavy(loaded["modules"]) == []
    assert loaded["clients"] == ["s3"]
