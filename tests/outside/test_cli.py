"""The continuum command behaves: one-line errors, no default app, no markup, no moto needed.

Most run ``main()`` in this process on moto; what needs a process of its own (Ctrl-C, an
install without ``continuum-lambda[local]``) runs one.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import boto3
import pytest

from continuum.cli import build_parser, main
from tests.outside.ledger_app import app, ledger_lines
from tests.outside.processes import Command, base_env, cli, dev_stack, wait_until
from tests.support import moto_backend

CREATE_HINT = (
    "deploy the stack (sam deploy --guided; its CliEnvironment output sets them) or run "
    "`continuum dev` locally and paste the export line it prints"
)


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def no_stack_env(monkeypatch):
    for name in ("CONTINUUM_BUCKET", "CONTINUUM_QUEUE_URL", "CONTINUUM_APP", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def bucket(no_stack_env):
    with moto_backend():
        boto3.client("s3").create_bucket(Bucket="records")
        yield "records"


def commands() -> dict[str, object]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    return dict(sub.choices)


def test_every_command_has_help_without_markup():
    assert set(commands()) == {
        "init", "run", "dev", "start", "status", "resume", "signal", "cancel", "callback",
        "list", "inspect", "cost", "retry", "fork", "ui", "worker", "schedules",
    }  # fmt: skip
    for name, parser in commands().items():
        text = parser.format_help()
        for markup in ("[bold", "[/", "[red", "**", "`"):
            assert markup not in text, (name, markup)


POSITIVE = "must be a positive number of seconds, got"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "m:t", "--budget", "-1"], f"argument --budget: {POSITIVE} '-1'"),
        (["run", "m:t", "--budget", "0"], f"argument --budget: {POSITIVE} '0'"),
        (["dev", "m:a", "--budget", "nan"], f"argument --budget: {POSITIVE} 'nan'"),
        (["worker", "m:a", "--budget", "inf"], f"argument --budget: {POSITIVE} 'inf'"),
        (["worker", "m:a", "--grace", "-5"], f"argument --grace: {POSITIVE} '-5'"),
        (
            ["worker", "m:a", "--concurrency", "0"],
            "argument --concurrency: must be a positive whole number, got '0'",
        ),
    ],
)
def test_an_invalid_flag_is_a_one_line_error(capsys, argv, message):
    code, out, err = run_main(capsys, *argv)
    assert (code, out) == (2, "")
    command = f"continuum {argv[0]}"
    assert err.splitlines() == [f"{command}: error: {message} (see {command} --help)"]


@pytest.mark.parametrize(
    "argv",
    [
        ["start", "count", "--bucket", "b", "--queue-url", "q", "--region", "eu-west-1"],
        ["worker", "--bucket", "b", "--queue-url", "q", "--region", "eu-west-1"],
        ["dev"],
    ],
)
def test_there_is_no_default_app(capsys, no_stack_env, argv):
    code, _, err = run_main(capsys, *argv)
    assert code == 2
    assert err.startswith(f"error: continuum {argv[0]} needs the app: pass MODULE:APP")
    assert "CONTINUUM_APP" in err
    assert len(err.splitlines()) == 1


def test_status_needs_no_app_at_all(capsys, bucket, monkeypatch):
    app.configure(bucket=bucket, queue_url=_queue())
    task_id = app.client().start("count", {"n": 1, "ledger": "/dev/null"}, task_id="seen")
    monkeypatch.setenv("CONTINUUM_APP", "no_such_module:app")  # never imported
    code, out, err = run_main(capsys, "status", task_id, "--bucket", bucket)
    assert (code, err) == (0, "")
    assert json.loads(out)["status"] == "pending"
    assert "no_such_module" not in sys.modules


def test_a_missing_region_is_a_one_line_error(capsys, no_stack_env, monkeypatch):
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    code, _, err = run_main(capsys, "status", "t1", "--bucket", "records")
    assert code == 2
    assert err.splitlines() == [
        "error: no AWS region: pass --region or set AWS_REGION (the stack's CliEnvironment "
        "output and `continuum dev` set AWS_DEFAULT_REGION)"
    ]


def test_no_bucket_and_a_missing_bucket_name_what_creates_one(capsys, bucket):
    code, _, err = run_main(capsys, "status", "t1")
    assert code == 2
    assert err.splitlines() == [
        f"error: no bucket: pass --bucket or set CONTINUUM_BUCKET; {CREATE_HINT}"
    ]
    code, _, err = run_main(capsys, "status", "t1", "--bucket", "nope")
    assert code == 2
    assert err.splitlines() == [f"error: the bucket 'nope' does not exist: {CREATE_HINT}"]


def test_a_start_whose_queue_is_missing_names_the_task_and_how_to_resume_it(capsys, bucket):
    missing = "https://sqs.us-east-1.amazonaws.com/123456789012/nope"
    argv = ["start", "count", "--input", '{"n": 1, "ledger": "/dev/null"}', "--task-id", "t9"]
    argv += ["--app", "tests.outside.ledger_app:app", "--bucket", bucket, "--queue-url", missing]
    code, _, err = run_main(capsys, *argv)
    assert code == 2
    assert err.splitlines() == [
        f"error: task t9 was created, but its first continuation was not sent: the queue "
        f"{missing!r} does not exist: {CREATE_HINT}. Once the queue is right: continuum resume t9"
    ]
    code, out, _ = run_main(capsys, "status", "t9", "--bucket", bucket)
    assert json.loads(out)["status"] == "pending"
    code, _, err = run_main(capsys, "resume", "t9", "--bucket", bucket)
    assert code == 2
    assert err.startswith(
        "error: no continuation queue: pass --queue-url or set CONTINUUM_QUEUE_URL"
    )


def test_an_endpoint_that_does_not_answer_is_one_line(capsys, no_stack_env, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    argv = ["status", "t1", "--bucket", "b", "--endpoint-url", "http://127.0.0.1:9"]
    code, _, err = run_main(capsys, *argv)
    assert code == 2
    assert err.splitlines() == [
        "error: cannot reach http://127.0.0.1:9: is `continuum dev` running there?"
    ]


def test_init_writes_a_project_and_refuses_a_directory_that_is_not_empty(capsys, tmp_path):
    code, out, _ = run_main(capsys, "init", "my-agent", "--path", str(tmp_path / "p"))
    assert code == 0
    assert (tmp_path / "p" / "src" / "my_agent.py").exists()
    assert "continuum dev my_agent:app" in out
    code, _, err = run_main(capsys, "init", "my-agent", "--path", str(tmp_path / "p"))
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "is not empty" in err


def test_ctrl_c_during_run_suspends_the_task_prints_its_id_and_exits_130(tmp_path):
    ledger = tmp_path / "ledger"
    state = json.dumps({"n": 100, "ledger": str(ledger), "step_s": 0.1})
    argv = ["run", "tests.outside.ledger_app:count", "--input", state, "--budget", "60"]
    run = Command(*argv, env=base_env())
    try:
        task_id = run.wait_for(r"running count as task (\w+) on moto").group(1)
        wait_until(lambda: len(ledger_lines(ledger)) >= 3, what="three steps")
        run.send(signal.SIGINT)
        assert run.wait(timeout=10) == 130, run.output()
    finally:
        run.stop()
    out = "\n".join(run.lines["stdout"])
    assert f"interrupted: task {task_id} is suspended at turn" in out
    assert "Traceback" not in run.output()
    assert len(ledger_lines(ledger)) < 100


BLOCK_LOCAL = """\
import sys
class NoLocal:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("moto", "rich"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoLocal())
from continuum.cli import main
sys.argv[0] = "continuum"
raise SystemExit(main())
"""


def test_a_plain_install_runs_everything_but_the_local_runtime(tmp_path):
    """As after `pip install continuum-lambda`, without [local]: no moto, no rich."""
    import subprocess

    def plain(*args: str, env: dict[str, str]):
        return subprocess.run(
            [sys.executable, "-c", BLOCK_LOCAL, *args], env=env, capture_output=True,
            text=True, timeout=60, check=False, cwd=Path(__file__).resolve().parents[2],
        )  # fmt: skip

    with dev_stack() as (_stack, env):
        assert plain("--help", env=env).returncode == 0
        for command in (
            ["run", "tests.outside.ledger_app:count", "--input", "{}"],
            ["dev", "m:app"],
        ):
            done = plain(*command, env={**env, "AWS_ENDPOINT_URL": ""})
            assert done.returncode == 2, done.stderr
            assert (
                done.stderr
                == "error: the local runtime needs moto: pip install 'continuum-lambda[local]'\n"
            )
        state = json.dumps({"n": 1, "ledger": str(tmp_path / "l")})
        app_env = {**env, "CONTINUUM_APP": "tests.outside.ledger_app:app"}
        started = plain("start", "count", "--input", state, env=app_env)
        assert started.returncode == 0, started.stderr
        task_id = started.stdout.strip()
        status = plain("status", task_id, env=env)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["status"] == "pending"
        assert plain("resume", task_id, env=env).returncode == 0
        assert plain("init", "tides", "--path", str(tmp_path / "t"), env=env).returncode == 0
        assert cli("status", task_id, env=env).returncode == 0


def _queue() -> str:
    return boto3.client("sqs").create_queue(QueueName="continuations")["QueueUrl"]


@pytest.mark.parametrize("source", ["CONTINUUM_SIGNING_KEY", "CONTINUUM_SIGNING_KEY_PARAMETER"])
def test_the_cli_signs_with_the_key_the_functions_read(capsys, bucket, monkeypatch, source):
    """resume needs no app, and still signs: the key comes from the environment, or SSM."""
    from tests.support import clear_cache, decode_message

    if source == "CONTINUUM_SIGNING_KEY":
        monkeypatch.setenv(source, "k-new, k-old")
    else:
        boto3.client("ssm").put_parameter(
            Name="/continuum/signing-key", Value="k-new,k-old", Type="SecureString"
        )
        monkeypatch.setenv(source, "/continuum/signing-key")
    clear_cache()
    queue_url = _queue()
    app.configure(bucket=bucket, queue_url=queue_url)
    app.client().start("count", {"n": 1, "ledger": "/dev/null"}, task_id="signed")
    sqs = boto3.client("sqs")
    sqs.purge_queue(QueueUrl=queue_url)
    code, out, err = run_main(
        capsys, "resume", "signed", "--bucket", bucket, "--queue-url", queue_url
    )
    assert (code, err) == (0, "")
    assert out == "sent the continuation of generation 0 of signed\n"
    (body,) = [m["Body"] for m in sqs.receive_message(QueueUrl=queue_url)["Messages"]]
    assert decode_message(body, signing_key="k-new").task_id == "signed"
    with pytest.raises(Exception, match="signature"):
        decode_message(body, signing_key="someone-else")
    clear_cache()
