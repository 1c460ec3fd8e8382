"""Review of ``continuum start`` reading the task's declaration from the app module's source.

Each test is a plain-looking app for which the record (or the error) that ``start`` gives by
reading the source differs from the one it gives when it imports the app: the code at the app
module's top level (or in a module it imports first) changes what the state model accepts, and
the reading never runs it. Each test says what it observed and what it expects.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import boto3
import pytest

from continuum.cli import declaration, main
from tests.outside.test_cli_start_reads_the_declaration import Project, objects, record
from tests.support import moto_backend


@pytest.fixture
def stack(monkeypatch) -> Iterator[list[str]]:
    for name in ("CONTINUUM_BUCKET", "CONTINUUM_QUEUE_URL", "CONTINUUM_APP", "CONTINUUM_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("CONTINUUM_SIGNING_KEY", raising=False)
    with moto_backend():
        boto3.client("s3").create_bucket(Bucket="records")
        queue = boto3.client("sqs").create_queue(QueueName="continuations")["QueueUrl"]
        yield ["--bucket", "records", "--queue-url", queue]


@pytest.fixture
def project(tmp_path, monkeypatch) -> Iterator[Project]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    made = Project(tmp_path)
    yield made
    for module in made.written:
        sys.modules.pop(module, None)


HEAD = "from continuum import Continuum, TaskContext\n"

TASK = """
app = Continuum()


@app.task(state=Chat)
def support(ctx: TaskContext[Chat]) -> str:
    return ctx.state.question
"""


def outcome(capsys, stack, app: str, prefix: str, input: dict) -> tuple[int, object]:
    """What ``start support`` gives: its exit code and the record it created (without its
    moments), or the error it printed or raised."""
    argv = ["start", "support", "--input", json.dumps(input), "--app", f"{app}:app"]
    argv += [*stack, "--task-id", "t-1", "--prefix", prefix]
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    except Exception as exc:  # what the person sees: a traceback
        capsys.readouterr()
        return -1, f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    _, err = capsys.readouterr()
    if code != 0:
        return code, err.strip().splitlines()[0]
    created = record("t-1", prefix=prefix)
    for moment in ("created_at", "updated_at"):
        created.pop(moment)
    return code, created


def read_and_imported(capsys, stack, project, monkeypatch, app: str, input: dict):
    """The outcome of start reading the source, then of start importing the app."""
    read = outcome(capsys, stack, app, "read", input)
    monkeypatch.setattr(declaration, "read_declaration", lambda target, task: None)
    imported = outcome(capsys, stack, app, "full", input)
    assert project.loaded("app")
    return read, imported


LIMITED = """
from pydantic import BaseModel, Field, field_validator

LIMIT = 1000


def limit_questions_to(characters: int) -> None:
    global LIMIT
    LIMIT = characters


class Chat(BaseModel):
    question: str

    @field_validator("question")
    @classmethod
    def short(cls, value: str) -> str:
        if len(value) > LIMIT:
            raise ValueError(f"at most {LIMIT} characters")
        return value


class ShortChat(BaseModel):
    question: str = Field(max_length=5)
"""

#: App modules that set what their model's validators read, or which model the task's state
#: names, in plain sight at the top level (the task's state: its name in the app module).
SETS_THE_MODEL = {
    "an assignment to the model's module": (
        "import {models}\nfrom {models} import Chat\n\n{models}.LIMIT = 5\n",
        "Chat",
    ),
    "a call of the model's module": (
        "from {models} import Chat, limit_questions_to\n\nlimit_questions_to(5)\n",
        "Chat",
    ),
    "the model replaced on its module": (
        "import {models}\nfrom {models} import Chat\n\n{models}.Chat = {models}.ShortChat\n",
        "{models}.Chat",
    ),
    "exec reached through builtins": (
        "import builtins\n\nfrom {models} import Chat\n\n"
        "builtins.exec('from {models} import ShortChat as Chat')\n",
        "Chat",
    ),
}


@pytest.mark.parametrize(("code", "state"), SETS_THE_MODEL.values(), ids=SETS_THE_MODEL.keys())
def test_an_app_module_that_configures_its_models_validation_refuses_the_same_input_either_way(
    capsys, stack, project, monkeypatch, code, state
):
    models = project.write("models", LIMITED)
    task = TASK.replace("state=Chat", f"state={state}").format(models=models)
    app = project.write("app", HEAD + code.format(models=models) + task)
    read, imported = read_and_imported(
        capsys, stack, project, monkeypatch, app, {"question": "a long question"}
    )
    # Observed: the read creates the task (0, its record); the import refuses it (2, "at most 5"
    # or "at most 5 characters").
    assert imported[0] == 2
    assert read == imported


FORWARD = """
from pydantic import BaseModel


class Chat(BaseModel):
    question: str
    notes: "list[Note]" = []
"""

NOTE = """
from pydantic import BaseModel


class Note(BaseModel):
    text: str
"""


def test_a_model_whose_forward_reference_the_app_module_resolves_starts_as_the_app_does(
    capsys, stack, project, monkeypatch
):
    models, notes = project.write("models", FORWARD), project.write("notes", NOTE)
    code = f"from {models} import Chat\nfrom {notes} import Note\n\nChat.model_rebuild()\n"
    app = project.write("app", HEAD + code + TASK)
    input = {"question": "where?", "notes": [{"text": "asked twice"}]}
    read, imported = read_and_imported(capsys, stack, project, monkeypatch, app, input)
    # Observed: the read raises PydanticUserError ("`Chat` is not fully defined") out of
    # `continuum start` as a traceback, where the import creates the task.
    assert imported[0] == 0
    assert read == imported


SETTINGS_MODEL = """
import os

from pydantic import BaseModel, Field

#: Read when the module is imported: the app's config module sets it first.
MAX_QUESTION = int(os.environ.get("REVIEW34_MAX_QUESTION", "1000"))


class Chat(BaseModel):
    question: str = Field(max_length=MAX_QUESTION)
"""

CONFIG = """
import os

os.environ["REVIEW34_MAX_QUESTION"] = "5"  # as a load_dotenv() in a settings module does
"""


def test_a_model_that_reads_what_a_module_imported_before_it_sets_refuses_as_the_worker_does(
    capsys, stack, project, monkeypatch
):
    monkeypatch.setenv("REVIEW34_MAX_QUESTION", "unset by the test")
    monkeypatch.delenv("REVIEW34_MAX_QUESTION")
    config, models = project.write("config", CONFIG), project.write("models", SETTINGS_MODEL)
    app = project.write(
        "app", HEAD + f"import {config}  # noqa: F401\nfrom {models} import Chat\n" + TASK
    )
    code, got = outcome(capsys, stack, app, "read", {"question": "a long question"})
    # Observed: 0 and a record whose question the worker's model (max_length=5) refuses.
    assert (code, objects()) == (2, [])
    assert "question" in str(got)


PREFIX_CONFIG = """
import os

os.environ["CONTINUUM_PREFIX"] = "desk"  # as a load_dotenv() of a .env that names it does
"""


def test_a_prefix_that_a_module_imported_by_the_app_sets_is_where_start_puts_the_record(
    capsys, stack, project, monkeypatch
):
    """docs/performance.md states this as an assumption start makes; a settings module that
    calls load_dotenv() is a common way to break it, and the task then never runs."""
    monkeypatch.setenv("CONTINUUM_PREFIX", "unset by the test")
    monkeypatch.delenv("CONTINUUM_PREFIX")
    config, models = project.write("config", PREFIX_CONFIG), project.write("models", LIMITED)
    app = project.write(
        "app", HEAD + f"import {config}  # noqa: F401\nfrom {models} import Chat\n" + TASK
    )
    argv = ["start", "support", "--input", '{"question": "q"}', "--app", f"{app}:app", *stack]
    assert main([*argv, "--task-id", "t-read"]) == 0
    monkeypatch.setattr(declaration, "read_declaration", lambda target, task: None)
    assert main([*argv, "--task-id", "t-imported"]) == 0
    # Observed: ['desk/t-imported/record.json', 'tasks/t-read/record.json'].
    assert sorted(objects()) == ["desk/t-imported/record.json", "desk/t-read/record.json"]


def test_a_model_module_that_imports_the_app_at_its_top_runs_the_app_module_once(
    capsys, stack, project, monkeypatch
):
    """The worker and the start before this change import the app once; its top-level code
    (a metrics client, a connection, a log line) runs once."""
    runs = project.root / "runs.txt"
    app_name = project.name("app")
    models = project.write("models", f"import {app_name}  # noqa: F401\n" + LIMITED)
    counted = f"with open({str(runs)!r}, 'a') as runs:\n    runs.write('ran\\n')\n"
    app = project.write("app", counted + HEAD + f"from {models} import Chat\n" + TASK)
    code, got = outcome(capsys, stack, app, "read", {"question": "q"})
    assert code == 0, got
    # Observed: 2 (the reading imports the models, which import the app, which fails on the
    # partly imported models; then start imports the app again).
    assert runs.read_text().count("ran") == 1
