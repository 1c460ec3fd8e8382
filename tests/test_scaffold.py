"""continuum.scaffold: the one template source, and the project `continuum init` writes.

The project's template.yaml is linted (cfn-lint, on it and on its SAM translation) with every
other template check in tests/test_template.py, which runs them on a project written by
`init_project`; here the project's own tests run, as its README says, in a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from continuum import ConfigurationError
from tests.support import (
    fill,
    init_project,
    keep_flavor,
    module_name,
    render_template,
)

ROOT = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")
NAME = "my-tides"
MODULE = "my_tides"
FILES = [
    f"src/{MODULE}.py",
    f"src/{MODULE}_state.py",
    "src/handlers.py",
    "src/requirements.txt",
    f"src/wheels/continuum_lambda-{version('continuum-lambda')}-py3-none-any.whl",
    "template.yaml",
    f"tests/test_{MODULE}.py",
    "pyproject.toml",
    "README.md",
    ".gitignore",
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("init") / NAME
    written = init_project(path, NAME)
    assert written == [path / f for f in FILES]
    return path


def test_init_writes_a_project_whose_template_is_the_project_flavor(project: Path) -> None:
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()) == sorted(
        FILES
    )
    expected = render_template("project", name=NAME, app=f"{MODULE}:app")
    assert (project / "template.yaml").read_text() == expected
    assert "CodeUri: src/" in expected
    assert "BuildMethod" not in expected


def test_the_projects_own_tests_pass_in_a_fresh_interpreter(project: Path) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(project),
        # This checkout's continuum (what `pip install` would give); the project's
        # pyproject.toml puts src/ on the path, so a bare `pytest` works as its README says.
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    test = (project / "tests" / f"test_{MODULE}.py").read_text()
    # continuum's test helpers: the plugin's runner fixture, over the app pyproject.toml names,
    # and the replay check; nothing of continuum's inside, no moto.
    assert "from continuum.testing import TaskRunner, check_replay_safe" in test
    assert "def test_word_count_counts_every_word_of_every_line(continuum_runner:" in test
    assert f'continuum_app = "{MODULE}:app"' in (project / "pyproject.toml").read_text()
    assert "LocalRuntime" not in test
    assert "moto_backend" not in test


@pytest.mark.skipif(not RUFF.exists(), reason="ruff is not installed beside this Python")
def test_the_projects_python_is_lint_clean_and_formatted(project: Path) -> None:
    for command in ("check", "format --check"):  # ruff's defaults, as a new project has them
        result = subprocess.run(
            [str(RUFF), *command.split(), "--isolated", "--no-cache", "."],
            cwd=project, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr


def test_the_readme_names_the_commands_and_the_handlers_the_entry_points(project: Path) -> None:
    readme = (project / "README.md").read_text()
    for command in (
        f"continuum dev {MODULE}:app",
        "continuum start word_count",
        "continuum status TASK_ID",
        "sam build",
    ):
        assert command in readme
    assert "sam deploy --guided" in readme
    handlers = (project / "src" / "handlers.py").read_text()
    assert f"import {MODULE}" in handlers
    assert "handler = app.handler" in handlers
    assert "dead_letter_handler = app.dead_letter_handler" in handlers


def test_init_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigurationError, match="is not empty") as caught:
        init_project(tmp_path, "tides")
    assert "--force" in str(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]  # nothing written


def test_force_rewrites_the_projects_files_and_leaves_the_others(tmp_path: Path) -> None:
    init_project(tmp_path, "tides")
    (tmp_path / "src" / "tides.py").write_text("# changed")
    (tmp_path / "notes.txt").write_text("mine")
    init_project(tmp_path, "tides", force=True)
    assert "app = Continuum()" in (tmp_path / "src" / "tides.py").read_text()
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_init_refuses_a_file_as_its_directory(tmp_path: Path) -> None:
    (tmp_path / "tides").write_text("")
    with pytest.raises(ConfigurationError, match="is a file"):
        init_project(tmp_path / "tides", "tides", force=True)


@pytest.mark.parametrize(
    ("name", "module"), [("tides", "tides"), ("My-Tides", "my_tides"), ("a_2", "a_2")]
)
def test_a_project_name_gives_its_module_name(name: str, module: str) -> None:
    assert module_name(name) == module


@pytest.mark.parametrize(
    "name", ["", "2tides", "my tides", "tides!", "x" * 64, "class", "json", "continuum", "handlers"]
)
def test_a_name_that_cannot_be_a_module_or_would_hide_one_is_refused(
    name: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match="cannot name a project"):
        init_project(tmp_path / "p", name)
    assert not (tmp_path / "p").exists()


def test_render_template_refuses_an_unknown_flavor_and_a_bad_app() -> None:
    with pytest.raises(ConfigurationError, match="unknown template flavor"):
        render_template("mine")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="MODULE:ATTRIBUTE"):
        render_template("project", app="tides")


def test_flavor_blocks_keep_only_the_flavors_lines() -> None:
    text = "a\n#@ reference\nr\n#@ end\n  #@ project\np\n  #@ end\nz\n"
    assert keep_flavor(text, "reference") == "a\nr\nz\n"
    assert keep_flavor(text, "project") == "a\np\nz\n"
    for broken in (
        "#@ reference\nr\n",
        "#@ end\n",
        "#@ other\n#@ end\n",
        "#@ project\n#@ project\n",
    ):
        with pytest.raises(ValueError, match=r"marker|not closed"):
            keep_flavor(broken, "project")


def test_fill_indents_a_block_like_its_placeholder_and_refuses_strays() -> None:
    text = "Statement:\n  - Sid: A\n  {{more}}\nName: {{name}}\n"
    filled = fill(text, {"more": "- Sid: B\n  Effect: Allow\n", "name": "x"})
    assert filled == "Statement:\n  - Sid: A\n  - Sid: B\n    Effect: Allow\nName: x\n"
    with pytest.raises(KeyError, match="no value"):
        fill(text, {"name": "x"})
    with pytest.raises(KeyError, match="without a placeholder"):
        fill("{{name}}", {"name": "x", "extra": "y"})


def test_the_requirements_find_continuum_in_the_projects_own_wheel(project: Path) -> None:
    from importlib import metadata

    version = metadata.version("continuum-lambda")
    lines = (project / "src/requirements.txt").read_text().splitlines()
    assert [line for line in lines if not line.startswith("#")] == [
        "--find-links wheels",
        f"continuum-lambda=={version}",
    ]
    # Nothing names this machine: the project installs wherever it is copied.
    assert str(ROOT) not in "\n".join(lines)
    assert "file:" not in "\n".join(lines)
    assert [p.name for p in (project / "src/wheels").iterdir()] == [
        f"continuum_lambda-{version}-py3-none-any.whl"
    ]


def test_the_vendored_wheel_holds_the_package_its_metadata_and_a_true_record(
    project: Path,
) -> None:
    import base64
    import hashlib
    import zipfile
    from importlib import metadata

    import continuum

    (wheel,) = (project / "src/wheels").iterdir()
    info = wheel.name.split("-py3")[0] + ".dist-info"
    package = Path(continuum.__file__).parent
    expected = {
        f"continuum/{p.relative_to(package).as_posix()}"
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {n for n in names if n.startswith("continuum/")} == expected
        assert "continuum/scaffold/templates/task.py.tmpl" in names
        meta = archive.read(f"{info}/METADATA").decode()
        assert "Name: continuum-lambda" in meta
        assert f"Version: {metadata.version('continuum-lambda')}" in meta
        assert "continuum = continuum.cli:main" in archive.read(f"{info}/entry_points.txt").decode()
        record = archive.read(f"{info}/RECORD").decode().splitlines()
        assert {line.split(",")[0] for line in record} == names
        for line in record:
            name, digest, size = line.split(",")
            if name.endswith("RECORD"):
                continue
            data = archive.read(name)
            sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, size) == (f"sha256={sha}", str(len(data))), name


def test_the_same_continuum_vendors_the_same_wheel(tmp_path: Path) -> None:
    init_project(tmp_path / "a", "tides")
    init_project(tmp_path / "b", "tides")
    (a,) = (tmp_path / "a/src/wheels").iterdir()
    (b,) = (tmp_path / "b/src/wheels").iterdir()
    assert a.read_bytes() == b.read_bytes()


def test_init_without_an_installed_continuum_says_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from importlib import metadata

    monkeypatch.setattr(metadata, "distributions", lambda name: [])
    with pytest.raises(ConfigurationError, match="continuum-lambda is not installed") as caught:
        init_project(tmp_path / "p", "tides")
    assert "pip install" in str(caught.value)
    assert not (tmp_path / "p").exists()


def test_the_readme_stands_alone_deploy_schedules_and_links_without_continuums_repository(
    project: Path,
) -> None:
    readme = (project / "README.md").read_text()
    for command in ("sam deploy --guided", "continuum schedules sync", "aws ssm put-parameter"):
        assert command in readme, command
    assert "CallbackLinks: true" in readme
    assert "SigningKeyParameter" in readme
    for pointer in ("continuum's README", "continuum's `", "docs/", "infra/", "DEPLOY.md"):
        assert pointer not in readme, pointer


@pytest.mark.parametrize("name", ["proj", "a-rather-long-project-name"])
def test_the_readmes_file_table_aligns_its_descriptions_whatever_the_names_length(
    name: str,
) -> None:
    from continuum.scaffold.project import project_files

    readme = project_files(name)["README.md"]
    assert isinstance(readme, str)
    table = readme.split("```\n")[1].splitlines()
    assert table[0].startswith("src/")
    columns = {len(line) - len(line.split("  ")[-1].lstrip()) for line in table}
    assert len(columns) == 1, table
