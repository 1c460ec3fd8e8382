"""Lambda SnapStart's hooks (continuum._app.snapstart), without Lambda.

Lambda's python runtimes ship ``snapshot_restore_py``; here a stand-in records what is
registered. The handlers register the app's hooks where the module exists and nothing where it
does not; the after-restore hook reseeds ``random`` and has the app make new clients, a new
worker (no warm records) and read its signing keys again on the next message.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from continuum import Continuum, TaskRecord
from continuum._app import snapstart
from continuum._base.signing_keys import clear_cache
from continuum._local.lambda_emulation import LocalLambdaContext

ROOT = Path(__file__).resolve().parents[1]
BUCKET = "continuum-state"
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/continuation"
# A message the worker drops unread (a body that is not JSON): the worker is made, the store
# and the queue are not called.
MALFORMED = json.loads((ROOT / "tests" / "events" / "sqs_malformed_batch.json").read_text())
DROPPED = {"Records": MALFORMED["Records"][:1]}

STAND_IN = '''\
"""A stand-in for Lambda's snapshot_restore_py: it records the hooks registered."""
before, after = [], []


def register_before_snapshot(func, *args, **kwargs):
    before.append((func, args, kwargs))
    return func


def register_after_restore(func, *args, **kwargs):
    after.append((func, args, kwargs))
    return func
'''

PROBE = """\
import importlib, json, sys
module = importlib.import_module(sys.argv[1])
hooks = sys.modules.get("snapshot_restore_py")
def named(found):
    return [[f"{f.__module__}.{f.__qualname__}", [a is module.app for a in args]]
            for f, args, _ in found]
print(json.dumps({
    "handler": callable(module.handler),
    "before": named(hooks.before) if hooks else None,
    "after": named(hooks.after) if hooks else None,
}))
"""


def import_handler(module: str, tmp_path: Path, *, stand_in: bool) -> dict[str, Any]:
    """Import a handler module in a fresh interpreter, as Lambda's init would."""
    path = [str(ROOT)]
    if stand_in:
        (tmp_path / "snapshot_restore_py.py").write_text(STAND_IN)
        path.append(str(tmp_path))
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.pathsep.join(path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "CONTINUUM_APP": "samples.research_agent:app",
        "CONTINUUM_BUCKET": BUCKET,
        "CONTINUUM_QUEUE_URL": QUEUE_URL,
    }
    result = subprocess.run(
        [sys.executable, "-c", PROBE, module],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return report


@pytest.mark.parametrize("module", ["handlers.worker", "handlers.dead_letter"])
def test_importing_a_handler_registers_the_apps_hooks_where_the_runtime_has_them(
    module: str, tmp_path: Path
) -> None:
    report = import_handler(module, tmp_path, stand_in=True)
    assert report == {
        "handler": True,
        "before": [["continuum._app.snapstart.before_snapshot", [True]]],
        "after": [["continuum._app.snapstart.after_restore", [True]]],
    }


@pytest.mark.parametrize("module", ["handlers.worker", "handlers.dead_letter"])
def test_without_the_runtimes_module_a_handler_registers_nothing_and_imports(
    module: str, tmp_path: Path
) -> None:
    report = import_handler(module, tmp_path, stand_in=False)
    assert report == {"handler": True, "before": None, "after": None}


def test_register_reports_whether_the_hooks_were_registered(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    app = Continuum()
    assert app.register_snapstart_hooks() is False  # no snapshot_restore_py here
    (tmp_path / "snapshot_restore_py.py").write_text(STAND_IN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "snapshot_restore_py", raising=False)
    assert app.register_snapstart_hooks() is True
    hooks = sys.modules["snapshot_restore_py"]
    assert [(f, a) for f, a, _ in hooks.before] == [(snapstart.before_snapshot, (app,))]  # type: ignore[attr-defined]
    assert [(f, a) for f, a, _ in hooks.after] == [(snapstart.after_restore, (app,))]  # type: ignore[attr-defined]


class FakeClient:
    """A boto3 client of one service: the SSM call continuum makes, nothing else."""

    def __init__(self, service: str, reads: list[str]) -> None:
        self.service = service
        self.reads = reads

    def get_parameter(self, *, Name: str, WithDecryption: bool) -> dict[str, Any]:
        self.reads.append(Name)
        return {"Parameter": {"Value": "key-1"}}


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Any]]]:
    """boto3.client, counted: "clients" made (by service) and the SSM "reads"."""
    import boto3

    found: dict[str, list[Any]] = {"clients": [], "reads": []}

    def client(service: str, *args: Any, **kwargs: Any) -> FakeClient:
        found["clients"].append(service)
        return FakeClient(service, found["reads"])

    monkeypatch.setattr(boto3, "client", client)
    monkeypatch.setenv("CONTINUUM_SIGNING_KEY_PARAMETER", "/continuum/signing-key")
    monkeypatch.delenv("CONTINUUM_SIGNING_KEY", raising=False)
    clear_cache()
    yield found
    clear_cache()


def message(app: Continuum) -> None:
    """A message: the app's worker made (with its records and continuations) if it is not."""
    assert app.handler(DROPPED, LocalLambdaContext(60)) == {"batchItemFailures": []}


def test_after_a_restore_the_next_message_makes_new_clients_and_reads_the_keys_again(
    made: dict[str, list[Any]],
) -> None:
    app = Continuum(bucket=BUCKET, queue_url=QUEUE_URL)
    message(app)
    message(app)  # a warm environment keeps what it made
    assert (sorted(made["clients"]), made["reads"]) == (
        ["s3", "sqs", "ssm"],
        ["/continuum/signing-key"],
    )
    first = (app.records.store, app.continuations.queue)

    snapstart.after_restore(app)
    message(app)
    assert sorted(made["clients"]) == ["s3", "s3", "sqs", "sqs", "ssm", "ssm"]
    assert made["reads"] == ["/continuum/signing-key"] * 2
    assert app.settings.signing_keys == ("key-1",)
    assert app.records.store is not first[0]
    assert app.continuations.queue is not first[1]


def test_after_a_restore_the_clients_given_to_the_app_are_kept(
    made: dict[str, list[Any]],
) -> None:
    s3, sqs = FakeClient("s3", []), FakeClient("sqs", [])
    app = Continuum(bucket=BUCKET, queue_url=QUEUE_URL, s3_client=s3, sqs_client=sqs)  # type: ignore[arg-type]
    message(app)
    snapstart.after_restore(app)
    message(app)
    assert made["clients"] == ["ssm", "ssm"]  # only the keys' client was the app's to make
    assert app._backends.config.s3_client is s3
    assert app._backends.config.sqs_client is sqs


def test_after_a_restore_the_keys_given_to_the_app_are_kept(
    made: dict[str, list[Any]],
) -> None:
    app = Continuum(bucket=BUCKET, queue_url=QUEUE_URL, signing_key="given")
    message(app)
    snapstart.after_restore(app)
    message(app)
    assert app.settings.signing_keys == ("given",)
    assert made["reads"] == []


def test_after_a_restore_the_worker_remembers_no_record(made: dict[str, list[Any]]) -> None:
    app = Continuum(bucket=BUCKET, queue_url=QUEUE_URL)
    message(app)
    warm = app._worker
    assert warm is not None
    warm.recent.keep(TaskRecord(task_id="t-1", task_name="crawl", state={}), "etag-1")
    snapstart.after_restore(app)
    message(app)
    assert app._worker is not None
    assert app._worker is not warm
    assert app._worker.recent._records == {}


def test_two_environments_restored_from_one_snapshot_draw_different_numbers() -> None:
    random.seed(23)  # the generator's state, as the snapshot holds it
    snapshot = random.getstate()
    without = []
    for _ in range(2):
        random.setstate(snapshot)
        without.append([random.random() for _ in range(4)])
    assert without[0] == without[1]  # what a restore alone gives each environment
    drawn = []
    for _ in range(2):
        random.setstate(snapshot)
        snapstart.after_restore(Continuum())
        drawn.append([random.random() for _ in range(4)])
    assert drawn[0] != drawn[1]


def test_before_the_snapshot_the_first_uses_modules_and_models_are_loaded(
    made: dict[str, list[Any]],
) -> None:
    app = Continuum(bucket=BUCKET, queue_url=QUEUE_URL)
    snapstart.before_snapshot(app)
    for module in snapstart.FIRST_USE_MODULES:
        assert module in sys.modules
    assert made["clients"] == list(snapstart.FIRST_USE_SERVICES)  # made and dropped
    assert made["reads"] == []  # the keys are read after the restore, never into the snapshot
    assert app._worker is None
