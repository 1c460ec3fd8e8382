"""``continuum start`` checks the input without importing the app when the task's declaration is
plain: the app module's source is read, only the state model's own module is imported, and the
record is the one the app's own client would create. Any other form imports the app, as before.

Each test writes its app and its models as fresh modules (unique names) in a temporary directory.
"""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from continuum.cli import declaration, main
from tests.support import moto_backend

#: A state model with what makes its validated, stored form differ from the plain input:
#: serialization settings, an alias, defaults (one holding a 'metadata' key), extra='allow'
#: and validators.
MODELS = """
from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Chat(BaseModel):
    model_config = ConfigDict(
        extra="allow", populate_by_name=True, ser_json_timedelta="float", ser_json_bytes="hex"
    )

    question: str = Field(alias="q")
    wait: timedelta = timedelta(minutes=2)
    raw: bytes = b"ab"
    options: dict[str, int] = {"metadata": 1}

    @field_validator("question")
    @classmethod
    def shout(cls, value: str) -> str:
        return value.upper()

    @model_validator(mode="after")
    def counted(self) -> "Chat":
        self.options = {**self.options, "length": len(self.question)}
        return self
"""

INPUT = {"q": "where is my parcel?", "wait": 90, "extra_field": [1, 2]}

#: The app's head: the model's module, and (with ``boom``) a line that raises if the app's code
#: ever runs (a call of a builtin: a kind of statement the reading allows; a module of the
#: project imported by the app is doubt, so it cannot be the tripwire).
HEAD = """
from continuum import Continuum, TaskContext
{models_import}
{boom}
"""
BOOM = "RAN = int('the app module was run')\n"


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


class Project:
    """Modules of one test, under names no other test uses."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tag = uuid.uuid4().hex[:8]
        self.written: list[str] = []

    def name(self, base: str) -> str:
        return f"{base}_{self.tag}"

    def write(self, base: str, text: str) -> str:
        module = self.name(base)
        (self.root / f"{module}.py").write_text(textwrap.dedent(text).lstrip())
        self.written.append(module)
        return module

    def app(
        self, body: str, *, models_import: str = "from {models} import Chat", boom: bool = True
    ) -> str:
        """The app module, beside its models and (with ``boom``) raising when it is run; its
        name."""
        models = self.write("models", MODELS)
        head = HEAD.format(
            boom=BOOM if boom else "", models_import=models_import.format(models=models)
        )
        return self.write("app", head + textwrap.dedent(body).format(models=models))

    def loaded(self, base: str) -> bool:
        return self.name(base) in sys.modules


@pytest.fixture
def project(tmp_path, monkeypatch) -> Iterator[Project]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    made = Project(tmp_path)
    yield made
    for module in made.written:
        sys.modules.pop(module, None)


def start(capsys, stack: list[str], app: str, task: str, *more: str, input=INPUT):
    argv = ["start", task, "--input", json.dumps(input), "--app", f"{app}:app", *stack, *more]
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out.strip(), err


def record(task_id: str, prefix: str = "tasks") -> dict:
    body = boto3.client("s3").get_object(Bucket="records", Key=f"{prefix}/{task_id}/record.json")
    return json.loads(body["Body"].read())


def objects() -> list[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket="records")
    return [o["Key"] for o in listed.get("Contents", [])]


def messages(queue_url: str) -> list[dict]:
    got = boto3.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
    return [json.loads(m["Body"]) for m in got.get("Messages", [])]


PLAIN = """
app = Continuum()


@app.step
def answer(question: str) -> str:
    return question


@app.task(state=Chat)
def support(ctx: TaskContext[Chat]) -> str:
    return answer(ctx.state.question)
"""


@pytest.mark.parametrize(
    ("models_import", "state"),
    [
        ("from {models} import Chat", "Chat"),
        ("from {models} import Chat as Question", "Question"),
        ("import {models}", "{models}.Chat"),
        ("import {models} as models", "models.Chat"),
    ],
)
def test_a_plain_declaration_starts_the_task_without_running_the_app_module(
    capsys, stack, project, models_import, state
):
    app = project.app(PLAIN.replace("state=Chat", f"state={state}"), models_import=models_import)
    code, task_id, err = start(capsys, stack, app, "support")
    assert (code, err) == (0, "")
    assert not project.loaded("app")
    assert project.loaded("models")
    created = record(task_id)
    assert created["task_name"] == "support"
    assert created["state"]["question"] == "WHERE IS MY PARCEL?"
    assert [m["task_id"] for m in messages(stack[3])] == [task_id]


def test_literal_names_versions_and_app_settings_are_the_ones_the_app_would_use(
    capsys, stack, project
):
    body = """
    app = Continuum(prefix="support-desk", max_state_bytes=100_000)


    @app.task(state=Chat, name="desk", version=3, confidence=0.9)
    def support(ctx: TaskContext[Chat]) -> str:
        return ctx.state.question
    """
    app = project.app(body)
    code, task_id, err = start(capsys, stack, app, "desk", "--task-id", "t-1")
    assert (code, err, task_id) == (0, "", "t-1")
    assert not project.loaded("app")
    created = record("t-1", prefix="support-desk")
    assert (created["task_name"], created["state_version"]) == ("desk", 3)
    assert created["max_value_bytes"] == 100_000


def test_the_record_is_the_one_the_imported_app_creates(capsys, stack, project, monkeypatch):
    app = project.app(PLAIN, boom=False)
    code, _, err = start(capsys, stack, app, "support", "--task-id", "same", "--prefix", "read")
    assert (code, err) == (0, "")
    assert not project.loaded("app")
    monkeypatch.setattr(declaration, "read_declaration", lambda target, task: None)
    code, _, err = start(capsys, stack, app, "support", "--task-id", "same", "--prefix", "full")
    assert (code, err) == (0, "")
    assert project.loaded("app")
    read, imported = record("same", prefix="read"), record("same", prefix="full")
    for moment in ("created_at", "updated_at"):
        read.pop(moment), imported.pop(moment)
    assert json.dumps(read, sort_keys=True) == json.dumps(imported, sort_keys=True)
    assert read["state"] == {
        "question": "WHERE IS MY PARCEL?",
        "wait": 90.0,
        "raw": "6162",
        "options": {"metadata": 1, "length": 19},
        "extra_field": [1, 2],
    }


@pytest.mark.parametrize(
    ("input", "says"),
    [
        ({"question": 3}, "input for task 'support' does not validate against Chat"),
        ({"q": "x" * 400}, "input state is"),
    ],
)
def test_a_bad_input_is_refused_naming_the_task_and_creates_nothing(
    capsys, stack, project, input, says
):
    app = project.app(PLAIN.replace("Continuum()", "Continuum(max_state_bytes=300)"))
    code, out, err = start(capsys, stack, app, "support", "--task-id", "bad", input=input)
    assert (code, out) == (2, "")
    assert says in err
    assert "bad" in err
    assert not project.loaded("app")
    assert objects() == []
    assert messages(stack[3]) == []


def test_the_signing_key_comes_from_the_environment_as_the_app_reads_it(
    capsys, stack, project, monkeypatch
):
    from tests.support import clear_cache, decode_message

    monkeypatch.setenv("CONTINUUM_SIGNING_KEY", "k-new, k-old")
    clear_cache()
    app = project.app(PLAIN)
    code, task_id, _ = start(capsys, stack, app, "support")
    assert code == 0
    assert not project.loaded("app")
    got = boto3.client("sqs").receive_message(QueueUrl=stack[3])["Messages"]
    assert decode_message(got[0]["Body"], signing_key="k-new").task_id == task_id
    clear_cache()


#: Forms the source alone cannot settle: start imports the app, and still starts the task.
FALLBACKS = {
    "the model defined in the app module": PLAIN.replace("state=Chat", "state=Local").replace(
        "app = Continuum()", "class Local(Chat):\n    pass\n\n\napp = Continuum()"
    ),
    "a non-literal version": PLAIN.replace("state=Chat", "state=Chat, version=VERSION").replace(
        "app = Continuum()", "VERSION = 2\napp = Continuum()"
    ),
    "a non-literal app argument": PLAIN.replace("Continuum()", "Continuum(prefix=PREFIX)").replace(
        "app = ", "PREFIX = 'tasks'\napp = "
    ),
    "the model's name rebound later": PLAIN + "\n\nChat = Chat\n",
    "the app defined twice": PLAIN.replace(
        "app = Continuum()", "app = Continuum()\napp = Continuum()"
    ),
    "a decorator below the task's": PLAIN.replace(
        "@app.task(state=Chat)\n", "@app.task(state=Chat)\n@keep\n"
    ).replace("app = Continuum()", "def keep(fn):\n    return fn\n\n\napp = Continuum()"),
    "settings changed by code": PLAIN + "\n\napp.update_settings(max_state_bytes=50_000)\n",
    "the environment changed by code": PLAIN.replace(
        "app = Continuum()", "import os\nos.environ['X_SET_BY_APP'] = '1'\napp = Continuum()"
    ),
    "a star import": PLAIN.replace(
        "app = Continuum()", "from {models} import *\napp = Continuum()"
    ),
    "a task registered by a call": PLAIN.replace("@app.task(state=Chat)\n", "")
    + "\n\napp.task(state=Chat)(support)\n",
    "migrations, which are code": PLAIN.replace(
        "state=Chat", "state=Chat, version=2, migrations={{1: up}}"
    ).replace("app = Continuum()", "def up(state):\n    return state\n\n\napp = Continuum()"),
    "a .env loaded by the app module": PLAIN.replace(
        "app = Continuum()", "def load_dotenv():\n    pass\n\n\nload_dotenv()\napp = Continuum()"
    ),
    "a call in a class's body": PLAIN.replace(
        "app = Continuum()",
        "class Setup:\n    globals()\n\n\napp = Continuum()",
    ),
    "a class whose base runs the app's code": PLAIN.replace(
        "app = Continuum()",
        "class Base:\n    def __init_subclass__(cls):\n        pass\n\n\n"
        "class Made(Base):\n    pass\n\n\napp = Continuum()",
    ),
    "a function of the app module called at its top": PLAIN
    + "\n\ndef configure():\n    pass\n\n\nconfigure()\n",
    "a decorator of the app module's own": PLAIN.replace(
        "@app.step\n", "@app.step\n@keep\n"
    ).replace("app = Continuum()", "def keep(fn):\n    return fn\n\n\napp = Continuum()"),
    "the model's module read at the top": PLAIN + "\n\nLIMIT = Chat.model_fields\n",
    "a try at the top": PLAIN + "\n\ntry:\n    pass\nexcept ImportError:\n    pass\n",
    "a .env loader imported": PLAIN.replace(
        "app = Continuum()", "import dotenv  # noqa: F401\n\napp = Continuum()"
    ),
    "a task name that is not a literal": PLAIN.replace(
        "state=Chat", "state=Chat, name=NAME"
    ).replace("app = Continuum()", "NAME = 'support'\napp = Continuum()"),
}


@pytest.mark.parametrize("body", FALLBACKS.values(), ids=FALLBACKS.keys())
def test_a_declaration_the_source_does_not_settle_imports_the_app(capsys, stack, project, body):
    app = project.app(body, boom=False)
    code, task_id, err = start(capsys, stack, app, "support")
    assert (code, err) == (0, "")
    assert project.loaded("app")
    assert record(task_id)["task_name"] == "support"


def test_an_app_module_top_level_of_values_installed_packages_and_a_main_block_is_read(
    capsys, stack, project
):
    body = """
    import logging
    from datetime import timedelta

    from pydantic import BaseModel, Field

    LOG = logging.getLogger(__name__)
    WAIT = timedelta(days=2)
    NOTES = ["a", "b"]


    class Order(BaseModel):
        item: str = Field(max_length=40)


    ORDERS = {{"A-1": Order(item="teapot")}}
    NOTES.append("c")
    """
    main_block = "\n\nif __name__ == '__main__':\n    import os\n    os.environ['X'] = '1'\n"
    app = project.app(PLAIN + textwrap.dedent(body) + main_block)
    code, task_id, err = start(capsys, stack, app, "support")
    assert (code, err) == (0, "")
    assert not project.loaded("app")
    assert record(task_id)["task_name"] == "support"


def test_an_app_that_does_not_parse_fails_as_its_import_does_and_creates_nothing(
    capsys, stack, project
):
    app = project.app(PLAIN + "\ndef broken(:\n")
    with pytest.raises(SyntaxError):
        start(capsys, stack, app, "support")
    assert objects() == []


def test_an_unknown_task_imports_the_app_for_its_error(capsys, stack, project):
    app = project.app(PLAIN, boom=False)
    code, _, err = start(capsys, stack, app, "nope")
    assert code == 2
    assert "nope" in err
    assert project.loaded("app")
    assert objects() == []


def test_starting_the_pydantic_ai_sample_imports_neither_the_sample_nor_pydantic_ai():
    from tests.outside.processes import dev_stack
    from tests.outside.test_cli_read_commands_load_little import run_main

    with dev_stack() as (_stack, env):
        env = {**env, "CONTINUUM_APP": "samples.support_agent:app"}
        question = json.dumps({"question": "Order A-1001 arrived broken."})
        loaded = run_main("start", "support", "--input", question, env=env)
    assert loaded["code"] == 0
    assert "samples.states.support" in loaded["modules"]
    assert [m for m in loaded["modules"] if m.startswith(("pydantic_ai", "samples.support_"))] == []


def test_a_package_app_reads_a_model_imported_relatively(capsys, stack, project):
    package = project.root / project.name("desk")
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "state.py").write_text(MODELS)
    head = "from continuum import Continuum, TaskContext\n"
    (package / "app.py").write_text(head + "from .state import Chat\n" + BOOM + PLAIN)
    project.written += [package.name, f"{package.name}.app", f"{package.name}.state"]
    code, task_id, err = start(capsys, stack, f"{package.name}.app", "support")
    assert (code, err) == (0, "")
    assert f"{package.name}.app" not in sys.modules
    assert record(task_id)["state"]["question"] == "WHERE IS MY PARCEL?"


def test_a_model_module_that_imports_the_app_leaves_the_app_imported_and_used(
    capsys, stack, project
):
    app = project.app(PLAIN, boom=False)
    models = project.root / f"{project.name('models')}.py"
    models.write_text(models.read_text() + f"\nimport {app}  # noqa\n")
    code, task_id, err = start(capsys, stack, app, "support")
    assert (code, err) == (0, "")
    assert project.loaded("app")
    assert record(task_id)["task_name"] == "support"


def test_a_model_module_that_fails_to_import_fails_start_as_the_app_import_does(
    capsys, stack, project
):
    app = project.app(PLAIN, boom=False)
    models = project.root / f"{project.name('models')}.py"
    models.write_text("raise ValueError('models are broken')\n")
    with pytest.raises(ValueError, match="models are broken"):
        start(capsys, stack, app, "support")
    assert objects() == []


@pytest.mark.parametrize("read", [True, False], ids=["read", "imported"])
def test_a_refused_input_names_no_task_id_unless_one_was_given(
    capsys, stack, project, monkeypatch, read
):
    if not read:
        monkeypatch.setattr(declaration, "read_declaration", lambda target, task: None)
    app = project.app(PLAIN) if read else project.app(PLAIN, boom=False)
    code, _, err = start(capsys, stack, app, "support", input={"question": 3})
    assert code == 2
    assert "does not validate against Chat" in err
    assert "task_id" not in err
    code, _, err = start(capsys, stack, app, "support", "--task-id", "mine", input={"q": 3})
    assert code == 2
    assert "task_id='mine'" in err
